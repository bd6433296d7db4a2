// kernels/cuda/runtime_bf16.hpp — host side of the bf16 kernels (private to axonn_kernels_cuda): the
// functions behind kernels::cuda_bf16_ops(), the cuBLASLt handle and workspace, and a scratch buffer.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>

#include "axonn/kernels/ops_bf16.hpp"
#include "runtime.hpp"

namespace axonn::kernels::cuda_bf16 {

// The op list of kernels/ops_bf16.hpp on DEVICE pointers, on detail::stream() (see kernels/cuda.hpp).
void embedding_forward(bf16* out, const int* inp, const bf16* wte, int row_begin, int R, int64_t N, int C);
void embedding_backward(float* dwte, const bf16* dout, const int* inp, int row_begin, int R, int64_t N, int C);
void position_forward(bf16* out, const bf16* wpe, int B, int T, int C);
void position_backward(float* dwpe, const bf16* dout, int B, int T, int C);
void layernorm_sum(float* mean, const bf16* inp, int64_t N, int C);
void layernorm_centred_sumsq(float* var, float* mean, const bf16* inp, int64_t N, int C, int C_total);
void layernorm_forward(bf16* out, const float* mean, float* rstd, const bf16* inp, const bf16* weight,
                       const bf16* bias, int64_t N, int C, int C_total);
void layernorm_backward_sums(float* sums, const bf16* dout, const bf16* inp, const bf16* weight, const float* mean,
                             const float* rstd, int64_t N, int C);
void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const bf16* weight, const float* mean, const float* rstd, const float* sums, int64_t N, int C,
                        int C_total);
void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int64_t N, int C, int OC);
void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                     const bf16* weight, int64_t N, int C, int OC);
void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH);
void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                        const float* lse, int B, int T, int C, int NH);
// The same, forced to one implementation (kernels::cuda_bf16_ops(FlashAttention)).
void attention_forward_cuda_cores(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH);
void attention_backward_cuda_cores(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                                   const float* lse, int B, int T, int C, int NH);
void attention_forward_tensor_cores(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH);
void attention_backward_tensor_cores(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv,
                                     const bf16* out, const float* lse, int B, int T, int C, int NH);
void attention_forward_tensor_cores_mma(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH);
void attention_backward_tensor_cores_mma(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv,
                                         const bf16* out, const float* lse, int B, int T, int C, int NH);
void gelu_forward(bf16* out, const bf16* inp, int64_t N);
void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N);
void residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t N);
void residual_backward(bf16* da, bf16* db, const bf16* dout, int64_t N);
void crossentropy_max(float* maxv, const bf16* logits, int64_t N, int Vvalid, int Vs);
void crossentropy_sums(float* sums, const float* maxv, const bf16* logits, const int* targets, int64_t N, int Vvalid,
                       int Vs, int vocab_begin);
void softmax_crossentropy_forward(float* losses, bf16* probs, const bf16* logits, const float* maxv, const float* sums,
                                  int64_t N, int Vvalid, int Vs);
void softmax_crossentropy_backward(bf16* dlogits, const bf16* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin);
void softmax_crossentropy_forward_backward(float* losses, bf16* dlogits, const bf16* logits, const float* maxv,
                                           const float* sums, const int* targets, const float* weights, float dloss,
                                           int64_t N, int Vvalid, int Vs, int vocab_begin);
void adamw_update(float* master, bf16* params, float* m, float* v, const float* grads, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t);
void cast_from_f32(bf16* out, const float* in, int64_t n);
void cast_to_f32(float* out, const bf16* in, int64_t n);
// The Llama block's ops (llama.cu).
void rmsnorm_sumsq(float* sumsq, const bf16* inp, int64_t N, int C);
void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int64_t N, int C, int C_total,
                     float eps);
void rmsnorm_backward_dot(float* dot, const bf16* dout, const bf16* inp, const bf16* weight, int64_t N, int C);
void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                      const float* rstd, const float* dot, int64_t N, int C, int C_total);
void rope_forward(bf16* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride);
void rope_backward(bf16* dx, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride);
void swiglu_forward(bf16* out, const bf16* inp, int64_t N, int F);
void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N, int F);
void repeat_kv_forward(bf16* out, const bf16* inp, int64_t N, int NH, int NKV, int HS);
void repeat_kv_backward(bf16* dinp, const bf16* dout, int64_t N, int NH, int NKV, int HS);
// Inference with a KV cache (kv_cache.cu).
void kv_cache_append(bf16* kcache, bf16* vcache, const bf16* qkv, int B, int n, int pos, int Tc, int NH, int NKV,
                     int HS);
void attention_cached_forward(bf16* out, const bf16* qkv, const bf16* kcache, const bf16* vcache, int B, int n,
                              int pos, int Tc, int NH, int NKV, int HS);

namespace detail {

// The calling thread's cuBLASLt handle for the current device (created on first use, kept).
cublasLtHandle_t cublaslt();

// The cuBLASLt workspace of the current device: allocated once (kLtWorkspaceBytes), shared by every
// GEMM of this backend. Safe to share because all of them run in order on the one stream.
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;
void* lt_workspace();

}  // namespace detail
}  // namespace axonn::kernels::cuda_bf16
