// kernels/gemm.hpp — the CPU GEMM backend, behind one interface.
//
// Two backends: oneDNN's dnnl_sgemm (the default: the fastest measured on this project's
// machines, and indifferent to OPENBLAS_CORETYPE) and OpenBLAS's cblas_sgemm; each also serves the bf16
// GEMMs of mixed precision (gemm_bf16). The choice is process-wide, made once at start-up (--gemm), and
// benchmarks report which one ran.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include <string_view>

namespace axonn::kernels {

enum class GemmBackend { kOneDnn, kOpenBlas };
std::string_view gemm_backend_name(GemmBackend b);
GemmBackend parse_gemm_backend(std::string_view name);  // "onednn" | "openblas"; throws InvalidArgument
void set_gemm_backend(GemmBackend b);
GemmBackend gemm_backend();

// Row-major C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, op = transpose when trans_*.
// lda/ldb/ldc are the row strides of A, B, C as stored. M <= 8 (a decode step's products, one row per
// sequence) runs the project's own OpenMP loops under either backend, which read the weights once for all
// rows: bound by memory, where both libraries are slower or spin (docs/generate.md). A row's result is then
// the same whatever M and the thread count. gemm_bf16 and gemm_bf16_round do the same with bf16 inputs.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The few-row product's kernels (M <= 8) come in variants that differ in how many outputs one pass over the
// weights computes and whether they prefetch (few_rows_variant_names()); every variant sums each output in one
// order, so they give the same bits. Which is fastest depends on the CPU: by default each shape's is measured on
// its first calls (per calling thread) and the fastest kept. set_few_rows_variant(i) runs variant i for every
// shape instead (tests, benchmarks); -1 (the default) goes back to the measured choice.
std::vector<std::string> few_rows_variant_names();
void set_few_rows_variant(int variant);

// bf16 GEMMs (mixed precision, docs/precision.md): A and B are bf16 (the bits, kernels::bf16), products
// exact in fp32, fp32 accumulation. What runs depends on the backend and the CPU, probed once per backend
// (gemm_bf16_kernel() names it): oneDNN's matmul primitive (AMX or AVX512-BF16 brgemm kernels) for
// onednn; OpenBLAS's cblas_sbgemm for openblas when the library exports it (Debian's 0.3.21 does not).
// Without a native bf16 GEMM (or for a shape oneDNN serves only with its reference kernel), the operands
// are widened to fp32 and sgemm runs: the same numbers to fp32 summation order, slower; a warning says
// so once. Deterministic for a given shape, backend and thread count.
//
// Row-major C[M,N] (fp32) = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, as sgemm.
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc);
// Row-major C[M,N] (bf16) = round(op(A) @ op(B) + bias + (accumulate ? C : 0)): the product, the bias
// [N] (bf16, may be null) and the old value of C are summed in fp32 and rounded once (to nearest even).
// With oneDNN the rounding is fused into the GEMM; otherwise the product goes through an fp32 buffer.
void gemm_bf16_round(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                     const uint16_t* B, int64_t ldb, const uint16_t* bias, bool accumulate, uint16_t* C,
                     int64_t ldc);
// What gemm_bf16 runs with the current backend on this CPU, e.g. "oneDNN matmul brg:avx512_core_amx_bf16",
// "OpenBLAS cblas_sbgemm" or "none: widened to fp32, sgemm" (probes the backend on the first call).
std::string gemm_bf16_kernel();
// Whether gemm_bf16 runs a native bf16 GEMM with the current backend (false: widened to fp32).
bool gemm_bf16_native();

// Measures the sustained sgemm rate of the current backend and thread count (GFLOP/s), on square
// matrices of size n (best of `reps` after a warm-up): the peak that MFU is reported against.
double measure_sgemm_gflops(int n = 1024, int reps = 5);
// The same for gemm_bf16 (bf16 inputs, fp32 output): the peak of bf16 runs (gemm_bf16_kernel() says what
// ran; without a native bf16 GEMM it is the rate of the widened sgemm).
double measure_bf16_gemm_gflops(int n = 1024, int reps = 5);

// The MFU peak of this rank: the best rate of the GEMM of the precision (sgemm, or gemm_bf16 when bf16)
// over `trials` timings of every square size in `sizes` (each after a warm-up). A rate can only be lowered
// by a disturbance, never raised, so the best of many short timings is the least disturbed one; the
// sizes cover where the backend's blocking is at its best. `n` is the size that gave the best rate.
// `before_each_timing` (may be empty) runs before each warm-up and each timed product: with a barrier
// there (train/peak.cpp), every rank times the same product at the same moment, as they compute in a run.
struct GemmPeak {
  double gflops = 0;
  int n = 0;
};
GemmPeak measure_gemm_peak(bool bf16, const std::vector<int>& sizes, int trials,
                           const std::function<void()>& before_each_timing = {});
// The GEMM libraries' versions: "oneDNN 2.7.3 (commit ...)" and OpenBLAS's configuration ("OpenBLAS 0.3.21
// DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"), for the run's record (run.json).
std::string onednn_version();
std::string openblas_version();

// Number of threads the CPU kernels use (OpenMP).
int cpu_threads();
// Sets it (OpenMP's, which oneDNN follows, and OpenBLAS's).
void set_cpu_threads(int threads);

}  // namespace axonn::kernels
