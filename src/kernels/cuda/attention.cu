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

}  // namespace axonn::kernels::cuda
