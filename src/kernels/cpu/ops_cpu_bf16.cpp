// kernels/cpu/ops_cpu_bf16.cpp — the ops of the cpu_bf16 table that work on bf16 directly: the matmuls
// (native bf16 GEMMs, gemm.hpp's gemm_bf16: oneDNN's AMX / AVX512-BF16 kernels, fp32 accumulation, each
// bf16 output rounded once) and the embedding lookup. The other ops of cpu_bf16 widen to fp32 and run
// kernels::cpu (ref/ops_ref_bf16.cpp).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "axonn/core/dtype.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/ops_bf16.hpp"

namespace axonn::kernels::cpu {

void embedding_forward(bf16* out, const int* inp, const bf16* wte, int row_begin, int R, int64_t N, int C) {
  // out [N,C] = wte [R,C] row inp[n] - row_begin, or zeros outside the range. A lookup moves values, so
  // this is round(widen(row)) bit for bit, without widening the whole table (50304 x 768 for GPT-2).
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const int r = inp[n] - row_begin;
    bf16* o = out + n * C;
    if (r >= 0 && r < R)
      std::memcpy(o, wte + static_cast<int64_t>(r) * C, sizeof(bf16) * static_cast<size_t>(C));
    else
      std::memset(o, 0, sizeof(bf16) * static_cast<size_t>(C));
  }
}

void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int64_t N, int C, int OC) {
  // out [N,OC] = round(inp [N,C] @ weight [OC,C]^T + bias [OC] or null), summed in fp32
  gemm_bf16_round(false, true, N, OC, C, inp, C, weight, C, bias, false, out, OC);
}

void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                     int64_t N, int C, int OC) {
  // dinp [N,C] bf16 += dout [N,OC] @ weight [OC,C] (old value + product in fp32, rounded once);
  // dweight [OC,C] fp32 += dout^T @ inp [N,C] (beta = 1, straight into the gradient); dbias [OC] fp32 +=
  // column sums of dout. Any output may be null (the tensor-parallel linear asks for them separately).
  if (dinp) gemm_bf16_round(false, false, N, C, OC, dout, OC, weight, C, nullptr, true, dinp, C);
  if (dweight) gemm_bf16(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias) {
    // column sums, split by column so each thread owns its outputs (deterministic)
#pragma omp parallel
    {
      const int64_t chunk = (OC + omp_get_num_threads() - 1) / omp_get_num_threads();
      const int64_t o0 = std::min<int64_t>(OC, chunk * omp_get_thread_num()), o1 = std::min<int64_t>(OC, o0 + chunk);
      for (int64_t n = 0; n < N; n++) {
        const bf16* d = dout + n * OC;
#pragma omp simd
        for (int64_t o = o0; o < o1; o++) dbias[o] += bf16_to_f32(d[o]);
      }
    }
  }
}

}  // namespace axonn::kernels::cpu
