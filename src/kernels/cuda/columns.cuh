// kernels/cuda/columns.cuh — sums down the rows of row-major matrices into fp32 columns (private), for fp32 and
// bf16 inputs alike: the linear layer's bias gradient, LayerNorm's weight and bias gradients, RMSNorm's weight
// gradient. One kernel, column_sums_kernel, over a Terms value that says what is summed at (row, columns): an
// element of one matrix, or a product of several arrays' elements.
//
// Block (32, 8): 32 threads across, each over a pack of 8 adjacent columns (packs.cuh: one 16-byte load per
// matrix where the rows are aligned, single elements otherwise), so a block covers 256 columns; 8 threads down a
// chunk of rows. The 8 partial sums of a column meet in shared memory and each block adds one atomic per column
// and output. (Threads over single columns moved 2 bytes a load in bf16, 64 bytes a warp: by Little's law the
// memory's latency, not its bandwidth, bounded those passes, as it did the row kernels'; docs/gpu.md.) Chunks have
// kChunkRows rows, or more where there would be over 65535 of them (grid.y's limit). The kernels build for the
// SIMT emulator as well (common.cuh); the launches are nvcc's.
#pragma once

#include <cstdint>

#include "common.cuh"
#include "packs.cuh"

namespace axonn::kernels::cuda::detail {

constexpr int kColThreadsY = 8;
constexpr int kColsPerBlock = kWarp * kPack;  // 256
constexpr int64_t kChunkRows = 64;

// A launch over `rows` rows and `cols` columns (both > 0): its grid, its block, the rows of a block's chunk.
struct ColumnLaunch {
  dim3 grid, block;
  int64_t rows_per_block;
};
inline ColumnLaunch column_launch(int64_t rows, int cols) {
  int64_t rows_per_block = kChunkRows;
  if ((rows + rows_per_block - 1) / rows_per_block > 65535) rows_per_block = (rows + 65534) / 65535;
  return {dim3(static_cast<unsigned>((cols + kColsPerBlock - 1) / kColsPerBlock),
               static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block)),
          dim3(kWarp, kColThreadsY), rows_per_block};
}

// The kSums outputs of a column sum.
template <int kSums>
struct ColumnOutputs {
  float* dst[kSums];
};

// dst[s][c] += sum_r terms(r, c)[s] for r < rows, c < cols. terms(r, c, cnt, whole, t) writes the terms of
// columns c .. c + cnt - 1 of row r (whole: 16-byte loads apply) into t[s][0 .. cnt), zeros after them.
template <int kSums, typename Terms>
__global__ void column_sums_kernel(ColumnOutputs<kSums> out, Terms terms, int64_t rows, int cols,
                                   int64_t rows_per_block, bool vec) {
  __shared__ float partial[kColThreadsY][kSums][kPack][kWarp + 1];
  const int c = static_cast<int>(blockIdx.x) * kColsPerBlock + static_cast<int>(threadIdx.x) * kPack;
  const int cnt = cols - c < kPack ? cols - c : kPack;  // <= 0: this thread's pack is past the last column
  const bool whole = vec && cnt == kPack;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  float acc[kSums][kPack] = {};
  if (cnt > 0)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColThreadsY) {
      float t[kSums][kPack];
      terms(r, c, cnt, whole, t);
#pragma unroll
      for (int s = 0; s < kSums; s++)
#pragma unroll
        for (int j = 0; j < kPack; j++) acc[s][j] += t[s][j];
    }
#pragma unroll
  for (int s = 0; s < kSums; s++)
#pragma unroll
    for (int j = 0; j < kPack; j++) partial[threadIdx.y][s][j][threadIdx.x] = acc[s][j];
  __syncthreads();
  if (threadIdx.y == 0 && cnt > 0)
    for (int s = 0; s < kSums; s++)
      for (int j = 0; j < cnt; j++) {
        float sum = acc[s][j];
        for (int y = 1; y < kColThreadsY; y++) sum += partial[y][s][j][threadIdx.x];
        atomicAdd(&out.dst[s][c + j], sum);
      }
}

// The terms. An element of a [rows, cols] matrix: the linear layer's bias gradient.
template <typename T>
struct ElementTerms {
  const T* src;
  int cols;
  __device__ void operator()(int64_t r, int c, int cnt, bool whole, float (&t)[1][kPack]) const {
    load8(t[0], src + r * cols + c, cnt, whole);
  }
};
// RMSNorm's weight gradient: dout[n, c] * inp[n, c] * rstd[n].
template <typename T>
struct RmsNormWeightTerms {
  const T* dout;
  const T* inp;
  const float* rstd;
  int C;
  __device__ void operator()(int64_t n, int c, int cnt, bool whole, float (&t)[1][kPack]) const {
    float x[kPack];
    load8(t[0], dout + n * C + c, cnt, whole);
    load8(x, inp + n * C + c, cnt, whole);
    const float r = rstd[n];
#pragma unroll
    for (int j = 0; j < kPack; j++) t[0][j] *= x[j] * r;
  }
};
// LayerNorm's weight and bias gradients: xhat[n, c] * dout[n, c] and dout[n, c], xhat = (inp - mean[n]) rstd[n].
template <typename T>
struct LayerNormParamTerms {
  const T* dout;
  const T* inp;
  const float* mean;
  const float* rstd;
  int C;
  __device__ void operator()(int64_t n, int c, int cnt, bool whole, float (&t)[2][kPack]) const {
    float x[kPack];
    load8(t[1], dout + n * C + c, cnt, whole);  // the missing elements read as 0, so their terms are 0
    load8(x, inp + n * C + c, cnt, whole);
    const float m = mean[n], r = rstd[n];
#pragma unroll
    for (int j = 0; j < kPack; j++) t[0][j] = (x[j] - m) * r * t[1][j];
  }
};

#if !defined(AXONN_SIMT_EMULATOR)
template <int kSums, typename Terms>
void column_sums_of(ColumnOutputs<kSums> out, Terms terms, int64_t rows, int cols, bool vec) {
  if (rows == 0 || cols == 0) return;
  const ColumnLaunch l = column_launch(rows, cols);
  column_sums_kernel<kSums, Terms><<<l.grid, l.block, 0, stream()>>>(out, terms, rows, cols, l.rows_per_block, vec);
  AXONN_CUDA_CHECK_LAUNCH();
}
// dst[c] += sum_r src[r * cols + c]
template <typename T>
void column_sums_accumulate(float* dst, const T* src, int64_t rows, int cols) {
  column_sums_of<1>({{dst}}, ElementTerms<T>{src, cols}, rows, cols, rows_aligned16<T>(cols, {src}));
}
// dweight[c] += sum_n dout[n, c] * inp[n, c] * rstd[n]
template <typename T>
void rmsnorm_weight_grad_accumulate(float* dweight, const T* dout, const T* inp, const float* rstd, int64_t N, int C) {
  column_sums_of<1>({{dweight}}, RmsNormWeightTerms<T>{dout, inp, rstd, C}, N, C, rows_aligned16<T>(C, {dout, inp}));
}
// dweight[c] += sum_n xhat[n, c] * dout[n, c], dbias[c] += sum_n dout[n, c]
template <typename T>
void layernorm_params_accumulate(float* dweight, float* dbias, const T* dout, const T* inp, const float* mean,
                                 const float* rstd, int64_t N, int C) {
  column_sums_of<2>({{dweight, dbias}}, LayerNormParamTerms<T>{dout, inp, mean, rstd, C}, N, C,
                    rows_aligned16<T>(C, {dout, inp}));
}
#endif

}  // namespace axonn::kernels::cuda::detail
