// kernels/cuda/gemm_tuning.cu — the transpose kernel of the GEMM tuner's variants (an explicit
// transposed copy of an operand, and the swapped result transposed into C).
#include "common.cuh"
#include "gemm_tuning.hpp"

namespace axonn::kernels::cuda::detail {
namespace {

// One 32 x 32 tile per block step, through shared memory so that both the reads of src and the
// writes of dst are along rows (coalesced); the extra column avoids shared-memory bank conflicts.
// Block (32, 8): each thread moves 4 elements of the tile. Tiles along rows are grid-strided
// (gridDim.y is capped at 65535).
constexpr int kTile = 32, kTileRows = 8;

__global__ void transpose_kernel(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols,
                                 int64_t ld_src, bool accumulate, float beta) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile; r0 < rows;
       r0 += static_cast<int64_t>(gridDim.y) * kTile) {
    // read rows r0.. of src, columns c0 + threadIdx.x
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[i][threadIdx.x] = src[r * ld_src + c];
    }
    __syncthreads();
    // write rows c0.. of dst (= columns of src), columns r0 + threadIdx.x (= rows of src)
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (c < cols && r < rows) {
        float* d = dst + c * ld_dst + r;
        *d = accumulate ? tile[threadIdx.x][i] + beta * *d : tile[threadIdx.x][i];
      }
    }
    __syncthreads();  // the tile is refilled by the next step
  }
}

}  // namespace

void transpose(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols, int64_t ld_src,
               bool accumulate, float beta) {
  if (rows == 0 || cols == 0) return;
  const int64_t tiles_c = (cols + kTile - 1) / kTile, tiles_r = (rows + kTile - 1) / kTile;
  AXONN_CHECK_ARG(tiles_c <= INT32_MAX, "cuda transpose: ", cols, " columns are too many for one grid");
  const dim3 grid(static_cast<unsigned>(tiles_c), static_cast<unsigned>(tiles_r < 65535 ? tiles_r : 65535));
  transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, stream()>>>(dst, ld_dst, src, rows, cols, ld_src, accumulate,
                                                                  beta);
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace axonn::kernels::cuda::detail
