// kernels/cuda/matmul.cu — the linear layer: cuBLAS fp32 GEMMs; the bias broadcast into the output first and
// added by the GEMM as C with beta = 1 (as matmul_bf16.cu), its gradient a sum down the rows (columns.cuh).
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
#include "gemm_tuning.hpp"
#include "packs.cuh"

namespace axonn::kernels::cuda {

using detail::column_sums_accumulate;

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int C,
                    int OC) {
  // out [N,OC], inp [N,C], weight [OC,C], bias [OC] or null
  const int n = detail::to_blas_int(N, "rows N");
  if (N == 0 || OC == 0) return;
  // out = bias (or 0: the empty sum C = 0, whose leading dimension cuBLAS refuses), then out += inp @ W^T: the
  // bias is added in the GEMM's epilogue instead of in a second pass over the output (it was a thread and a 64-bit
  // modulo per element)
  if (bias != nullptr || C == 0) detail::fill_rows(out, bias, N, OC);
  if (C == 0) return;
  detail::tuned_sgemm("fw", {.trans_a = false, .trans_b = true, .M = n, .N = OC, .K = C, .alpha = 1.0f, .A = inp,
                             .lda = C, .B = weight, .ldb = C, .beta = bias != nullptr ? 1.0f : 0.0f, .C = out,
                             .ldc = OC});
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
