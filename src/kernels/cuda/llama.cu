// kernels/cuda/llama.cu — the Llama block's ops (kernels/ops.hpp, ops_bf16.hpp) on device pointers, fp32
// and bf16 from the same templates: RMSNorm (its row kernels norm_rows.cuh's, its weight gradient columns.cuh's),
// rotate-half RoPE and SwiGLU (llama_rows.cuh's row kernels), and the KV repetition of grouped-query attention.
// fp32 math throughout; a bf16 output is rounded once, an accumulated one (dinp +=) is summed in fp32 with its old value first.
#include "axonn/kernels/ops.hpp"
#include "columns.cuh"
#include "llama_rows.cuh"
#include "norm_rows.cuh"

namespace axonn::kernels::cuda {
namespace {

using detail::load_f32;
using detail::rows_aligned16;
using detail::store_f32;
namespace rows = norm_rows;

constexpr int kThreads = 256;

// One thread per output element: q copied, k and v of KV head h / G for query head h.
template <typename E>
__global__ void repeat_kv_forward_kernel(E* out, const E* inp, int64_t N, int NH, int NKV, int HS) {
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS, W = 3 * Q;
  for (int64_t e = detail::global_index(); e < N * W; e += detail::global_stride()) {
    const int64_t n = e / W;
    const int c = static_cast<int>(e % W);
    int from;
    if (c < Q) {
      from = c;
    } else {
      const int part = c < 2 * Q ? 0 : 1, within = c - Q - part * Q, h = within / HS;
      from = Q + part * K + (h / G) * HS + within % HS;
    }
    out[e] = inp[n * (Q + 2 * K) + from];
  }
}

// One thread per input element: q's gradient, or the sum of a KV head's G copies (in head order).
template <typename E>
__global__ void repeat_kv_backward_kernel(E* dinp, const E* dout, int64_t N, int NH, int NKV, int HS) {
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS, W = Q + 2 * K;
  for (int64_t e = detail::global_index(); e < N * W; e += detail::global_stride()) {
    const int64_t n = e / W;
    const int c = static_cast<int>(e % W);
    const E* o = dout + n * 3 * Q;
    float acc = load_f32(dinp[e]);
    if (c < Q) {
      acc += load_f32(o[c]);
    } else {
      const int part = c < Q + K ? 0 : 1, within = c - Q - part * K, j = within / HS, i = within % HS;
      for (int h = j * G; h < (j + 1) * G; h++) acc += load_f32(o[Q + part * Q + h * HS + i]);
    }
    store_f32(&dinp[e], acc);
  }
}

// --- launches, one set for each element type -------------------------------------------------

template <typename E>
void sumsq(float* s, const E* x, int64_t N, int C) {
  if (N == 0) return;
  rows::row_sum_kernel<E, true><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      s, x, N, C, rows_aligned16<E>(C, {x}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void normalise(E* out, float* rstd, const E* x, const E* w, int64_t N, int C, int C_total, float eps) {
  if (N == 0) return;
  rows::rmsnorm_forward_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      out, rstd, x, w, N, C, static_cast<float>(C_total), eps, rows_aligned16<E>(C, {out, x, w}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void dot_of(float* dot, const E* dy, const E* x, const E* w, int64_t N, int C) {
  if (N == 0) return;
  rows::rmsnorm_dot_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(dot, dy, x, w, N, C,
                                                                          rows_aligned16<E>(C, {dy, x, w}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void norm_backward(E* dx, float* dw, const E* dy, const E* x, const E* w, const float* rstd, const float* dot,
                   int64_t N, int C, int C_total) {
  if (N == 0 || C == 0) return;
  rows::rmsnorm_input_grad_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      dx, dy, x, w, rstd, dot, N, C, static_cast<float>(C_total), rows_aligned16<E>(C, {dx, dy, x, w}));
  AXONN_CUDA_CHECK_LAUNCH();
  detail::rmsnorm_weight_grad_accumulate(dw, dy, x, rstd, N, C);
}
template <typename E>
void rope(E* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride, float sign) {
  const int64_t rows = static_cast<int64_t>(B) * T;
  if (rows == 0 || heads == 0 || HS == 0) return;
  llama_rows::rope_kernel<E><<<detail::row_grid(rows), llama_rows::kThreads, 0, detail::stream()>>>(
      x, cos, sin, rows, T, heads, HS, stride, sign, llama_rows::rope_aligned(x, cos, sin, HS, stride));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void swiglu_fwd(E* out, const E* inp, int64_t N, int F) {
  if (N == 0 || F == 0) return;
  llama_rows::swiglu_forward_kernel<E><<<detail::row_grid(N), llama_rows::kThreads, 0, detail::stream()>>>(
      out, inp, N, F, rows_aligned16<E>(F, {out, inp}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void swiglu_bwd(E* dinp, const E* inp, const E* dout, int64_t N, int F) {
  if (N == 0 || F == 0) return;
  llama_rows::swiglu_backward_kernel<E><<<detail::row_grid(N), llama_rows::kThreads, 0, detail::stream()>>>(
      dinp, inp, dout, N, F, rows_aligned16<E>(F, {dinp, inp, dout}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void repeat_fwd(E* out, const E* inp, int64_t N, int NH, int NKV, int HS) {
  const int64_t n = N * 3 * NH * HS;
  if (n == 0) return;
  repeat_kv_forward_kernel<E><<<detail::grid_for(n, kThreads), kThreads, 0, detail::stream()>>>(out, inp, N, NH, NKV,
                                                                                                HS);
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void repeat_bwd(E* dinp, const E* dout, int64_t N, int NH, int NKV, int HS) {
  const int64_t n = N * (NH + 2 * NKV) * HS;
  if (n == 0) return;
  repeat_kv_backward_kernel<E><<<detail::grid_for(n, kThreads), kThreads, 0, detail::stream()>>>(dinp, dout, N, NH,
                                                                                                 NKV, HS);
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace

// fp32 (kernels/ops.hpp)
void rmsnorm_sumsq(float* sumsq, const float* inp, int64_t N, int C) { cuda::sumsq(sumsq, inp, N, C); }
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int C, int C_total,
                     float eps) {
  normalise(out, rstd, inp, weight, N, C, C_total, eps);
}
void rmsnorm_backward_dot(float* dot, const float* dout, const float* inp, const float* weight, int64_t N, int C) {
  dot_of(dot, dout, inp, weight, N, C);
}
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, const float* dot, int64_t N, int C, int C_total) {
  norm_backward(dinp, dweight, dout, inp, weight, rstd, dot, N, C, C_total);
}
void rope_forward(float* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  rope(x, cos, sin, B, T, heads, HS, stride, 1.0f);
}
void rope_backward(float* dx, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  rope(dx, cos, sin, B, T, heads, HS, stride, -1.0f);
}
void swiglu_forward(float* out, const float* inp, int64_t N, int F) { swiglu_fwd(out, inp, N, F); }
void swiglu_backward(float* dinp, const float* inp, const float* dout, int64_t N, int F) {
  swiglu_bwd(dinp, inp, dout, N, F);
}
void repeat_kv_forward(float* out, const float* inp, int64_t N, int NH, int NKV, int HS) {
  repeat_fwd(out, inp, N, NH, NKV, HS);
}
void repeat_kv_backward(float* dinp, const float* dout, int64_t N, int NH, int NKV, int HS) {
  repeat_bwd(dinp, dout, N, NH, NKV, HS);
}

}  // namespace axonn::kernels::cuda

// bf16 (kernels/ops_bf16.hpp)
namespace axonn::kernels::cuda_bf16 {

void rmsnorm_sumsq(float* sumsq, const bf16* inp, int64_t N, int C) { cuda::sumsq(sumsq, inp, N, C); }
void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int64_t N, int C, int C_total,
                     float eps) {
  cuda::normalise(out, rstd, inp, weight, N, C, C_total, eps);
}
void rmsnorm_backward_dot(float* dot, const bf16* dout, const bf16* inp, const bf16* weight, int64_t N, int C) {
  cuda::dot_of(dot, dout, inp, weight, N, C);
}
void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                      const float* rstd, const float* dot, int64_t N, int C, int C_total) {
  cuda::norm_backward(dinp, dweight, dout, inp, weight, rstd, dot, N, C, C_total);
}
void rope_forward(bf16* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  cuda::rope(x, cos, sin, B, T, heads, HS, stride, 1.0f);
}
void rope_backward(bf16* dx, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  cuda::rope(dx, cos, sin, B, T, heads, HS, stride, -1.0f);
}
void swiglu_forward(bf16* out, const bf16* inp, int64_t N, int F) { cuda::swiglu_fwd(out, inp, N, F); }
void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N, int F) {
  cuda::swiglu_bwd(dinp, inp, dout, N, F);
}
void repeat_kv_forward(bf16* out, const bf16* inp, int64_t N, int NH, int NKV, int HS) {
  cuda::repeat_fwd(out, inp, N, NH, NKV, HS);
}
void repeat_kv_backward(bf16* dinp, const bf16* dout, int64_t N, int NH, int NKV, int HS) {
  cuda::repeat_bwd(dinp, dout, N, NH, NKV, HS);
}

}  // namespace axonn::kernels::cuda_bf16
