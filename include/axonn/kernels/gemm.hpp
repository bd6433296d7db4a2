// kernels/gemm.hpp — the CPU GEMM backend, behind one interface.
//
// Two backends: oneDNN's dnnl_sgemm (the default: the fastest measured on this project's
// machines, and indifferent to OPENBLAS_CORETYPE) and OpenBLAS's cblas_sgemm. The choice is
// process-wide, made once at start-up (--gemm), and benchmarks report which one ran.
#pragma once

#include <cstdint>
#include <string_view>

namespace axonn::kernels {

enum class GemmBackend { kOneDnn, kOpenBlas };
std::string_view gemm_backend_name(GemmBackend b);
GemmBackend parse_gemm_backend(std::string_view name);  // "onednn" | "openblas"; throws InvalidArgument
void set_gemm_backend(GemmBackend b);
GemmBackend gemm_backend();

// Row-major C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, op = transpose when trans_*.
// lda/ldb/ldc are the row strides of A, B, C as stored.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Measures the sustained sgemm rate of the current backend and thread count (GFLOP/s), on square
// matrices of size n (best of `reps` after a warm-up): the peak that MFU is reported against.
double measure_sgemm_gflops(int n = 1024, int reps = 5);

// Number of threads the CPU kernels use (OpenMP).
int cpu_threads();

}  // namespace axonn::kernels
