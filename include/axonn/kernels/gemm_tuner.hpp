// kernels/gemm_tuner.hpp — the GEMM layout tuner (spec axonn.md §6), for the CPU and CUDA backends.
//
// A BLAS's speed for one product depends on the operands' layout (which operand is transposed) and
// on which operand it sees first. The first time a call site issues a GEMM of a given shape, the
// tuner times every layout variant of it (the copies included) and keeps the fastest; later calls
// of that (engine, site, shape) run the kept variant. All variants compute the same product; they
// may differ in the last bits (another kernel sums in another order), so results agree to fp32
// rounding, not bit for bit.
//
//   kernels::set_gemm_tuning(true);                       // --gemm-tuning on
//   kernels::tuned_sgemm("fw", call);                     // CPU call site: tuner when on, sgemm when off
//   for (auto& line : kernels::gemm_tuner().report_lines()) std::puts(line.c_str());
//
// The variants of C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C (row-major) are
//   orientation  as-issued: the GEMM as the site wrote it;
//                swapped:   D[N,M] = op(B)^T op(A)^T into a temporary, then C = D^T + beta * C;
//   copy         none, or an explicit transposed copy of A (resp. B), so that the BLAS reads that
//                operand in the other layout (the "N" and "T" flags swap);
// six in all: every one is meaningful for every non-empty call (each changes the layout flags or
// the operand order the BLAS sees). Calls with a zero dimension are never tuned.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "axonn/core/dtype.hpp"

namespace axonn::kernels {

// One row-major fp32 GEMM as issued by a call site: C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C,
// op = transpose when trans_*. lda/ldb/ldc are the row strides of A, B, C as stored. beta = 0 never
// reads C (BLAS semantics).
struct GemmCall {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  float alpha = 1.0f;
  const float* A = nullptr;
  int64_t lda = 0;
  const float* B = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;
  float* C = nullptr;
  int64_t ldc = 0;
};

enum class GemmOrientation : uint8_t { kAsIssued, kSwapped };
enum class GemmCopy : uint8_t { kNone, kA, kB };
struct GemmVariant {
  GemmOrientation orientation = GemmOrientation::kAsIssued;
  GemmCopy copy = GemmCopy::kNone;
  friend bool operator==(const GemmVariant&, const GemmVariant&) = default;
};
inline constexpr GemmVariant kAsIssued{};
// Every variant, as-issued first (the tuner's reference and tie-break).
inline constexpr std::array<GemmVariant, 6> kGemmVariants{{
    {GemmOrientation::kAsIssued, GemmCopy::kNone},
    {GemmOrientation::kAsIssued, GemmCopy::kA},
    {GemmOrientation::kAsIssued, GemmCopy::kB},
    {GemmOrientation::kSwapped, GemmCopy::kNone},
    {GemmOrientation::kSwapped, GemmCopy::kA},
    {GemmOrientation::kSwapped, GemmCopy::kB},
}};

// "as-issued", "as-issued+copyA", "as-issued+copyB", "swapped", "swapped+copyA", "swapped+copyB"
std::string gemm_variant_name(GemmVariant v);
GemmVariant parse_gemm_variant(std::string_view name);  // throws InvalidArgument
// The GEMM the BLAS actually runs for `call` under `v`, as its two row-major flags ("NT": first
// operand as stored, second transposed), first operand first.
std::string gemm_variant_layout(const GemmCall& call, GemmVariant v);

// What a backend provides to run the variants. The tuner and run_gemm_variant() are written once
// over it; the CPU engine runs on host memory (OpenMP), the CUDA engine on device memory (cuBLAS,
// the legacy default stream). An engine is used by one thread at a time (each thread has its own).
class GemmEngine {
 public:
  virtual ~GemmEngine() = default;
  // Part of the tuner's key: "cpu/onednn", "cpu/openblas", "cuda".
  virtual std::string name() const = 0;
  // The GEMM as given (row-major, GemmCall's semantics).
  virtual void sgemm(const GemmCall& call) = 0;
  // dst[c, r] = src[r, c] + (accumulate ? beta * dst[c, r] : 0) for src [rows, cols] (row stride
  // ld_src) and dst [cols, rows] (row stride ld_dst). Without accumulate, dst is not read.
  virtual void transpose(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols, int64_t ld_src,
                         bool accumulate, float beta) = 0;
  // dst[r, c] = src[r, c] for [rows, cols] matrices with the given row strides.
  virtual void copy(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols, int64_t ld_src) = 0;
  // A buffer of at least `count` floats owned by the engine, one per slot (kWorkspace* below),
  // reused by the next request of the slot and valid until release_workspace().
  virtual float* workspace(int slot, size_t count) = 0;
  virtual void release_workspace() = 0;
  // Seconds `fn` takes, its queued device work included (the CUDA engine brackets it with events).
  virtual double time(const std::function<void()>& fn) = 0;
};

// Workspace slots run_gemm_variant() uses: the transposed copy of A or B, and the swapped result.
inline constexpr int kWorkspaceCopy = 0, kWorkspaceResult = 1, kWorkspaceTiming = 2;

// Runs `call` as variant `v` on `engine`. Same result as engine.sgemm(call), to fp32 rounding.
void run_gemm_variant(GemmEngine& engine, const GemmCall& call, GemmVariant v);

struct GemmTuneOptions {
  int warmup = 1;          // untimed calls of each variant first (page faults, kernel selection)
  int reps = 3;            // timed calls of each variant, interleaved across variants; the minimum counts
  double min_gain = 0.03;  // a variant replaces as-issued only when at least this much faster (noise guard)
};

// The cache key: one entry per engine, call site, shape, layout flags and element type.
struct GemmTuneKey {
  std::string engine, site;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  DType dtype = DType::kF32;
  auto tie() const { return std::tie(engine, site, m, n, k, trans_a, trans_b, dtype); }
  friend bool operator<(const GemmTuneKey& a, const GemmTuneKey& b) { return a.tie() < b.tie(); }
};

struct GemmCandidate {
  GemmVariant variant;
  std::string layout;  // gemm_variant_layout()
  double seconds = 0;  // the minimum over the timed calls, copies included
};

// What the tuner chose for one key, and why.
struct GemmTuneRecord {
  GemmTuneKey key;
  GemmVariant chosen;
  std::vector<GemmCandidate> candidates;  // in kGemmVariants order
  double speedup() const;                 // as-issued time / chosen time
  std::string str() const;                // one report line
};

class GemmTuner {
 public:
  // Runs `call` for call site `site` on `engine`: the forced variant if one is set, else the cached
  // choice for this key, else tunes the key first (times every variant on scratch output, so the
  // call's C is written once, by the chosen variant). Thread-safe: one tuning at a time.
  void gemm(GemmEngine& engine, std::string_view site, const GemmCall& call);
  // The cached choice for a key, if it was tuned.
  std::optional<GemmVariant> cached(const GemmTuneKey& key) const;
  // Tests: run every call as `v` (no timing, nothing cached); nullopt returns to tuning.
  void force(std::optional<GemmVariant> v);
  void set_options(const GemmTuneOptions& o);
  GemmTuneOptions options() const;
  // Every key tuned so far, in the order it was tuned.
  std::vector<GemmTuneRecord> records() const;
  std::vector<std::string> report_lines() const;
  // Forgets every choice (the next call of each key tunes again).
  void clear();

 private:
  mutable std::mutex mu_;  // guards everything below; never held while a GEMM runs
  std::mutex tune_mu_;     // one tuning at a time (they would time each other otherwise)
  GemmTuneOptions options_;
  std::optional<GemmVariant> forced_;
  std::map<GemmTuneKey, size_t> index_;  // key -> records_
  std::vector<GemmTuneRecord> records_;
};

// The process's tuner (both backends; the engine's name is part of each key).
GemmTuner& gemm_tuner();
// --gemm-tuning on|off, process-wide (off by default: docs/gemm-tuning.md has the measurement).
void set_gemm_tuning(bool on);
bool gemm_tuning();
bool parse_gemm_tuning(std::string_view text);  // "on" | "off"; throws InvalidArgument

// The calling thread's CPU engine over the current CPU GEMM backend (kernels::sgemm).
GemmEngine& cpu_gemm_engine();
// The calling thread's CUDA engine on its current device (device pointers, cuBLAS, the CUDA backend's
// stream). Defined only in builds with -DAXONN_CUDA=ON (link axonn_kernels_cuda).
GemmEngine& cuda_gemm_engine();
// The CPU matmul's call sites ("fw", "bw_act", "bw_w"): through the tuner when tuning is on, else
// kernels::sgemm exactly as issued.
void tuned_sgemm(std::string_view site, const GemmCall& call);

}  // namespace axonn::kernels
