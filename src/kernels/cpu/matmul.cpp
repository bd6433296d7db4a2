// kernels/cpu/matmul.cpp — the linear layers on the tuned fp32 GEMM (gemm_tuner.hpp).
#include "row_ops.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/gemm_tuner.hpp"

namespace axonn::kernels::cpu {

using namespace detail;  // NOLINT: the shared row helpers (row_ops.hpp)

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int C,
                    int OC) {
  // out [N,OC], inp [N,C], weight [OC,C], bias [OC]: out = bias (broadcast) + inp @ weight^T
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) std::memcpy(out + n * OC, bias, sizeof(float) * OC);
  }
  tuned_sgemm("fw", {.trans_a = false, .trans_b = true, .M = N, .N = OC, .K = C, .alpha = 1.0f, .A = inp, .lda = C,
                     .B = weight, .ldb = C, .beta = bias ? 1.0f : 0.0f, .C = out, .ldc = OC});
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int C, int OC) {
  // dinp [N,C], dweight [OC,C], dbias [OC], dout [N,OC], inp [N,C], weight [OC,C]
  // Each output is optional, so a caller can split the dX and dW GEMMs (to overlap a collective
  // between them) and get exactly the bits of the combined call.
  // The GEMMs go through the layout tuner when --gemm-tuning is on (sites named as in spec §6).
  if (dinp)  // dinp += dout @ W
    tuned_sgemm("bw_act", {.trans_a = false, .trans_b = false, .M = N, .N = C, .K = OC, .alpha = 1.0f, .A = dout,
                           .lda = OC, .B = weight, .ldb = C, .beta = 1.0f, .C = dinp, .ldc = C});
  if (dweight)  // dweight += dout^T @ inp
    tuned_sgemm("bw_w", {.trans_a = true, .trans_b = false, .M = OC, .N = C, .K = N, .alpha = 1.0f, .A = dout,
                         .lda = OC, .B = inp, .ldb = C, .beta = 1.0f, .C = dweight, .ldc = C});
  if (dbias) {
    // column sums, split by column so each thread owns its outputs
#pragma omp parallel
    {
      int64_t o0, o1;
      split_range(OC, omp_get_thread_num(), omp_get_num_threads(), &o0, &o1);
      for (int64_t n = 0; n < N; n++) {
        const float* d = dout + n * OC;
#pragma omp simd
        for (int64_t o = o0; o < o1; o++) dbias[o] += d[o];
      }
    }
  }
}

}  // namespace axonn::kernels::cpu
