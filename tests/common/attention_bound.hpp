// Test helpers: the bound of a bf16 flash attention against the oracle (kernels::ref_bf16_ops()'s attention), shared
// by the GPU tests (tests/cuda/kernels/test_cuda_bf16.cpp) and the SIMT emulator's (tests/unit/cuda_emu).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tensor_expect.hpp"

namespace axonn::test {

constexpr float kBf16Ulp = 1.0f / 128.0f;  // one bf16 ulp, relative
constexpr float kBf16Abs = 1e-4f;          // values near 0 that come out of cancellation

// Bound: one bf16 ulp of the value (kBf16Ulp |want|) + kBf16Abs, as every bf16 op, plus kBf16Ulp * (a sum of the
// terms' magnitudes) for two roundings the oracle does not make; each moves a result by at most 2^-8 of that
// sum, so the allowance is twice the worst case (the rest covers the fp32 noise: other summation orders).
//   - D (scratch) is rowsum(dout * out) with the bf16 `out` (the contract, FlashAttention-2's D), while the
//     oracle's gradient is the exact one (sum_t2 p dp, the unrounded output): |dD_t| <= 2^-8 sum_d |dout||out|,
//     which moves dq and dk (ds = p (dp - D)). Both implementations. (`rounded_d`)
//   - The tensor cores round P and dS to bf16 before their second product (P V, P^T dO, dS K, dS^T Q): each
//     term by at most 2^-8 of itself. Tensor cores only. (`rounded_p`)
// lse and D themselves see neither: fp32 level.
struct AttentionMagnitudes {
  std::vector<float> out;        // [B,T,C], rounded_p: sum_t2 p |v|
  std::vector<float> dqkv;       // [B,T,3C], rounded_p: dq = scale sum_t2 |ds| |k|, dk = scale sum_t |ds| |q|,
                                 //   dv = sum_t p |dout|
  std::vector<float> dqkv_of_d;  // [B,T,3C], rounded_d: dq = scale m_t sum_t2 p |k|, dk = scale sum_t p m_t |q|,
                                 //   with m_t = sum_d |dout||out| (dv does not depend on D)
};
// In double from the oracle's out, lse and D, with p = exp(scale q.k - lse), ds = p (dout.v - D), t2 <= t.
inline AttentionMagnitudes attention_magnitudes(const std::vector<uint16_t>& qkv_bf,
                                                const std::vector<uint16_t>& dout_bf,
                                                const std::vector<uint16_t>& out_bf, const std::vector<float>& lse,
                                                const std::vector<float>& D, int B, int T, int C, int NH) {
  const int HS = C / NH;
  const size_t C3 = 3 * static_cast<size_t>(C);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  const std::vector<float> x = widen(qkv_bf), dy = widen(dout_bf), y = widen(out_bf);
  std::vector<double> out(y.size(), 0.0), dqkv(x.size(), 0.0), of_d(x.size(), 0.0);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const size_t qrow = (static_cast<size_t>(b) * T + t) * C3 + static_cast<size_t>(h) * HS;
        const size_t orow = (static_cast<size_t>(b) * T + t) * C + static_cast<size_t>(h) * HS;
        const size_t stat = (static_cast<size_t>(b) * NH + h) * T + t;
        double m = 0.0;
        for (int d = 0; d < HS; d++) m += std::fabs(static_cast<double>(dy[orow + d]) * y[orow + d]);
        for (int t2 = 0; t2 <= t; t2++) {
          const size_t krow = (static_cast<size_t>(b) * T + t2) * C3 + C + static_cast<size_t>(h) * HS;
          const size_t vrow = krow + C;
          double s = 0.0, dp = 0.0;
          for (int d = 0; d < HS; d++) {
            s += static_cast<double>(x[qrow + d]) * x[krow + d];
            dp += static_cast<double>(dy[orow + d]) * x[vrow + d];
          }
          const double p = std::exp(s * scale - lse[stat]), ds = std::fabs(p * (dp - D[stat]));
          for (int d = 0; d < HS; d++) {
            out[orow + d] += p * std::fabs(x[vrow + d]);
            dqkv[qrow + d] += scale * ds * std::fabs(x[krow + d]);
            dqkv[krow + d] += scale * ds * std::fabs(x[qrow + d]);
            dqkv[vrow + d] += p * std::fabs(dy[orow + d]);
            of_d[qrow + d] += scale * m * p * std::fabs(x[krow + d]);
            of_d[krow + d] += scale * m * p * std::fabs(x[qrow + d]);
          }
        }
      }
  return {std::vector<float>(out.begin(), out.end()), std::vector<float>(dqkv.begin(), dqkv.end()),
          std::vector<float>(of_d.begin(), of_d.end())};
}

// got within one bf16 ulp of want (+ kBf16Abs) + kBf16Ulp * the sum of the magnitudes given.
inline ::testing::AssertionResult close_attention(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                                                  std::initializer_list<const std::vector<float>*> mags) {
  std::vector<float> extra(got.size(), 0.0f);
  for (const std::vector<float>* m : mags)
    for (size_t i = 0; i < extra.size() && i < m->size(); i++) extra[i] += kBf16Ulp * (*m)[i];
  return allclose(widen(got), widen(want), kBf16Abs, kBf16Ulp, extra);
}


}  // namespace axonn::test
