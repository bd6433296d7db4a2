// kernels/cuda/matmul_bf16.cu — the linear layer in bf16 through cuBLASLt: bf16 A and B, fp32 accumulation
// (CUBLAS_COMPUTE_32F); activations out in bf16, weight gradients out in fp32 accumulated with beta = 1.
//
// Row-major by the transposition trick, as matmul.cu (spec axonn.md §6); D = C in place where accumulating:
//   out = inp W^T + b  <=> out^T = W inp^T + b Lt(T, N, m=OC, n=N,  k=C,  A=W,   lda=C, B=inp,  ldb=C)  bf16, beta 1
//   dinp += dout W     <=> dinp^T += W dout^T  Lt(N, N, m=C,  n=N,  k=OC, A=W,   lda=C, B=dout, ldb=OC) bf16, beta 1
//   dW += dout^T inp   <=> dW^T += inp^T dout  Lt(N, T, m=C,  n=OC, k=N,  A=inp, lda=C, B=dout, ldb=OC) fp32, beta 1
// For the bf16 outputs cuBLASLt forms alpha*AB + beta*C in fp32 and rounds once (the op list's rule). The
// bias is broadcast into the output first and added as C with beta = 1, so it too is added in fp32 before the
// one rounding. Not CUBLASLT_EPILOGUE_BIAS: on an H200 (cuBLAS 13.1) some of its kernels round A B to bf16
// before adding the bias, a second rounding (up to 4 bf16 ulps of the output seen at K = 24 and 320, where
// A B and the bias nearly cancel; test_cuda_bf16's MatmulThroughCublasLt). dbias (fp32) is a
// column-sum kernel. The algorithm for each (shape, layout, types, alignment) is asked of cuBLASLt's heuristic
// once and cached per thread; where it has none (unaligned or mixed-alignment buffers), cublasGemmEx with the
// same types does the product.
#include <map>
#include <tuple>

#include "bf16.cuh"
#include "columns.cuh"

namespace axonn::kernels::cuda_bf16 {
namespace {

using kernels::cuda::detail::column_sums_accumulate;

// The largest power of two (<= 256) that divides the address: what cuBLASLt may assume of a pointer.
uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// Owners of the cuBLASLt descriptors of one call (destroyed on every path, exceptions included).
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

struct Gemm {
  cublasOperation_t ta, tb;
  int m, n, k;
  const void* A;
  int lda;
  const void* B;
  int ldb;
  void* D;  // also C (beta != 0 reads it)
  cudaDataType_t dtype;
  int ldd;
  float beta;
};

// The fallback when cuBLASLt offers no algorithm (unaligned or mixed-alignment buffers): cublasGemmEx with
// the same types (bf16 A and B, fp32 compute, bf16 or fp32 output).
void gemm_ex(const Gemm& g) {
  const float alpha = 1.0f;
  AXONN_CUBLAS_CHECK(cublasGemmEx(kernels::cuda::detail::cublas(), g.ta, g.tb, g.m, g.n, g.k, &alpha, g.A, CUDA_R_16BF,
                                  g.lda, g.B, CUDA_R_16BF, g.ldb, &g.beta, g.D, g.dtype, g.ldd, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
}

// cuBLASLt's choice for one key: its algorithm, or none (then cublasGemmEx).
struct Choice {
  bool lt;
  cublasLtMatmulAlgo_t algo;
};

// D = op(A) op(B) + beta * D, column-major, on the backend's stream.
void lt_matmul(const Gemm& g) {
  Descriptors s;
  AXONN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  AXONN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSA, &g.ta, sizeof(g.ta)));
  AXONN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSB, &g.tb, sizeof(g.tb)));
  // Stored (column-major) shapes: op(A) is m x k, op(B) is k x n.
  const bool at = g.ta != CUBLAS_OP_N, bt = g.tb != CUBLAS_OP_N;
  AXONN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.a, CUDA_R_16BF, at ? g.k : g.m, at ? g.m : g.k, g.lda));
  AXONN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.b, CUDA_R_16BF, bt ? g.n : g.k, bt ? g.k : g.n, g.ldb));
  AXONN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.d, g.dtype, g.m, g.n, g.ldd));

  const uint32_t align_a = alignment_of(g.A), align_b = alignment_of(g.B), align_d = alignment_of(g.D);
  const int device = [] {
    int d = 0;
    AXONN_CUDA_CHECK(cudaGetDevice(&d));
    return d;
  }();
  // Everything the heuristic sees (alpha and beta are not among it).
  using Key = std::tuple<int, int, int, int, int, int, int, int, int, int, uint32_t, uint32_t, uint32_t>;
  const Key key{device, g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldd, g.dtype, align_a, align_b, align_d};
  thread_local std::map<Key, Choice> cache;
  auto it = cache.find(key);
  if (it == cache.end()) {
    AXONN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&s.pref));
    const uint64_t ws = detail::kLtWorkspaceBytes;
    AXONN_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    AXONN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                            &align_a, sizeof(align_a)));
    AXONN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                            &align_b, sizeof(align_b)));
    AXONN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                            &align_d, sizeof(align_d)));
    AXONN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                            &align_d, sizeof(align_d)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    // "No algorithm" comes back either as NOT_SUPPORTED or as found = 0 (seen for mixed alignments).
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(detail::cublaslt(), s.op, s.a, s.b, s.d, s.d,
                                                                 s.pref, 1, &result, &found);
    if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED)
      throw kernels::cuda::detail::cublas_error(status, "cublasLtMatmulAlgoGetHeuristic");
    it = cache.emplace(key, Choice{status == CUBLAS_STATUS_SUCCESS && found > 0, result.algo}).first;
  }
  if (!it->second.lt) return gemm_ex(g);
  const float alpha = 1.0f;
  AXONN_CUBLAS_CHECK(cublasLtMatmul(detail::cublaslt(), s.op, &alpha, g.A, s.a, g.B, s.b, &g.beta, g.D, s.d, g.D, s.d,
                                    &it->second.algo, detail::lt_workspace(), detail::kLtWorkspaceBytes,
                                    detail::stream()));
}

}  // namespace

void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int64_t N, int C, int OC) {
  // out [N,OC], inp [N,C], weight [OC,C], bias [OC] or null
  const int n = kernels::cuda::detail::to_blas_int(N, "rows N");
  if (N == 0 || OC == 0) return;
  if (bias != nullptr || C == 0) {  // out = bias (or 0: the empty sum C = 0, which cuBLASLt does not take)
    detail::fill_rows(out, bias, N, OC);
  }
  if (C == 0) return;
  lt_matmul({CUBLAS_OP_T, CUBLAS_OP_N, OC, n, C, weight, C, inp, C, out, CUDA_R_16BF, OC, bias ? 1.0f : 0.0f});
}

void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                     const bf16* weight, int64_t N, int C, int OC) {
  // dinp [N,C] bf16 or null, dweight [OC,C] fp32 or null, dbias [OC] fp32 or null (all added to),
  // dout [N,OC], inp [N,C], weight [OC,C]
  const int n = kernels::cuda::detail::to_blas_int(N, "rows N");
  if (N == 0) return;
  if (dinp != nullptr && C > 0 && OC > 0)
    lt_matmul({CUBLAS_OP_N, CUBLAS_OP_N, C, n, OC, weight, C, dout, OC, dinp, CUDA_R_16BF, C, 1.0f});
  if (dweight != nullptr && C > 0 && OC > 0)
    lt_matmul({CUBLAS_OP_N, CUBLAS_OP_T, C, OC, n, inp, C, dout, OC, dweight, CUDA_R_32F, C, 1.0f});
  if (dbias != nullptr) column_sums_accumulate(dbias, dout, N, OC);
}

}  // namespace axonn::kernels::cuda_bf16
