// kernels/cpu/gemm.cpp — the CPU GEMM backends (oneDNN, OpenBLAS), fp32 and bf16. The only file that
// includes their headers.
#include "axonn/kernels/gemm.hpp"

#include <cblas.h>
#if defined(__AVX512BF16__)
#include <immintrin.h>  // the bf16 pairs of the few-row product
#endif
#include <dlfcn.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <unordered_map>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/timer.hpp"

namespace axonn::kernels {

namespace {
std::atomic<GemmBackend> g_backend{GemmBackend::kOneDnn};
}

std::string_view gemm_backend_name(GemmBackend b) {
  return b == GemmBackend::kOneDnn ? "onednn" : "openblas";
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return ::axonn::detail::concat("oneDNN ", v->major, ".", v->minor, ".", v->patch, " (commit ", v->hash, ")");
}

std::string openblas_version() { return openblas_get_config(); }

GemmBackend parse_gemm_backend(std::string_view name) {
  if (name == "onednn") return GemmBackend::kOneDnn;
  if (name == "openblas") return GemmBackend::kOpenBlas;
  throw InvalidArgument("unknown GEMM backend '" + std::string(name) + "'; use onednn or openblas");
}

void set_gemm_backend(GemmBackend b) { g_backend.store(b); }
GemmBackend gemm_backend() { return g_backend.load(); }

namespace {

// C[:R, :N] = alpha * op(A) @ op(B) + beta * C for a few rows (R <= kFewRows: a decode step's linears and LM
// head, one row per sequence of the batch), which streams the weights once for all R rows and so is bound by
// memory. dnnl_sgemm at M = 1 streams them at about 60% of the speed of these loops, and at M = 8 it reads
// them more than once; OpenBLAS's sgemv, as fast idle, runs on its own threads, which spin where other
// processes share the cores (2 threads beside two busy processes: 5.7 tokens/s against 41; docs/generate.md).
// Here the OpenMP threads (waiting as the command chose) share the outputs; each output is one thread's sum
// in an order fixed by K alone, so a row's result depends neither on the thread count nor on how many rows
// share the call (a sequence decodes the same alone and in a batch). T is float, or bf16 bits widened
// exactly to fp32 as they are read (fp32 accumulation).
constexpr int64_t kFewRows = 8;

inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return bf16_to_f32(x); }
inline const float* row_as_f32(const float* row, float*, int64_t) { return row; }
inline const float* row_as_f32(const uint16_t* row, float* buf, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) buf[i] = bf16_to_f32(row[i]);
  return buf;
}

template <class T>
struct FewRows {
  bool trans_b;
  int64_t N, K;
  float alpha;
  const float* const* a;  // R rows of op(A), each K contiguous fp32 elements
  const T* B;
  int64_t ldb;
  float beta;
  float* C;
  int64_t ldc;
};

// 16 fp32 lanes as one vector (one AVX-512 register; the compiler splits it where the CPU's vectors are
// narrower). Loaded through memcpy (no alignment assumed) and passed by reference only.
using Lanes = float __attribute__((vector_size(64)));
using Bf16x16 = uint16_t __attribute__((vector_size(32)));
using U32x16 = uint32_t __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

inline void load_lanes(Lanes& v, const float* p) { std::memcpy(&v, p, sizeof v); }
inline void load_lanes(Lanes& v, const uint16_t* p) {  // bf16 widened exactly: its bits are fp32's top half
  Bf16x16 h;
  std::memcpy(&h, p, sizeof h);
  const U32x16 w = __builtin_convertvector(h, U32x16) << 16;
  std::memcpy(&v, &w, sizeof v);
}

// Outputs j .. j + J - 1 of R rows, B being [N, K]: each row of B against each row of op(A), in 16 lanes per
// output, summed over K in order and then over the lanes by a fixed tree (the same for any R and J). J outputs
// at once so that each 16-element chunk of a row of op(A), read from cache, serves J rows of B, and each chunk
// of B (widened once) serves all R rows: R * J independent sums in registers (one output at a time, a step of
// 8 rows loaded 9 vectors for 8 multiply-adds and ran at a third of its arithmetic).
template <class T, int R, int J, class Finish>
void dots(const FewRows<T>& f, int64_t j, const Finish& finish) {
  const int64_t K = f.K;
  const T* b[J];
  for (int q = 0; q < J; q++) b[q] = f.B + (j + q) * f.ldb;
  Lanes acc[J][R] = {};
  int64_t p = 0;
  for (; p + kLanes <= K; p += kLanes) {
    Lanes bv[J];
    for (int q = 0; q < J; q++) load_lanes(bv[q], b[q] + p);
    for (int r = 0; r < R; r++) {
      Lanes av;
      load_lanes(av, f.a[r] + p);
#if defined(__AVX512F__)
      asm("" : "+v"(av));  // kept in a register: the compiler would load it again for each of the J products
#endif
      for (int q = 0; q < J; q++) acc[q][r] += av * bv[q];
    }
  }
  for (int q = 0; q < J; q++)
    for (int r = 0; r < R; r++) {
      float lanes[kLanes];
      std::memcpy(lanes, &acc[q][r], sizeof lanes);
      for (int64_t l = 0; p + l < K; l++) lanes[l] += f.a[r][p + l] * widen(b[q][p + l]);
      for (int64_t half = kLanes / 2; half > 0; half /= 2)  // a fixed tree over the lanes
        for (int64_t l = 0; l < half; l++) lanes[l] += lanes[l + half];
      finish(r, j + q, lanes[0]);
    }
}

// How many outputs one dots call computes for R rows, as measured (llama-124m's linears, weights streamed from
// memory, 1 and 2 threads): up to 4 rows, one (its row of B is then one sequential stream, and 2 to 4 rows
// interleaved read memory up to 2x slower); from 5 rows, 4 (a batch of 8 decodes 1.2-1.4x faster than one
// output at a time, although 32 sums do not all fit in registers; 3 outputs gained less, prefetching nothing).
constexpr int outputs_per_call(int R) { return R <= 4 ? 1 : 4; }

#if defined(__AVX512BF16__)
// bf16 rows against bf16 weights on AVX512-BF16: each instruction multiplies 16 pairs of bf16 elements and adds
// both products to 16 fp32 sums (the products are exact in fp32, each addition rounded to nearest even), so a
// 32-element chunk of K costs one load and one instruction per row and output, where widening both to fp32
// cost two loads, a widening and two multiply-adds. Lane i sums elements 2i and 2i + 1 of every chunk, in order
// of K; the tail goes to the lanes in the same pattern, then the same fixed tree over the lanes. Like dots(),
// the order depends on K alone: a row's result is the same alone and in a batch.
constexpr int64_t kPairLanes = 32;  // bf16 elements a 512-bit register holds

template <int R, int J, class Finish>
void dots_bf16_pairs(const FewRows<uint16_t>& f, const uint16_t* const* a, int64_t j, const Finish& finish) {
  const int64_t K = f.K;
  const uint16_t* b[J];
  for (int q = 0; q < J; q++) b[q] = f.B + (j + q) * f.ldb;
  __m512 acc[J][R];
  for (int q = 0; q < J; q++)
    for (int r = 0; r < R; r++) acc[q][r] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + kPairLanes <= K; p += kPairLanes) {
    __m512bh bv[J];
    for (int q = 0; q < J; q++) bv[q] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b[q] + p));
    for (int r = 0; r < R; r++) {
      __m512i bits = _mm512_loadu_si512(a[r] + p);
      asm("" : "+v"(bits));  // kept in a register: the compiler would load it again for each of the J products
      const __m512bh av = reinterpret_cast<__m512bh>(bits);
      for (int q = 0; q < J; q++) acc[q][r] = _mm512_dpbf16_ps(acc[q][r], av, bv[q]);
    }
  }
  for (int q = 0; q < J; q++)
    for (int r = 0; r < R; r++) {
      float lanes[kLanes];
      _mm512_storeu_ps(lanes, acc[q][r]);
      for (int64_t l = 0; p + l < K; l++) lanes[l / 2] += bf16_to_f32(a[r][p + l]) * bf16_to_f32(b[q][p + l]);
      for (int64_t half = kLanes / 2; half > 0; half /= 2)  // a fixed tree over the lanes
        for (int64_t l = 0; l < half; l++) lanes[l] += lanes[l + half];
      finish(r, j + q, lanes[0]);
    }
}

template <int R>
void few_rows_bf16_pairs(const FewRows<uint16_t>& f, const uint16_t* const* a) {
  auto finish = [&](int r, int64_t j, float acc) {
    float& c = f.C[r * f.ldc + j];
    c = f.alpha * acc + (f.beta != 0.0f ? f.beta * c : 0.0f);
  };
  const bool parallel = f.N * f.K >= (int64_t{1} << 15);  // below, a parallel region costs more than it saves
  constexpr int J = outputs_per_call(R);
  const int64_t blocks = f.N / J;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < blocks; i++) dots_bf16_pairs<R, J>(f, a, i * J, finish);
  for (int64_t j = blocks * J; j < f.N; j++) dots_bf16_pairs<R, 1>(f, a, j, finish);
}

template <size_t... I>
constexpr auto few_rows_bf16_pairs_table(std::index_sequence<I...>) {
  return std::array<void (*)(const FewRows<uint16_t>&, const uint16_t* const*), sizeof...(I)>{
      &few_rows_bf16_pairs<static_cast<int>(I) + 1>...};
}
#endif

template <class T, int R>
void few_rows_product(const FewRows<T>& f) {
  const int64_t N = f.N, K = f.K;
  auto finish = [&](int r, int64_t j, float acc) {
    float& c = f.C[r * f.ldc + j];
    c = f.alpha * acc + (f.beta != 0.0f ? f.beta * c : 0.0f);
  };
  const bool parallel = N * K >= (int64_t{1} << 15);  // below, a parallel region costs more than it saves
  if (f.trans_b) {  // B is [N, K]: J outputs at a time, the last few one at a time
    constexpr int J = outputs_per_call(R);
    const int64_t blocks = N / J;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < blocks; i++) dots<T, R, J>(f, i * J, finish);
    for (int64_t j = blocks * J; j < N; j++) dots<T, R, 1>(f, j, finish);
    return;
  }
  // B is [K, N]: the rows of B weighted by each row of op(A), summed; by blocks of columns, each block one
  // thread's
  constexpr int64_t kColumns = 256;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t j0 = 0; j0 < N; j0 += kColumns) {
    const int64_t width = std::min(kColumns, N - j0);
    float acc[R][kColumns] = {}, w[kColumns];
    for (int64_t p = 0; p < K; p++) {
      const T* row = f.B + p * f.ldb + j0;
      const float* wrow = row_as_f32(row, w, width);  // widened once for all R rows (fp32: the row itself)
      for (int r = 0; r < R; r++) {
        const float ap = f.a[r][p];
#pragma omp simd
        for (int64_t c = 0; c < width; c++) acc[r][c] += ap * wrow[c];
      }
    }
    for (int r = 0; r < R; r++)
      for (int64_t c = 0; c < width; c++) finish(r, j0 + c, acc[r][c]);
  }
}

template <class T, size_t... I>
constexpr auto few_rows_table(std::index_sequence<I...>) {
  return std::array<void (*)(const FewRows<T>&), sizeof...(I)>{&few_rows_product<T, static_cast<int>(I) + 1>...};
}

// The product of M <= kFewRows rows. op(A)'s rows are read as contiguous fp32 rows: A itself when it is
// fp32 and not transposed, else first gathered and widened (M * K elements: small beside B).
template <class T>
void few_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const T* A, int64_t lda,
              const T* B, int64_t ldb, float beta, float* C, int64_t ldc) {
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (trans_b) {  // B is [N, K]: bf16 pairs against bf16 pairs; op(A)'s rows as they are, or gathered
      static constexpr auto pairs = few_rows_bf16_pairs_table(std::make_index_sequence<kFewRows>{});
      std::vector<uint16_t> gathered16;
      std::array<const uint16_t*, kFewRows> rows16{};
      if (!trans_a) {
        for (int64_t r = 0; r < M; r++) rows16[static_cast<size_t>(r)] = A + r * lda;
      } else {
        gathered16.resize(static_cast<size_t>(M * K));
        for (int64_t r = 0; r < M; r++)
          for (int64_t p = 0; p < K; p++) gathered16[static_cast<size_t>(r * K + p)] = A[p * lda + r];
        for (int64_t r = 0; r < M; r++) rows16[static_cast<size_t>(r)] = gathered16.data() + r * K;
      }
      pairs[static_cast<size_t>(M - 1)](FewRows<uint16_t>{trans_b, N, K, alpha, nullptr, B, ldb, beta, C, ldc},
                                        rows16.data());
      return;
    }
  }
#endif
  static constexpr auto table = few_rows_table<T>(std::make_index_sequence<kFewRows>{});
  std::vector<float> gathered;
  std::array<const float*, kFewRows> rows{};
  if (std::is_same_v<T, float> && !trans_a) {  // A's rows as they are
    if constexpr (std::is_same_v<T, float>)
      for (int64_t r = 0; r < M; r++) rows[static_cast<size_t>(r)] = A + r * lda;
  } else {
    gathered.resize(static_cast<size_t>(M * K));
    for (int64_t r = 0; r < M; r++)
      for (int64_t p = 0; p < K; p++)  // A is [M, K], or [K, M] when transposed
        gathered[static_cast<size_t>(r * K + p)] = widen(trans_a ? A[p * lda + r] : A[r * lda + p]);
    for (int64_t r = 0; r < M; r++) rows[static_cast<size_t>(r)] = gathered.data() + r * K;
  }
  table[static_cast<size_t>(M - 1)](FewRows<T>{trans_b, N, K, alpha, rows.data(), B, ldb, beta, C, ldc});
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (M <= kFewRows) {
    few_rows(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (g_backend.load() == GemmBackend::kOneDnn) {
    // dnnl_sgemm is row-major, like us.
    dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta,
                                  C, ldc);
    AXONN_CHECK(st == dnnl_success, "dnnl_sgemm failed with status ", static_cast<int>(st), " (M=", M, " N=", N,
                " K=", K, ")");
  } else {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
                static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
  }
}

namespace {

// ---- bf16 GEMMs -------------------------------------------------------------------------------------

// The widened path: op(A) and op(B) as stored, widened to fp32 (exact), then sgemm.
std::vector<float> widen_matrix(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) v[static_cast<size_t>(r * cols + c)] = bf16_to_f32(x[r * ld + c]);
  return v;
}

void gemm_bf16_widened(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
                       int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int64_t a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
  const std::vector<float> a = widen_matrix(A, trans_a ? K : M, a_cols, lda);
  const std::vector<float> b = widen_matrix(B, trans_b ? N : K, b_cols, ldb);
  sgemm(trans_a, trans_b, M, N, K, alpha, a.data(), a_cols, b.data(), b_cols, beta, C, ldc);
}

// oneDNN: one matmul primitive per shape, layout, output type and thread count, created on first use.
// Strided memory descriptors express the transposes (no copies); beta != 0 is a sum post-op; a bf16
// output is rounded (to nearest even) by the primitive from its fp32 accumulator + bias + old value.
struct MatmulKey {
  bool trans_a, trans_b, bf16_out, bias;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  int threads;
  auto tie() const { return std::tie(trans_a, trans_b, bf16_out, bias, M, N, K, lda, ldb, ldc, alpha, beta, threads); }
  friend bool operator<(const MatmulKey& x, const MatmulKey& y) { return x.tie() < y.tie(); }
};

struct MatmulEntry {
  std::optional<dnnl::matmul> prim;  // none: oneDNN has no fast kernel for this key (widened path)
  dnnl::memory::desc a, b, c, bias, scratchpad;
  std::string impl;  // oneDNN's name of the kernel, or why there is none
};

dnnl::engine& dnnl_cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

MatmulEntry make_matmul(const MatmulKey& k, bool warn) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  MatmulEntry e;
  e.a = dnnl::memory::desc({k.M, k.K}, dt::bf16, k.trans_a ? dims{1, k.lda} : dims{k.lda, 1});
  e.b = dnnl::memory::desc({k.K, k.N}, dt::bf16, k.trans_b ? dims{1, k.ldb} : dims{k.ldb, 1});
  e.c = dnnl::memory::desc({k.M, k.N}, k.bf16_out ? dt::bf16 : dt::f32, dims{k.ldc, 1});
  e.bias = dnnl::memory::desc({1, k.N}, dt::bf16, dims{k.N, 1});
  try {
    dnnl::primitive_attr attr;
    // The scratchpad is ours (run_matmul: one per thread). oneDNN's own is one per thread that serves only
    // the primitives created on that thread, and the attention runs a cached primitive on every thread.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (k.alpha != 1.0f) attr.set_output_scales(0, {k.alpha});
    if (k.beta != 0.0f) {
      dnnl::post_ops po;
      po.append_sum(k.beta);
      attr.set_post_ops(po);
    }
    auto desc = k.bias ? dnnl::matmul::desc(e.a, e.b, e.bias, e.c) : dnnl::matmul::desc(e.a, e.b, e.c);
    dnnl::matmul::primitive_desc pd(desc, attr, dnnl_cpu_engine());
    e.impl = pd.impl_info_str();
    e.scratchpad = pd.scratchpad_desc();
    // oneDNN's reference kernels (plain loops) are far slower than widening and sgemm
    if (e.impl.rfind("ref", 0) != 0) e.prim.emplace(pd);
  } catch (const dnnl::error& err) {
    e.impl = std::string("unavailable (") + err.what() + ")";
  }
  if (!e.prim && warn)
    log_warn("bf16 GEMM %c%c M=%lld N=%lld K=%lld: oneDNN's matmul is %s; this shape widens to fp32 and runs sgemm",
             k.trans_a ? 'T' : 'N', k.trans_b ? 'T' : 'N', static_cast<long long>(k.M), static_cast<long long>(k.N),
             static_cast<long long>(k.K), e.impl.c_str());
  return e;
}

const MatmulEntry& matmul_entry(const MatmulKey& key) {
  static std::mutex mu;
  static std::map<MatmulKey, std::unique_ptr<MatmulEntry>> cache;  // entries never move or die
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[key];
  if (!slot) slot = std::make_unique<MatmulEntry>(make_matmul(key, true));
  return *slot;
}

// Runs the primitive of `e`; false (nothing written) when oneDNN has none for it.
bool run_matmul(const MatmulEntry& e, const uint16_t* A, const uint16_t* B, const uint16_t* bias, void* C) {
  if (!e.prim) return false;
  dnnl::engine& eng = dnnl_cpu_engine();
  thread_local dnnl::stream stream(eng);
  dnnl::memory a(e.a, eng, const_cast<uint16_t*>(A)), b(e.b, eng, const_cast<uint16_t*>(B)), c(e.c, eng, C);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  // Grows to the largest primitive's need, per thread; page-aligned, as oneDNN aligns its own.
  thread_local std::unique_ptr<void, decltype(&std::free)> scratchpad(nullptr, &std::free);
  thread_local size_t scratchpad_bytes = 0;
  if (const size_t bytes = e.scratchpad.get_size(); bytes > 0) {
    if (scratchpad_bytes < bytes) {
      scratchpad_bytes = (bytes + 4095) / 4096 * 4096;
      scratchpad.reset(std::aligned_alloc(4096, scratchpad_bytes));
      if (!scratchpad) throw std::bad_alloc();
    }
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(e.scratchpad, eng, scratchpad.get()));
  }
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.bias, eng, const_cast<uint16_t*>(bias)));
  e.prim->execute(stream, args);
  stream.wait();
  return true;
}

MatmulKey matmul_key(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, int64_t lda,
                     int64_t ldb, float beta, int64_t ldc, bool bf16_out, bool bias) {
  // Inside a parallel region (the attention's per-head GEMMs) oneDNN runs a primitive on the calling thread
  // alone, so that is its own key.
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  return MatmulKey{trans_a, trans_b, bf16_out, bias, M, N, K, lda, ldb, ldc, alpha, beta, threads};
}

// OpenBLAS's bf16 GEMM, looked up at run time: Debian's 0.3.21 declares cblas_sbgemm in cblas.h but is
// built without BUILD_BFLOAT16 and does not export it.
using SbgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                          const uint16_t*, blasint, const uint16_t*, blasint, float, float*, blasint);

// A small product with exact bf16 inputs and an exactly representable result, to trust a kernel before
// use: false if `run` throws, fails or gets it wrong.
bool probe(const std::function<bool(const uint16_t*, const uint16_t*, float*)>& run, std::string* why) {
  constexpr int64_t n = 35;  // not a multiple of any block size
  std::vector<uint16_t> a(n * n), b(n * n);
  std::vector<float> c(n * n, 0.0f);
  for (int64_t i = 0; i < n * n; i++) {
    a[i] = f32_to_bf16(static_cast<float>(i % 7 - 3) * 0.5f);
    b[i] = f32_to_bf16(static_cast<float>(i % 5 - 2) * 0.25f);
  }
  try {
    if (!run(a.data(), b.data(), c.data())) return false;
  } catch (const std::exception& e) {
    *why = e.what();
    return false;
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      float s = 0.0f;  // every partial sum is a multiple of 1/8 far below 2^24: exact in any order
      for (int64_t l = 0; l < n; l++) s += bf16_to_f32(a[i * n + l]) * bf16_to_f32(b[l * n + j]);
      if (c[i * n + j] != s) {
        *why = "it computed a wrong product";
        return false;
      }
    }
  return true;
}

struct Bf16Support {
  bool native = false;
  SbgemmFn sbgemm = nullptr;  // openblas only
  std::string kernel;
};

Bf16Support probe_onednn() {
  Bf16Support s;
  std::string why = "no fast kernel for bf16 on this CPU";
  const MatmulEntry e = make_matmul(matmul_key(false, false, 35, 35, 35, 1.0f, 35, 35, 0.0f, 35, false, false), false);
  if (!e.prim) why = "matmul " + e.impl;
  s.native = probe([&](const uint16_t* a, const uint16_t* b, float* c) { return run_matmul(e, a, b, nullptr, c); },
                   &why);
  s.kernel = s.native ? "oneDNN matmul " + e.impl : "none: widened to fp32, sgemm (oneDNN: " + why + ")";
  return s;
}

Bf16Support probe_openblas() {
  Bf16Support s;
  std::string why = "cblas_sbgemm not exported by the library";
  auto fn = reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
  if (fn)
    s.native = probe(
        [&](const uint16_t* a, const uint16_t* b, float* c) {
          fn(CblasRowMajor, CblasNoTrans, CblasNoTrans, 35, 35, 35, 1.0f, a, 35, b, 35, 0.0f, c, 35);
          return true;
        },
        &why);
  if (s.native) s.sbgemm = fn;
  s.kernel = s.native ? "OpenBLAS cblas_sbgemm" : "none: widened to fp32, sgemm (OpenBLAS: " + why + ")";
  return s;
}

// Probed once per backend, on first use; the fallback is announced once.
const Bf16Support& bf16_support() {
  static std::once_flag once[2];
  static Bf16Support support[2];
  const GemmBackend b = g_backend.load();
  const int i = b == GemmBackend::kOneDnn ? 0 : 1;
  std::call_once(once[i], [&] {
    support[i] = b == GemmBackend::kOneDnn ? probe_onednn() : probe_openblas();
    if (support[i].native)
      log_debug("bf16 GEMM (--gemm %s): %s", std::string(gemm_backend_name(b)).c_str(), support[i].kernel.c_str());
    else
      log_warn("bf16 GEMM (--gemm %s): %s; bf16 matmuls are slower than fp32 ones",
               std::string(gemm_backend_name(b)).c_str(), support[i].kernel.c_str());
  });
  return support[i];
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (M <= kFewRows) {
    few_rows(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const Bf16Support& s = bf16_support();
  if (s.native && K > 0) {
    if (s.sbgemm) {
      s.sbgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
               static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
               static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
      return;
    }
    if (run_matmul(matmul_entry(matmul_key(trans_a, trans_b, M, N, K, alpha, lda, ldb, beta, ldc, false, false)), A,
                   B, nullptr, C))
      return;
  }
  gemm_bf16_widened(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_bf16_round(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                     const uint16_t* B, int64_t ldb, const uint16_t* bias, bool accumulate, uint16_t* C,
                     int64_t ldc) {
  if (M == 0 || N == 0) return;
  const Bf16Support& s = bf16_support();
  if (M > kFewRows && s.native && !s.sbgemm && K > 0 &&
      run_matmul(matmul_entry(matmul_key(trans_a, trans_b, M, N, K, 1.0f, lda, ldb, accumulate ? 1.0f : 0.0f, ldc,
                                         true, bias != nullptr)),
                 A, B, bias, C))
    return;
  // The product in fp32, then bias and old value added in fp32 and the sum rounded once.
  std::vector<float> p(static_cast<size_t>(M * N));
  gemm_bf16(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, p.data(), N);
#pragma omp parallel for schedule(static)
  for (int64_t m = 0; m < M; m++) {
    const float* pm = p.data() + m * N;
    uint16_t* cm = C + m * ldc;
    for (int64_t n = 0; n < N; n++) {
      float v = pm[n];
      if (bias) v += bf16_to_f32(bias[n]);
      if (accumulate) v += bf16_to_f32(cm[n]);
      cm[n] = f32_to_bf16(v);
    }
  }
}

std::string gemm_bf16_kernel() { return bf16_support().kernel; }
bool gemm_bf16_native() { return bf16_support().native; }

namespace {
// The best of `reps` timed n^3 products after a warm-up, in GFLOP/s; `before` (if any) runs before the
// warm-up and before each timed product.
template <class T, class Gemm>
double measure_gflops(int n, int reps, T (*from_float)(float), Gemm gemm, const std::function<void()>& before = {}) {
  AXONN_CHECK(n > 0 && reps > 0, "bad GEMM measurement size");
  size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n);
  std::vector<T> a(nn), b(nn);
  std::vector<float> c(nn);
  for (size_t i = 0; i < nn; i++) {
    a[i] = from_float(static_cast<float>(i % 7) * 0.1f);
    b[i] = from_float(static_cast<float>(i % 5) * 0.1f);
  }
  if (before) before();
  gemm(a.data(), b.data(), c.data());  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    if (before) before();
    Timer t;
    gemm(a.data(), b.data(), c.data());
    best = std::min(best, t.seconds());
  }
  return 2.0 * n * static_cast<double>(n) * n / best / 1e9;
}
float identity(float x) { return x; }
}  // namespace

double measure_sgemm_gflops(int n, int reps) {
  return measure_gflops(n, reps, identity, [n](const float* a, const float* b, float* c) {
    sgemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  });
}

double measure_bf16_gemm_gflops(int n, int reps) {
  return measure_gflops(n, reps, f32_to_bf16, [n](const uint16_t* a, const uint16_t* b, float* c) {
    gemm_bf16(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  });
}

GemmPeak measure_gemm_peak(bool bf16, const std::vector<int>& sizes, int trials,
                           const std::function<void()>& before_each_timing) {
  AXONN_CHECK(!sizes.empty() && trials > 0, "measure_gemm_peak needs sizes and trials");
  GemmPeak best;
  for (int n : sizes) {
    const double g =
        bf16 ? measure_gflops(n, trials, f32_to_bf16,
                              [n](const uint16_t* a, const uint16_t* b, float* c) {
                                gemm_bf16(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
                              },
                              before_each_timing)
             : measure_gflops(n, trials, identity,
                              [n](const float* a, const float* b, float* c) {
                                sgemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
                              },
                              before_each_timing);
    if (g > best.gflops) best = {g, n};
  }
  return best;
}

int cpu_threads() { return omp_get_max_threads(); }

void set_cpu_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

}  // namespace axonn::kernels
