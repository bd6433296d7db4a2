// kernels/ops_bf16.hpp — the op list in bf16 mixed precision (issue 8, spec §9.2): its contract and its tables.
// The interface is kernels/ops.hpp's OpTable<E>, here with E = bf16 (OpsBf16).
//
// The precision contract (what `--dtype bf16` trains with):
//   - parameters used by the ops: bf16 copies of fp32 MASTER weights, which only the optimizer sees;
//   - activations and activation gradients: bf16 (each op rounds its output once, round-to-nearest-even);
//   - parameter gradients: fp32, accumulated in fp32 (a bf16 GEMM writes its fp32 result with beta = 1);
//   - every reduction inside an op (GEMM dot products, LayerNorm statistics, softmax sums, the loss)
//     accumulates in fp32; statistics kept for backward (mean, rstd, the attention log-sum-exp) are fp32.
// Shapes, layouts, argument order and the accumulate-into-gradients rule are those of ops.hpp's one
// interface. Attention is flash-style: forward keeps the per-row log-sum-exp lse[B,NH,T] instead of the
// probabilities att[B,NH,T,T], and backward recomputes them. AdamW writes the bf16 copy in its pass.
//
// Three implementations: `ref_bf16` (CPU, always built: widens to fp32, runs kernels::ref, rounds every
// output to bf16 — the oracle for the GPU), `cpu_bf16` (CPU: bf16 GEMMs, flash-style attention, the
// memory-bound ops on bf16 directly; below) and `cuda_bf16` (device pointers, cuBLASLt GEMMs with bf16
// inputs and fp32 accumulation, a flash attention kernel; built with AXONN_CUDA=ON).
// The row values that the caller completes between the steps of the norms and the cross-entropy are fp32
// arrays in the kernels' memory: host arrays on the CPU, DEVICE arrays for cuda_bf16 (see kernels/cuda.hpp).
#pragma once

#include <cstdint>

#include "axonn/kernels/ops.hpp"

namespace axonn::kernels {

// The CPU tables (always built). ref_bf16: each op widens its inputs, runs the fp32 op of `ref` (naive
// loops: the oracle) and rounds each bf16 output once. cpu_bf16 (training in mixed precision on the CPU):
// the matmuls run bf16 GEMMs (cpu::matmul_* below); the blocks' memory-bound ops, AdamW and the casts work
// on bf16 directly (cpu:: below), and so does the attention (flash-style); the embedding and position
// gradients still widen, run the fp32 op of `cpu` (OpenMP) and round once.
const OpsBf16& ref_bf16_ops();
const OpsBf16& cpu_bf16_ops();

namespace cpu {
// cpu_bf16's matmuls (shapes as OpsBf16's): bf16 GEMMs with fp32 accumulation (kernels::gemm_bf16: oneDNN's
// AMX / AVX512-BF16 kernels; widened to fp32 where the CPU or the GEMM backend has none). The bias and the
// old dinp are added in fp32 and each bf16 output is rounded once; dweight accumulates in fp32 (beta = 1).
// Results agree with ref_bf16 to one bf16 rounding (the GEMM sums in another order), not bit for bit.
void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int64_t N, int C, int OC);
void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                     int64_t N, int C, int OC);
// cpu_bf16's lookup: copies the bf16 rows (the same bits as widening, looking up and rounding).
void embedding_forward(bf16* out, const int* inp, const bf16* wte, int row_begin, int R, int64_t N, int C);
// cpu_bf16's memory-bound ops of the GPT-2 and Llama blocks, AdamW and the casts: the fp32 ops of kernels::cpu written
// once for both storages (cpu/ops_cpu.cpp). They read and write bf16 directly, with fp32 arithmetic in
// registers and the row reductions on a per-thread fp32 row, and give round(the fp32 op on the widened
// inputs) bit for bit, threaded, without fp32 copies of the tensors. AdamW writes the bf16 copy in its pass.
void position_forward(bf16* out, const bf16* wpe, int B, int T, int C);
void layernorm_sum(float* mean, const bf16* inp, int64_t N, int C);
void layernorm_centred_sumsq(float* var, float* mean, const bf16* inp, int64_t N, int C, int C_total);
void layernorm_forward(bf16* out, const float* mean, float* rstd, const bf16* inp, const bf16* weight,
                       const bf16* bias, int64_t N, int C, int C_total);
void layernorm_backward_sums(float* sums, const bf16* dout, const bf16* inp, const bf16* weight, const float* mean,
                             const float* rstd, int64_t N, int C);
void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const bf16* weight, const float* mean, const float* rstd, const float* sums, int64_t N, int C,
                        int C_total);
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
void cast_to_bf16(bf16* out, const float* in, int64_t n);
void cast_to_f32(float* out, const bf16* in, int64_t n);
// cpu_bf16's attention, flash-style (the contract of OpsBf16::attention_*): per (b, h), blocks of 64 query rows
// against their causal keys, every product a bf16 GEMM on the strided q, k, v and dout (fp32 accumulation),
// the softmax and its backward in fp32, the probabilities and score gradients rounded to bf16 once as the
// operands of the GEMMs after them; never [T, T] probabilities, in the forward or the backward (which takes
// them again from q, k and lse).
void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH);
// cpu_bf16's KV cache (the contract of OpTable::kv_cache_append, attention_cached_forward): the cache holds
// the rows' bf16 keys and values; scores, softmax and the weighted sum in fp32, each output rounded once.
void kv_cache_append(bf16* kcache, bf16* vcache, const bf16* qkv, int B, int n, int pos, int Tc, int NH, int NKV,
                     int HS);
void attention_cached_forward(bf16* out, const bf16* qkv, const bf16* kcache, const bf16* vcache, int B, int n,
                              int pos, int Tc, int NH, int NKV, int HS);
void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                        const float* lse, int B, int T, int C, int NH);
// and the Llama block's
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
}  // namespace cpu
// The GPU table (device pointers) is kernels::cuda_bf16_ops() in kernels/cuda.hpp (AXONN_CUDA=ON only).

// The bf16 table of a backend: kRef -> ref_bf16, kCpu -> cpu_bf16, kCuda -> the table registered by
// kernels::cuda_setup() (InvalidArgument without it, as ops_for()).
const OpsBf16& ops_bf16_for(Backend backend);
void register_cuda_bf16_ops(const OpsBf16* ops);

// The op table and the element type of a precision, for code written once for both (the model,
// TpLinear): Precision<float> is fp32, Precision<bf16> mixed precision; both tables are OpTable<E>.
template <class T>
struct Precision;
template <>
struct Precision<float> {
  using Table = OpTable<float>;
  static constexpr DType kDType = DType::kF32;
};
template <>
struct Precision<bf16> {
  using Table = OpTable<bf16>;
  static constexpr DType kDType = DType::kBF16;
};

}  // namespace axonn::kernels
