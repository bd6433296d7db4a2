// A row-major GEMM problem for the layout tuner's tests (CPU and CUDA engines): random A, B, C with
// padded leading dimensions, C's padding holding a marker no variant may touch, and C full of NaN when
// beta = 0 (it must not be read); check() compares a result with the double-precision product.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "axonn/kernels/gemm_tuner.hpp"
#include "tensor_expect.hpp"

namespace axonn::test {

struct GemmProblem {
  static constexpr float kPadding = 12345.0f;
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  std::vector<float> a, b, c;

  GemmProblem(bool ta_, bool tb_, int64_t M_, int64_t N_, int64_t K_, float alpha_, float beta_, uint32_t seed)
      : ta(ta_), tb(tb_), M(M_), N(N_), K(K_), alpha(alpha_), beta(beta_) {
    lda = (ta ? M : K) + 3;
    ldb = (tb ? K : N) + 2;
    ldc = N + 5;
    a = randn(static_cast<size_t>((ta ? K : M) * lda), seed);
    b = randn(static_cast<size_t>((tb ? N : K) * ldb), seed + 1);
    c = randn(static_cast<size_t>(M * ldc), seed + 2);
    if (beta == 0.0f)  // must not be read: NaNs in it would show in the result
      for (auto& x : c) x = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = N; j < ldc; j++) c[static_cast<size_t>(i * ldc + j)] = kPadding;
  }
  // The call on operands wherever they live (host or device copies of a, b) into C.
  kernels::GemmCall call(const float* A, const float* B, float* C) const {
    return {ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
  }
  // The call on the host operands.
  kernels::GemmCall call(float* C) const { return call(a.data(), b.data(), C); }

  float A(int64_t i, int64_t p) const { return a[static_cast<size_t>(ta ? p * lda + i : i * lda + p)]; }
  float B(int64_t p, int64_t j) const { return b[static_cast<size_t>(tb ? j * ldb + p : p * ldb + j)]; }

  // `out` against the product in double precision, within the fp32 error bound of a length-K dot
  // product plus the beta term, (K + 2) eps (|alpha| sum |a b| + |beta c|), with C's padding untouched;
  // with `vs` (named `vs_name`), also against that other result within twice the bound.
  ::testing::AssertionResult check(const std::vector<float>& out, const std::vector<float>* vs = nullptr,
                                   const char* vs_name = "the other") const {
    const double eps = std::numeric_limits<float>::epsilon();
    for (int64_t i = 0; i < M; i++) {
      for (int64_t j = 0; j < ldc; j++) {
        const size_t at = static_cast<size_t>(i * ldc + j);
        if (j >= N) {
          if (out[at] != kPadding) return ::testing::AssertionFailure() << "padding of C written at " << i << "," << j;
          continue;
        }
        double exact = 0, mag = 0;
        for (int64_t p = 0; p < K; p++) {
          exact += static_cast<double>(A(i, p)) * B(p, j);
          mag += std::fabs(static_cast<double>(A(i, p)) * B(p, j));
        }
        exact *= alpha;
        mag *= std::fabs(alpha);
        if (beta != 0.0f) {
          exact += static_cast<double>(beta) * c[at];
          mag += std::fabs(static_cast<double>(beta) * c[at]);
        }
        const double tol = static_cast<double>(K + 2) * eps * mag + 1e-30;
        if (!(std::fabs(out[at] - exact) <= tol))
          return ::testing::AssertionFailure() << "C[" << i << "," << j << "] = " << out[at] << ", want " << exact
                                               << " within " << tol;
        if (vs && !(std::fabs(out[at] - (*vs)[at]) <= 2 * tol))
          return ::testing::AssertionFailure() << "C[" << i << "," << j << "] = " << out[at] << ", " << vs_name
                                               << " " << (*vs)[at] << ", not within " << 2 * tol;
      }
    }
    return ::testing::AssertionSuccess();
  }
};

}  // namespace axonn::test
