// kernels/cuda/columns.cuh — sums down the rows of a row-major matrix into fp32 columns (private), for
// fp32 and bf16 inputs alike: the linear layer's bias gradient, LayerNorm's weight/bias gradients and RMSNorm's
// weight gradient.
//
// Block (32, 8): 32 adjacent columns (coalesced loads), 8 threads down a chunk of rows; the 8 partial
// sums meet in shared memory and each block adds one atomic per column. Chunks have at least 256 rows
// and there are at most 65535 of them (grid.y's limit). The kernels build for the SIMT emulator as well
// (common.cuh); the launches are nvcc's.
#pragma once

#include <cstdint>

#include "common.cuh"
#include "packs.cuh"

namespace axonn::kernels::cuda::detail {

constexpr int kColThreadsY = 8;

// The launch grid over `cols` columns and `rows` rows (both > 0); sets the rows per block.
inline dim3 column_grid(int64_t rows, int cols, int64_t& rows_per_block) {
  rows_per_block = 256;
  if ((rows + rows_per_block - 1) / rows_per_block > 65535) rows_per_block = (rows + 65534) / 65535;
  return dim3(static_cast<unsigned>((cols + kWarp - 1) / kWarp),
              static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block));
}

// dst[c] += sum_r term(r, c) for r < rows, c < cols: `term` a device-callable value (the element itself, or a
// product of several arrays' elements at (r, c))
template <typename Term>
__global__ void column_sums_kernel(float* dst, Term term, int64_t rows, int cols, int64_t rows_per_block) {
  __shared__ float partial[kColThreadsY][kWarp + 1];
  const int c = blockIdx.x * kWarp + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  float acc = 0.0f;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColThreadsY) acc += term(r, c);
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int y = 1; y < kColThreadsY; y++) acc += partial[y][threadIdx.x];
    atomicAdd(&dst[c], acc);
  }
}

// The terms: an element of a [rows, cols] matrix (the linear layer's bias gradient), and RMSNorm's weight
// gradient's dout[n, c] * inp[n, c] * rstd[n].
template <typename T>
struct Element {
  const T* src;
  int cols;
  __device__ float operator()(int64_t r, int c) const { return load_f32(src[r * cols + c]); }
};
template <typename T>
struct RmsNormWeightTerm {
  const T* dout;
  const T* inp;
  const float* rstd;
  int C;
  __device__ float operator()(int64_t r, int c) const {
    return load_f32(dout[r * C + c]) * load_f32(inp[r * C + c]) * rstd[r];
  }
};

#if !defined(AXONN_SIMT_EMULATOR)
template <typename Term>
void column_sums_of(float* dst, Term term, int64_t rows, int cols) {
  if (rows == 0 || cols == 0) return;
  int64_t rows_per_block = 0;
  const dim3 grid = column_grid(rows, cols, rows_per_block);
  column_sums_kernel<Term><<<grid, dim3(kWarp, kColThreadsY), 0, stream()>>>(dst, term, rows, cols, rows_per_block);
  AXONN_CUDA_CHECK_LAUNCH();
}
// dst[c] += sum_r src[r * cols + c]
template <typename T>
void column_sums_accumulate(float* dst, const T* src, int64_t rows, int cols) {
  column_sums_of(dst, Element<T>{src, cols}, rows, cols);
}
// dweight[c] += sum_n dout[n, c] * inp[n, c] * rstd[n]
template <typename T>
void rmsnorm_weight_grad_accumulate(float* dweight, const T* dout, const T* inp, const float* rstd, int64_t N, int C) {
  column_sums_of(dweight, RmsNormWeightTerm<T>{dout, inp, rstd, C}, N, C);
}
#endif

// LayerNorm's parameter gradients: dweight[c] += sum_n xhat[n, c] * dout[n, c], dbias[c] += sum_n dout[n, c],
// xhat = (inp - mean[n]) * rstd[n].
template <typename T>
__global__ void layernorm_params_kernel(float* dweight, float* dbias, const T* dout, const T* inp, const float* mean,
                                        const float* rstd, int64_t N, int C, int64_t rows_per_block) {
  __shared__ float sw[kColThreadsY][kWarp + 1], sb[kColThreadsY][kWarp + 1];
  const int c = blockIdx.x * kWarp + threadIdx.x;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  const int64_t n1 = n0 + rows_per_block < N ? n0 + rows_per_block : N;
  float aw = 0.0f, ab = 0.0f;
  if (c < C)
    for (int64_t n = n0 + threadIdx.y; n < n1; n += kColThreadsY) {
      const float dy = load_f32(dout[n * C + c]);
      aw += (load_f32(inp[n * C + c]) - mean[n]) * rstd[n] * dy;
      ab += dy;
    }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int y = 1; y < kColThreadsY; y++) {
      aw += sw[y][threadIdx.x];
      ab += sb[y][threadIdx.x];
    }
    atomicAdd(&dweight[c], aw);
    atomicAdd(&dbias[c], ab);
  }
}

#if !defined(AXONN_SIMT_EMULATOR)
template <typename T>
void layernorm_params_accumulate(float* dweight, float* dbias, const T* dout, const T* inp, const float* mean,
                                 const float* rstd, int64_t N, int C) {
  if (N == 0 || C == 0) return;
  int64_t rows_per_block = 0;
  const dim3 grid = column_grid(N, C, rows_per_block);
  layernorm_params_kernel<T><<<grid, dim3(kWarp, kColThreadsY), 0, stream()>>>(dweight, dbias, dout, inp, mean,
                                                                               rstd, N, C, rows_per_block);
  AXONN_CUDA_CHECK_LAUNCH();
}
#endif

}  // namespace axonn::kernels::cuda::detail
