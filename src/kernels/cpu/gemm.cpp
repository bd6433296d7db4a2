// kernels/cpu/gemm.cpp — the CPU GEMM backends (oneDNN, OpenBLAS), fp32 and bf16. The only file that
// includes their headers.
#include "axonn/kernels/gemm.hpp"

#include <cblas.h>
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
#include "few_rows.hpp"

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

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (M <= detail::kFewRows) {
    detail::few_rows(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
  if (M <= detail::kFewRows) {
    detail::few_rows(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
  if (M > detail::kFewRows && s.native && !s.sbgemm && K > 0 &&
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
