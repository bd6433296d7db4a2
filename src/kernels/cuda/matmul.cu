// kernels/cuda/matmul.cu — the linear layer: cuBLAS fp32 GEMMs plus small bias kernels.
//
// cuBLAS is column-major; our matrices are row-major. A row-major [R, K] matrix is the column-major
// [K, R] matrix with the same leading dimension, i.e. its transpose, so each product is computed
// transposed, (XY)^T = Y^T X^T (spec axonn.md §6):
//   out = inp W^T     <=>  out^T  = W inp^T     gemm(T, N, m=OC, n=N,  k=C,  A=W,   lda=C, B=inp,  ldb=C)  "TN"
//   dinp += dout W    <=>  dinp^T += W^T dout^T gemm(N, N, m=C,  n=N,  k=OC, A=W,   lda=C, B=dout, ldb=OC) "NN"
//   dW += dout^T inp  <=>  dW^T   += inp^T dout gemm(N, T, m=C,  n=OC, k=N,  A=inp, lda=C, B=dout, ldb=OC) "NT"
// Plain fp32 (CUBLAS_DEFAULT_MATH, no TF32). The three GEMMs are issued row-major through
// detail::tuned_sgemm (gemm_tuning.hpp), which makes exactly these cuBLAS calls when --gemm-tuning
// is off and lets the layout tuner (spec §6) choose among their variants per shape when it is on.
#include "axonn/kernels/ops.hpp"
#include "columns.cuh"
#include "common.cuh"
#include "gemm_tuning.hpp"

namespace axonn::kernels::cuda {
namespace {

using detail::column_sums_accumulate;
using detail::global_index;
using detail::global_stride;
using detail::kWarp;

constexpr int kThreads = 256;

__global__ void add_bias_kernel(float* out, const float* bias, int64_t N, int OC) {
  for (int64_t i = global_index(); i < N * OC; i += global_stride()) out[i] += bias[i % OC];
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int C,
                    int OC) {
  // out [N,OC], inp [N,C], weight [OC,C], bias [OC] or null
  const int n = detail::to_blas_int(N, "rows N");
  if (N == 0 || OC == 0) return;
  const float one = 1.0f, zero = 0.0f;
  if (C == 0)  // an empty sum; cuBLAS refuses the leading dimension 0
    AXONN_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(N) * OC * sizeof(float), detail::stream()));
  else  // out = inp @ W^T
    detail::tuned_sgemm("fw", {.trans_a = false, .trans_b = true, .M = n, .N = OC, .K = C, .alpha = one, .A = inp,
                               .lda = C, .B = weight, .ldb = C, .beta = zero, .C = out, .ldc = OC});
  if (bias != nullptr) {
    add_bias_kernel<<<detail::grid_for(N * OC, kThreads), kThreads, 0, detail::stream()>>>(out, bias, N, OC);
    AXONN_CUDA_CHECK_LAUNCH();
  }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int C, int OC) {
  // dinp [N,C] or null, dweight [OC,C] or null, dbias [OC] or null, dout [N,OC], inp [N,C], weight [OC,C]
  // (the tensor-parallel linear calls for dinp alone, then for dweight and dbias, to overlap a collective)
  const int n = detail::to_blas_int(N, "rows N");
  if (N == 0) return;
  const float one = 1.0f;
  if (dinp != nullptr && C > 0 && OC > 0)  // dinp += dout @ W
    detail::tuned_sgemm("bw_act", {.trans_a = false, .trans_b = false, .M = n, .N = C, .K = OC, .alpha = one,
                                   .A = dout, .lda = OC, .B = weight, .ldb = C, .beta = one, .C = dinp, .ldc = C});
  if (dweight != nullptr && C > 0 && OC > 0)  // dweight += dout^T @ inp
    detail::tuned_sgemm("bw_w", {.trans_a = true, .trans_b = false, .M = OC, .N = C, .K = n, .alpha = one,
                                 .A = dout, .lda = OC, .B = inp, .ldb = C, .beta = one, .C = dweight, .ldc = C});
  if (dbias != nullptr) column_sums_accumulate(dbias, dout, N, OC);
}

}  // namespace axonn::kernels::cuda
