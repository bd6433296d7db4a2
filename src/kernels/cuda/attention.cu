// kernels/cuda/attention.cu — causal self-attention: batched cuBLAS GEMMs around fused masked
// softmax kernels (the structure of llm.c's fp32 CUDA trainer, without its permute copies).
//
// The head h of batch row b reads q, k, v straight out of qkv [B,T,3C]: each is a [T,HS] row-major
// matrix with leading dimension 3C, and the heads of one b are HS apart, so one strided-batched GEMM
// covers the NH heads of a b (B calls per product). The [T,T] score matrices are computed whole
// (the masked upper triangle too, then zeroed): twice the causal FLOPs, the price of materialising
// `att`, which the op list's backward takes as input. A fused flash-style kernel (no att, recompute
// in backward) needs the op's contract changed to store the row log-sum-exp instead; see docs/gpu.md.
#include <cmath>

#include "axonn/kernels/ops.hpp"
#include "common.cuh"

namespace axonn::kernels::cuda {
namespace {

using detail::kWarp;
using detail::warp_max;
using detail::warp_sum;

constexpr int kRowsPerBlock = 4;  // one warp per row, 128 threads

// In place over rows of att [rows, T] (row r is query t = r % T): scaled scores -> probabilities,
// zeros above the diagonal.
__global__ void causal_softmax_kernel(float* att, int64_t rows, int T) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;  // the whole warp leaves together
  const int t = static_cast<int>(row % T);
  float* a = att + row * T;
  float m = -INFINITY;
  for (int i = lane; i <= t; i += kWarp) m = fmaxf(m, a[i]);
  m = warp_max(m);
  float s = 0.0f;
  for (int i = lane; i <= t; i += kWarp) {
    const float e = expf(a[i] - m);
    a[i] = e;
    s += e;
  }
  s = warp_sum(s);
  for (int i = lane; i < T; i += kWarp) a[i] = i <= t ? a[i] / s : 0.0f;
}

// In place over d [rows, T] (d att on entry): d pre-softmax = att * (d att - sum(att * d att)) * scale.
__global__ void causal_softmax_backward_kernel(float* d, const float* att, int64_t rows, int T, float scale) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int t = static_cast<int>(row % T);
  const float* a = att + row * T;
  float* dr = d + row * T;
  float dot = 0.0f;
  for (int i = lane; i <= t; i += kWarp) dot += a[i] * dr[i];
  dot = warp_sum(dot);
  for (int i = lane; i < T; i += kWarp) dr[i] = i <= t ? a[i] * (dr[i] - dot) * scale : 0.0f;
}

// One strided-batched fp32 GEMM over the NH heads of one batch row (column-major operands).
void heads_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const float* A,
                int lda, long long stride_a, const float* B, int ldb, long long stride_b, float beta, float* Cm,
                int ldc, long long stride_c, int NH) {
  AXONN_CUBLAS_CHECK(cublasSgemmStridedBatched(detail::cublas(), ta, tb, m, n, k, &alpha, A, lda, stride_a, B,
                                               ldb, stride_b, &beta, Cm, ldc, stride_c, NH));
}

void check_shape(int B, int T, int C, int NH) {
  AXONN_CHECK_ARG(NH > 0 && C % NH == 0, "cuda attention: channels ", C, " are not divisible by heads ", NH);
  (void)detail::to_blas_int(static_cast<int64_t>(B) * NH * T * T, "att elements B*NH*T*T");
  (void)detail::to_blas_int(3LL * C, "qkv row 3C");
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

// --- inference with a KV cache (OpTable::kv_cache_append, attention_cached_forward) ---

// kcache, vcache [B, Tc, K] at positions [pos, pos + n) <- the k and v of qkv's rows [B n, Q + 2K]: one
// element per thread of a grid-stride loop.
__global__ void kv_cache_append_kernel(float* kcache, float* vcache, const float* qkv, int n, int pos, int Tc, int Q,
                                       int K, int64_t elements) {
  for (int64_t e = detail::global_index(); e < elements; e += detail::global_stride()) {
    const int64_t row = e / K, j = e % K, b = row / n, i = row % n;
    const float* src = qkv + row * (Q + 2 * K) + Q + j;
    const int64_t dst = (b * Tc + pos + i) * K + j;
    kcache[dst] = src[0];
    vcache[dst] = src[K];
  }
}

constexpr int kCachedAttentionThreads = 128;

// One block per (b, h, i): query head h of row b*n + i over the cache's positions [0, pos + i] of KV head
// h / G. Its scores (one warp per position, the lanes over the head's channels), then the softmax over the
// block, then the weighted sum of the values (a thread per channel). Dynamic shared memory: the scores (Tc)
// and the query (HS).
__global__ void attention_cached_kernel(float* out, const float* qkv, const float* kcache, const float* vcache,
                                        int n, int pos, int Tc, int NH, int G, int HS, float scale) {
  extern __shared__ float shared[];
  float* scores = shared;
  float* q = shared + Tc;
  __shared__ float reduce[kWarp];
  const int i = static_cast<int>(blockIdx.x % n), h = static_cast<int>((blockIdx.x / n) % NH);
  const int64_t b = blockIdx.x / (static_cast<int64_t>(n) * NH);
  const int Q = NH * HS, K = (NH / G) * HS, t = pos + i;
  const int64_t row = b * n + i;
  for (int j = threadIdx.x; j < HS; j += blockDim.x) q[j] = qkv[row * (Q + 2 * K) + h * HS + j];
  __syncthreads();
  const float* keys = kcache + b * Tc * K + (h / G) * HS;
  const float* values = vcache + b * Tc * K + (h / G) * HS;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  for (int t2 = warp; t2 <= t; t2 += warps) {
    float dot = 0.0f;
    for (int j = lane; j < HS; j += kWarp) dot += q[j] * keys[static_cast<int64_t>(t2) * K + j];
    dot = warp_sum(dot);
    if (lane == 0) scores[t2] = dot * scale;
  }
  __syncthreads();
  float m = -INFINITY;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) m = fmaxf(m, scores[t2]);
  m = detail::block_reduce(m, reduce, detail::MaxOp{}, -INFINITY);
  float sum = 0.0f;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
    const float e = expf(scores[t2] - m);
    scores[t2] = e;
    sum += e;
  }
  sum = detail::block_reduce(sum, reduce, detail::SumOp{}, 0.0f);  // syncs: every score is written
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < HS; j += blockDim.x) {
    float o = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) o += scores[t2] * values[static_cast<int64_t>(t2) * K + j];
    out[row * Q + h * HS + j] = o * inv;
  }
}

void check_cache_shape(int B, int n, int pos, int Tc, int NH, int NKV, int HS) {
  AXONN_CHECK_ARG(B >= 0 && n >= 0 && pos >= 0 && HS > 0, "cuda KV cache: bad sizes B=", B, " n=", n, " pos=", pos,
                  " HS=", HS);
  AXONN_CHECK_ARG(pos + n <= Tc, "cuda KV cache: positions [", pos, ", ", pos + n, ") exceed the cache's ", Tc);
  AXONN_CHECK_ARG(NKV > 0 && NH % NKV == 0, "cuda KV cache: query heads ", NH, " are not a multiple of KV heads ",
                  NKV);
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  // out [B,T,C], att [B,NH,T,T], qkv [B,T,3C]
  check_shape(B, T, C, NH);
  if (B == 0 || T == 0 || C == 0) return;
  const int HS = C / NH, C3 = 3 * C;
  const long long TT = static_cast<long long>(T) * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  for (int b = 0; b < B; b++) {
    const float* q = qkv + static_cast<int64_t>(b) * T * C3;
    // att[t][t2] = scale * q_t . k_t2, i.e. column-major att^T = scale * K^T Q
    heads_gemm(CUBLAS_OP_T, CUBLAS_OP_N, T, T, HS, scale, q + C, C3, HS, q, C3, HS, 0.0f, att + b * NH * TT, T,
               TT, NH);
  }
  const int64_t rows = static_cast<int64_t>(B) * NH * T;
  causal_softmax_kernel<<<row_blocks(rows), kRowsPerBlock * kWarp, 0, detail::stream()>>>(att, rows, T);
  AXONN_CUDA_CHECK_LAUNCH();
  for (int b = 0; b < B; b++) {
    const float* q = qkv + static_cast<int64_t>(b) * T * C3;
    // out_t = sum_t2 att[t][t2] v_t2, i.e. column-major out^T = V^T att^T
    heads_gemm(CUBLAS_OP_N, CUBLAS_OP_N, HS, T, T, 1.0f, q + 2 * C, C3, HS, att + b * NH * TT, T, TT, 0.0f,
               out + static_cast<int64_t>(b) * T * C, C, HS, NH);
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* /*out*/,
                        const float* att, int B, int T, int C, int NH) {
  // dqkv [B,T,3C] (added to), scratch [B,NH,T,T] (overwritten), dout [B,T,C], qkv [B,T,3C], att [B,NH,T,T]
  check_shape(B, T, C, NH);
  if (B == 0 || T == 0 || C == 0) return;
  const int HS = C / NH, C3 = 3 * C;
  const long long TT = static_cast<long long>(T) * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  for (int b = 0; b < B; b++) {
    const float* q = qkv + static_cast<int64_t>(b) * T * C3;
    float* dq = dqkv + static_cast<int64_t>(b) * T * C3;
    const float* dy = dout + static_cast<int64_t>(b) * T * C;
    const float* a = att + b * NH * TT;
    float* da = scratch + b * NH * TT;
    // dv_t2 += sum_t att[t][t2] dy_t
    heads_gemm(CUBLAS_OP_N, CUBLAS_OP_T, HS, T, T, 1.0f, dy, C, HS, a, T, TT, 1.0f, dq + 2 * C, C3, HS, NH);
    // d att[t][t2] = dy_t . v_t2
    heads_gemm(CUBLAS_OP_T, CUBLAS_OP_N, T, T, HS, 1.0f, q + 2 * C, C3, HS, dy, C, HS, 0.0f, da, T, TT, NH);
  }
  const int64_t rows = static_cast<int64_t>(B) * NH * T;
  causal_softmax_backward_kernel<<<row_blocks(rows), kRowsPerBlock * kWarp, 0, detail::stream()>>>(scratch, att,
                                                                                                  rows, T, scale);
  AXONN_CUDA_CHECK_LAUNCH();
  for (int b = 0; b < B; b++) {
    const float* q = qkv + static_cast<int64_t>(b) * T * C3;
    float* dq = dqkv + static_cast<int64_t>(b) * T * C3;
    const float* dpre = scratch + b * NH * TT;
    // dq_t += sum_t2 dpre[t][t2] k_t2
    heads_gemm(CUBLAS_OP_N, CUBLAS_OP_N, HS, T, T, 1.0f, q + C, C3, HS, dpre, T, TT, 1.0f, dq, C3, HS, NH);
    // dk_t2 += sum_t dpre[t][t2] q_t
    heads_gemm(CUBLAS_OP_N, CUBLAS_OP_T, HS, T, T, 1.0f, q, C3, HS, dpre, T, TT, 1.0f, dq + C, C3, HS, NH);
  }
}

void kv_cache_append(float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int Tc, int NH, int NKV,
                     int HS) {
  check_cache_shape(B, n, pos, Tc, NH, NKV, HS);
  const int64_t elements = static_cast<int64_t>(B) * n * NKV * HS;
  if (elements == 0) return;
  constexpr int kThreads = 256;
  kv_cache_append_kernel<<<detail::grid_for(elements, kThreads), kThreads, 0, detail::stream()>>>(
      kcache, vcache, qkv, n, pos, Tc, NH * HS, NKV * HS, elements);
  AXONN_CUDA_CHECK_LAUNCH();
}

void attention_cached_forward(float* out, const float* qkv, const float* kcache, const float* vcache, int B, int n,
                              int pos, int Tc, int NH, int NKV, int HS) {
  check_cache_shape(B, n, pos, Tc, NH, NKV, HS);
  const int64_t blocks = static_cast<int64_t>(B) * NH * n;
  if (blocks == 0) return;
  AXONN_CHECK_ARG(blocks < (int64_t{1} << 31), "cuda KV cache: ", blocks, " (sequence, head, position) triples "
                  "exceed a launch's blocks");
  const size_t bytes = sizeof(float) * (static_cast<size_t>(Tc) + static_cast<size_t>(HS));
  // beyond the default 48 KiB of dynamic shared memory a kernel must ask for more (a cache of 12k positions)
  static size_t granted = 48 * 1024;
  if (bytes > granted) {
    AXONN_CUDA_CHECK(cudaFuncSetAttribute(attention_cached_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
    granted = bytes;
  }
  attention_cached_kernel<<<static_cast<unsigned>(blocks), kCachedAttentionThreads, bytes, detail::stream()>>>(
      out, qkv, kcache, vcache, n, pos, Tc, NH, NH / NKV, HS, 1.0f / std::sqrt(static_cast<float>(HS)));
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace axonn::kernels::cuda
