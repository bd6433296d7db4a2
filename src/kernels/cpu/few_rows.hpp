// kernels/cpu/few_rows.hpp — the product of a few rows (private to kernels/cpu): what sgemm, gemm_bf16 and
// gemm_bf16_round run for M <= kFewRows under either GEMM backend (kernels/gemm.hpp says why).
#pragma once

#include <cstdint>

namespace axonn::kernels::detail {

// A decode step's linears and LM head: one row per sequence of the batch.
constexpr int64_t kFewRows = 8;

// Row-major C[M, N] = alpha * op(A)[M, K] @ op(B)[K, N] + beta * C for 1 <= M <= kFewRows, fp32 sums; the
// uint16_t overload takes bf16 bits. Each output is one thread's sum in an order fixed by K alone.
void few_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void few_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
              int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace axonn::kernels::detail
