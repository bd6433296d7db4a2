// kernels/cpu/few_rows.cpp — C[:R, :N] = alpha * op(A) @ op(B) + beta * C for a few rows (R <= kFewRows: a
// decode step's linears and LM head, one row per sequence of the batch), which streams the weights once for
// all R rows and so is bound by memory. dnnl_sgemm at M = 1 streams them at about 60% of the speed of these
// loops, and at M = 8 it reads them more than once; OpenBLAS's sgemv, as fast idle, runs on its own threads,
// which spin where other processes share the cores (2 threads beside two busy processes: 5.7 tokens/s against
// 41; docs/generate.md). Here the OpenMP threads (waiting as the command chose) share the outputs; each
// output is one thread's sum in an order fixed by K alone, so a row's result depends neither on the thread
// count, nor on how many rows share the call (a sequence decodes the same alone and in a batch), nor on the
// kernel variant that runs (below). T is float, or bf16 bits widened exactly to fp32 as they are read (fp32
// accumulation).
#include "few_rows.hpp"

#include <omp.h>
#if defined(__AVX512BF16__)
#include <immintrin.h>  // the bf16 pairs
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/timer.hpp"
#include "axonn/kernels/gemm.hpp"

namespace axonn::kernels {
namespace detail {
namespace {

// The variants of the B = [N, K] kernels (a linear's weights): how many outputs one pass over K computes,
// and whether each weight row is prefetched kPrefetchBytes ahead. Which is fastest depends on the CPU more than
// on the shape (llama-124m's linears, 8 rows, 1 thread, weights from memory: on a 2-vCPU AMD EPYC 4 outputs
// without prefetch were 1.3x as fast as 2 outputs, and prefetching gained nothing; on a 2-vCPU Intel Xeon
// with AMX, 2 outputs with prefetch 1.9x as fast as 4 outputs, which lost speed with prefetch), so each shape's
// is measured on its first calls (VariantChoice). Every variant sums an output in the same order, so the choice
// moves the speed and never a bit.
struct Variant {
  int outputs;
  bool prefetch;
  const char* name;
};
constexpr std::array<Variant, 4> kVariants{{{1, false, "1 output"},
                                            {1, true, "1 output, prefetch"},
                                            {2, true, "2 outputs, prefetch"},
                                            {4, false, "4 outputs"}}};
constexpr int kVariantCount = static_cast<int>(kVariants.size());
constexpr uintptr_t kPrefetchBytes = 4096;  // 1024 fp32 weights ahead: 2048 and 4096 bytes were slower by 0-4%

std::atomic<int> g_forced_variant{-1};

inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return bf16_to_f32(x); }
inline const float* row_as_f32(const float* row, float*, int64_t) { return row; }
inline const float* row_as_f32(const uint16_t* row, float* buf, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) buf[i] = bf16_to_f32(row[i]);
  return buf;
}

// Where the weights a row is read from will be read kPrefetchBytes on; a prefetch never faults, so the address
// may lie past the matrix (computed as an integer: pointer arithmetic there would be undefined).
template <class T>
inline void prefetch_ahead(const T* p) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + kPrefetchBytes));
}

template <class T>
struct FewRows {
  int64_t N, K;
  float alpha;
  const float* const* a;  // R rows of op(A), each K contiguous fp32 elements
  const T* B;
  int64_t ldb;
  float beta;
  float* C;
  int64_t ldc;
  void finish(int r, int64_t j, float acc) const {
    float& c = C[r * ldc + j];
    c = alpha * acc + (beta != 0.0f ? beta * c : 0.0f);
  }
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
// output, summed over K in order and then over the lanes by a fixed tree (the same for any R, J and
// prefetch). J outputs at once so that each 16-element chunk of a row of op(A), read from cache, serves J rows
// of B, and each chunk of B (widened once) serves all R rows: R * J independent sums in registers (one output at
// a time, a step of 8 rows loads 9 vectors for 8 multiply-adds).
template <class T, int R, int J, bool Prefetch>
void dots(const FewRows<T>& f, int64_t j) {
  const int64_t K = f.K;
  const T* b[J];
  for (int q = 0; q < J; q++) b[q] = f.B + (j + q) * f.ldb;
  Lanes acc[J][R] = {};
  int64_t p = 0;
  for (; p + kLanes <= K; p += kLanes) {
    Lanes bv[J];
    for (int q = 0; q < J; q++) {
      load_lanes(bv[q], b[q] + p);
      if constexpr (Prefetch) prefetch_ahead(b[q] + p);
    }
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
      f.finish(r, j + q, lanes[0]);
    }
}

// Whether a product is worth a parallel region: below, the region costs more than it saves.
inline bool worth_threads(int64_t N, int64_t K) { return N * K >= (int64_t{1} << 15); }

// B is [N, K]: the outputs by blocks of the variant's J, each block one thread's, the last few one at a time.
template <class T, int R, int V>
void few_rows_by_outputs(const FewRows<T>& f) {
  constexpr int J = kVariants[V].outputs;
  constexpr bool prefetch = kVariants[V].prefetch;
  const int64_t blocks = f.N / J;
#pragma omp parallel for schedule(static) if (worth_threads(f.N, f.K))
  for (int64_t i = 0; i < blocks; i++) dots<T, R, J, prefetch>(f, i * J);
  for (int64_t j = blocks * J; j < f.N; j++) dots<T, R, 1, prefetch>(f, j);
}

// B is [K, N]: the rows of B weighted by each row of op(A), summed; by blocks of columns, each block one
// thread's (no variants: no linear runs this way in a decode step).
template <class T, int R>
void few_rows_by_columns(const FewRows<T>& f) {
  constexpr int64_t kColumns = 256;
#pragma omp parallel for schedule(static) if (worth_threads(f.N, f.K))
  for (int64_t j0 = 0; j0 < f.N; j0 += kColumns) {
    const int64_t width = std::min(kColumns, f.N - j0);
    float acc[R][kColumns] = {}, w[kColumns];
    for (int64_t p = 0; p < f.K; p++) {
      const T* row = f.B + p * f.ldb + j0;
      const float* wrow = row_as_f32(row, w, width);  // widened once for all R rows (fp32: the row itself)
      for (int r = 0; r < R; r++) {
        const float ap = f.a[r][p];
#pragma omp simd
        for (int64_t c = 0; c < width; c++) acc[r][c] += ap * wrow[c];
      }
    }
    for (int r = 0; r < R; r++)
      for (int64_t c = 0; c < width; c++) f.finish(r, j0 + c, acc[r][c]);
  }
}

#if defined(__AVX512BF16__)
// bf16 rows against bf16 weights on AVX512-BF16: each instruction multiplies 16 pairs of bf16 elements and adds
// both products to 16 fp32 sums (the products are exact in fp32, each addition rounded to nearest even), so a
// 32-element chunk of K costs one load and one instruction per row and output, where widening both to fp32
// cost two loads, a widening and two multiply-adds. Lane i sums elements 2i and 2i + 1 of every chunk, in order
// of K; the tail goes to the lanes in the same pattern, then the same fixed tree over the lanes. Like dots(),
// the order depends on K alone.
constexpr int64_t kPairLanes = 32;  // bf16 elements a 512-bit register holds

struct Bf16Pairs {
  FewRows<uint16_t> f;     // f.a unused: the rows are bf16
  const uint16_t* const* a;  // R rows of op(A), each K contiguous bf16 elements
};

template <int R, int J, bool Prefetch>
void dots_bf16_pairs(const Bf16Pairs& g, int64_t j) {
  const FewRows<uint16_t>& f = g.f;
  const int64_t K = f.K;
  const uint16_t* b[J];
  for (int q = 0; q < J; q++) b[q] = f.B + (j + q) * f.ldb;
  __m512 acc[J][R];
  for (int q = 0; q < J; q++)
    for (int r = 0; r < R; r++) acc[q][r] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + kPairLanes <= K; p += kPairLanes) {
    __m512bh bv[J];
    for (int q = 0; q < J; q++) {
      bv[q] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b[q] + p));
      if constexpr (Prefetch) prefetch_ahead(b[q] + p);
    }
    for (int r = 0; r < R; r++) {
      __m512i bits = _mm512_loadu_si512(g.a[r] + p);
      asm("" : "+v"(bits));  // kept in a register: the compiler would load it again for each of the J products
      const __m512bh av = reinterpret_cast<__m512bh>(bits);
      for (int q = 0; q < J; q++) acc[q][r] = _mm512_dpbf16_ps(acc[q][r], av, bv[q]);
    }
  }
  for (int q = 0; q < J; q++)
    for (int r = 0; r < R; r++) {
      float lanes[kLanes];
      _mm512_storeu_ps(lanes, acc[q][r]);
      for (int64_t l = 0; p + l < K; l++) lanes[l / 2] += bf16_to_f32(g.a[r][p + l]) * bf16_to_f32(b[q][p + l]);
      for (int64_t half = kLanes / 2; half > 0; half /= 2)  // a fixed tree over the lanes
        for (int64_t l = 0; l < half; l++) lanes[l] += lanes[l + half];
      f.finish(r, j + q, lanes[0]);
    }
}

template <int R, int V>
void few_rows_bf16_pairs(const Bf16Pairs& g) {
  constexpr int J = kVariants[V].outputs;
  constexpr bool prefetch = kVariants[V].prefetch;
  const int64_t blocks = g.f.N / J;
#pragma omp parallel for schedule(static) if (worth_threads(g.f.N, g.f.K))
  for (int64_t i = 0; i < blocks; i++) dots_bf16_pairs<R, J, prefetch>(g, i * J);
  for (int64_t j = blocks * J; j < g.f.N; j++) dots_bf16_pairs<R, 1, prefetch>(g, j);
}
#endif

// Function tables [rows - 1][variant] of the B = [N, K] kernels, and [rows - 1] of the B = [K, N] one.
template <class Arg, template <int, int> class Make, size_t... I>
constexpr auto variant_table(std::index_sequence<I...>) {
  return std::array<void (*)(const Arg&), sizeof...(I)>{
      Make<static_cast<int>(I) / kVariantCount + 1, static_cast<int>(I) % kVariantCount>::fn...};
}
template <class T>
struct ByOutputs {
  template <int R, int V>
  struct Make {
    static constexpr void (*fn)(const FewRows<T>&) = &few_rows_by_outputs<T, R, V>;
  };
};
template <class T, size_t... I>
constexpr auto columns_table(std::index_sequence<I...>) {
  return std::array<void (*)(const FewRows<T>&), sizeof...(I)>{&few_rows_by_columns<T, static_cast<int>(I) + 1>...};
}
#if defined(__AVX512BF16__)
template <int R, int V>
struct MakeBf16Pairs {
  static constexpr void (*fn)(const Bf16Pairs&) = &few_rows_bf16_pairs<R, V>;
};
#endif

constexpr size_t kTableSize = static_cast<size_t>(kFewRows) * kVariants.size();

// The kernel families a shape's choice is kept for (VariantChoice's kFamilyNames in this order).
enum Family : int { kFp32 = 0, kBf16Widened = 1, kBf16Pairs = 2 };

// Each shape's variant, measured on its first calls: the variants in turn, kTrials rounds, then for good the
// one whose shortest call was shortest (the shortest, not the median: other processes only ever slow a call
// down). Per calling thread, keyed by what moves the speed: rows, N, K, the kernel family and the thread
// count (the decode may change it: infer/decode_threads.hpp). A trial costs at most what the slowest variant
// is slower; a decode step of llama-124m calls each linear's shape 12 times, so its trials end within the
// first step or two, the LM head's within 12.
class VariantChoice {
 public:
  template <class Run>
  void run(Family family, int64_t rows, int64_t N, int64_t K, const Run& run_variant) {
    if (const int forced = g_forced_variant.load(std::memory_order_relaxed); forced >= 0) {
      run_variant(forced);
      return;
    }
    Shape& s = shapes_[Key{family, rows, N, K, omp_get_max_threads()}];
    if (s.chosen >= 0) {
      run_variant(s.chosen);
      return;
    }
    const int v = s.calls % kVariantCount;
    Timer timer;
    run_variant(v);
    s.shortest[static_cast<size_t>(v)] = std::min(s.shortest[static_cast<size_t>(v)], timer.seconds());
    if (++s.calls == kTrials * kVariantCount) {
      s.chosen = static_cast<int>(std::min_element(s.shortest.begin(), s.shortest.end()) - s.shortest.begin());
      static constexpr const char* kFamilyNames[] = {"fp32", "bf16 widened", "bf16 pairs"};
      log_debug("few-row product: %lld rows x [%lld, %lld], %s, %d threads: %s", static_cast<long long>(rows),
                static_cast<long long>(N), static_cast<long long>(K), kFamilyNames[family], omp_get_max_threads(),
                kVariants[static_cast<size_t>(s.chosen)].name);
    }
  }

 private:
  static constexpr int kTrials = 3;
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int>;
  struct Shape {
    int calls = 0;
    int chosen = -1;
    std::array<double, kVariants.size()> shortest;
    Shape() { shortest.fill(std::numeric_limits<double>::infinity()); }
  };
  std::map<Key, Shape> shapes_;
};

thread_local VariantChoice t_choice;

template <class T>
void run_few_rows(bool trans_b, int64_t M, const FewRows<T>& f) {
  const size_t row = static_cast<size_t>(M - 1);
  if (!trans_b) {
    static constexpr auto columns = columns_table<T>(std::make_index_sequence<kFewRows>{});
    columns[row](f);
    return;
  }
  static constexpr auto table =
      variant_table<FewRows<T>, ByOutputs<T>::template Make>(std::make_index_sequence<kTableSize>{});
  t_choice.run(std::is_same_v<T, float> ? kFp32 : kBf16Widened, M, f.N, f.K,
               [&](int v) { table[row * kVariants.size() + static_cast<size_t>(v)](f); });
}

// op(A)'s M rows as contiguous rows: A's own when it is not transposed, else gathered into `gathered`.
template <class E>
std::array<const E*, kFewRows> rows_of(bool trans_a, int64_t M, int64_t K, const E* A, int64_t lda,
                                       std::vector<E>& gathered) {
  std::array<const E*, kFewRows> rows{};
  if (!trans_a) {
    for (int64_t r = 0; r < M; r++) rows[static_cast<size_t>(r)] = A + r * lda;
    return rows;
  }
  gathered.resize(static_cast<size_t>(M * K));
  for (int64_t r = 0; r < M; r++) {
    for (int64_t p = 0; p < K; p++) gathered[static_cast<size_t>(r * K + p)] = A[p * lda + r];
    rows[static_cast<size_t>(r)] = gathered.data() + r * K;
  }
  return rows;
}

}  // namespace

// op(A)'s rows are read as contiguous rows: A itself when it is not transposed, else first gathered (M * K
// elements: small beside B); as fp32, widened once where A is bf16, except for the bf16 pairs.
void few_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  std::vector<float> gathered;
  const auto rows = rows_of(trans_a, M, K, A, lda, gathered);
  run_few_rows(trans_b, M, FewRows<float>{N, K, alpha, rows.data(), B, ldb, beta, C, ldc});
}

void few_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
              int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  auto a_at = [&](int64_t r, int64_t p) { return trans_a ? A[p * lda + r] : A[r * lda + p]; };
#if defined(__AVX512BF16__)
  if (trans_b) {  // B is [N, K]: bf16 pairs against bf16 pairs; op(A)'s rows as they are, or gathered
    std::vector<uint16_t> gathered16;
    const auto rows16 = rows_of(trans_a, M, K, A, lda, gathered16);
    static constexpr auto pairs =
        variant_table<Bf16Pairs, MakeBf16Pairs>(std::make_index_sequence<kTableSize>{});
    const Bf16Pairs g{FewRows<uint16_t>{N, K, alpha, nullptr, B, ldb, beta, C, ldc}, rows16.data()};
    t_choice.run(kBf16Pairs, M, N, K, [&](int v) {
      pairs[static_cast<size_t>(M - 1) * kVariants.size() + static_cast<size_t>(v)](g);
    });
    return;
  }
#endif
  std::vector<float> gathered(static_cast<size_t>(M * K));
  std::array<const float*, kFewRows> rows{};
  for (int64_t r = 0; r < M; r++) {
    for (int64_t p = 0; p < K; p++) gathered[static_cast<size_t>(r * K + p)] = bf16_to_f32(a_at(r, p));
    rows[static_cast<size_t>(r)] = gathered.data() + r * K;
  }
  run_few_rows(trans_b, M, FewRows<uint16_t>{N, K, alpha, rows.data(), B, ldb, beta, C, ldc});
}

}  // namespace detail

std::vector<std::string> few_rows_variant_names() {
  std::vector<std::string> names;
  for (const auto& v : detail::kVariants) names.emplace_back(v.name);
  return names;
}

void set_few_rows_variant(int variant) {
  AXONN_CHECK_ARG(variant >= -1 && variant < detail::kVariantCount, "few-row variant ", variant,
                  " does not exist; use -1 (measured) or 0..", detail::kVariantCount - 1);
  detail::g_forced_variant.store(variant);
}

}  // namespace axonn::kernels
