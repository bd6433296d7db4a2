// kernels/cpu/gemm.cpp — the CPU GEMM backends (oneDNN, OpenBLAS). The only file that includes
// their headers.
#include "axonn/kernels/gemm.hpp"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/core/timer.hpp"

namespace axonn::kernels {

namespace {
std::atomic<GemmBackend> g_backend{GemmBackend::kOneDnn};
}

std::string_view gemm_backend_name(GemmBackend b) {
  return b == GemmBackend::kOneDnn ? "onednn" : "openblas";
}

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

double measure_sgemm_gflops(int n, int reps) {
  AXONN_CHECK(n > 0 && reps > 0, "bad sgemm measurement size");
  size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n);
  std::vector<float> a(nn), b(nn), c(nn);
  for (size_t i = 0; i < nn; i++) {
    a[i] = static_cast<float>(i % 7) * 0.1f;
    b[i] = static_cast<float>(i % 5) * 0.1f;
  }
  sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    Timer t;
    sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::min(best, t.seconds());
  }
  return 2.0 * n * static_cast<double>(n) * n / best / 1e9;
}

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace axonn::kernels
