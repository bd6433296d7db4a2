// kernels/ops.hpp — the op list of the GPT, forward and backward, on raw buffers: one interface for both
// precisions, OpTable<E>, generic in the element type E of the activations and of the weights the ops read.
//
// OpTable<float> (Ops) is fp32. Its ops exist in `ref` (naive loops, always built; the test oracle), `cpu`
// (BLAS GEMMs and OpenMP loops; the default) and, in a build with -DAXONN_CUDA=ON, `cuda` (device pointers).
// OpTable<bf16> (OpsBf16) is bf16 mixed precision; kernels/ops_bf16.hpp has its precision contract and its
// tables. A model picks one table once (ops_for(), ops_bf16_for()) and calls through it; code written once
// for both precisions names the table as kernels::Precision<E>::Table (ops_bf16.hpp). Conventions, as in llm.c:
//   - arguments: outputs first, then inputs, then weights, then dimensions;
//   - backward ops ACCUMULATE (+=) into every gradient they produce, so callers zero them once;
//   - dimension letters: B batch, T sequence, C channels, NH heads, HS = C/NH head size,
//     V vocabulary, Vp padded vocabulary, N = B*T rows, OC output channels.
//   - matrices are row-major; weights use the nn.Linear layout [OC, C] (y = x W^T + b).
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::kernels {

enum class Backend { kRef, kCpu, kCuda };

std::string_view backend_name(Backend b);
Backend parse_backend(std::string_view name);  // "ref" | "cpu" | "cuda"; throws InvalidArgument
// Where a backend's buffers live: Device::kCuda for kCuda, else the host.
Device backend_device(Backend b);

// bf16 storage: the upper 16 bits of an fp32 (core/dtype.hpp converts).
using bf16 = uint16_t;

// The op list. Each line names the shapes of its arguments. What is fp32 in both precisions: the statistics
// kept between ops (the norms' mean and rstd, the attention's saved softmax, the row values the caller
// completes between steps), the losses, the parameter gradients, the master weights and AdamW's moments.
// A null entry is an op the table does not provide, which callers check: the fp32 tables have no casts
// (there are no copies of the weights to make).
template <class E>
struct OpTable {
  // Token embedding over a range of vocabulary rows (the whole table on one rank):
  // out[N,C] = wte[inp[n] - row_begin] when row_begin <= inp[n] < row_begin + R, else 0.
  void (*embedding_forward)(E* out, const int* inp, const E* wte, int row_begin, int R, int64_t N, int C);
  // dwte[R,C] += dout[n] for the tokens in the range
  void (*embedding_backward)(float* dwte, const E* dout, const int* inp, int row_begin, int R, int64_t N, int C);
  // Position embedding: out[B,T,C] += wpe[t, :]; wpe [maxT,C]
  void (*position_forward)(E* out, const E* wpe, int B, int T, int C);
  // dwpe[t,:] += sum over b of dout[b,t,:]
  void (*position_backward)(float* dwpe, const E* dout, int B, int T, int C);
  // LayerNorm over rows of C_total channels of which this rank holds C, in steps so that the caller
  // completes each row statistic over the channels' group between them (model/block.hpp), as RMSNorm's
  // below; eps = 1e-5. Two-pass statistics (the mean, then the centred sum of squares), as llm.c.
  // mean[N] = sum over this rank's channels of inp
  void (*layernorm_sum)(float* mean, const E* inp, int64_t N, int C);
  // mean[N]: on entry the complete sums, on return sum / C_total; var[N] = sum over this rank's channels
  // of (inp - mean)^2
  void (*layernorm_centred_sumsq)(float* var, float* mean, const E* inp, int64_t N, int C, int C_total);
  // rstd[N]: on entry the complete centred sums of squares, on return 1/sqrt(sum / C_total + eps) (kept for
  // the backward, with mean); out[N,C] = (inp - mean) * rstd * weight + bias
  void (*layernorm_forward)(E* out, const float* mean, float* rstd, const E* inp, const E* weight, const E* bias,
                            int64_t N, int C, int C_total);
  // sums[2N] = this rank's [N] sum(dnorm) | [N] sum(dnorm * xhat), dnorm = weight * dout,
  // xhat = (inp - mean) * rstd
  void (*layernorm_backward_sums)(float* sums, const E* dout, const E* inp, const E* weight, const float* mean,
                                  const float* rstd, int64_t N, int C);
  // with the complete sums: dinp[N,C] += (dnorm - sum(dnorm) / C_total - xhat sum(dnorm xhat) / C_total) rstd;
  // dweight[C] += sum over the rows of xhat * dout; dbias[C] += sum of dout
  void (*layernorm_backward)(E* dinp, float* dweight, float* dbias, const E* dout, const E* inp, const E* weight,
                             const float* mean, const float* rstd, const float* sums, int64_t N, int C, int C_total);
  // out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC] (bias may be null)
  void (*matmul_forward)(E* out, const E* inp, const E* weight, const E* bias, int64_t N, int C, int OC);
  // dinp[N,C] += dout @ weight; dweight[OC,C] += dout^T @ inp; dbias[OC] += column sums. Any output
  // may be null; calling for dinp alone and then for dweight/dbias gives the bits of one call.
  void (*matmul_backward)(E* dinp, float* dweight, float* dbias, const E* dout, const E* inp, const E* weight,
                          int64_t N, int C, int OC);
  // Causal self-attention. qkv[B,T,3C] holds q|k|v; out[B,T,C]; scale 1/sqrt(HS). `saved` keeps what the
  // backward needs of the softmax: the fp32 tables the probabilities att[B,NH,T,T] (row t valid for
  // t2 <= t), the bf16 tables (flash-style) their log-sum-exp lse[B,NH,T] = log sum_t2<=t exp(q.k_t2 / sqrt(HS)).
  void (*attention_forward)(E* out, float* saved, const E* qkv, int B, int T, int C, int NH);
  // dqkv[B,T,3C] += ...; `out` and `saved` are the forward's (the fp32 tables read `saved` only); scratch is
  // overwritten: [B,NH,T,T] (d att) in the fp32 tables, [B,NH,T] (rowsum(dout * out) per head) in the bf16 ones.
  void (*attention_backward)(E* dqkv, float* scratch, const E* dout, const E* qkv, const E* out, const float* saved,
                             int B, int T, int C, int NH);
  // GELU, tanh approximation: out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  void (*gelu_forward)(E* out, const E* inp, int64_t N);
  void (*gelu_backward)(E* dinp, const E* inp, const E* dout, int64_t N);
  // out[N] = a + b
  void (*residual_forward)(E* out, const E* a, const E* b, int64_t N);
  // da += dout; db += dout
  void (*residual_backward)(E* da, E* db, const E* dout, int64_t N);
  // Softmax over the vocabulary and the cross-entropy of the target, in steps so that the caller completes
  // each row value over the vocabulary's group (X*Y) between them (model/gpt.cpp), as the norms'. This rank
  // holds Vs columns per row (the row stride) for vocabulary ids [vocab_begin, vocab_begin + Vs), of which
  // the first Vvalid are real tokens (the rest padding; on one rank: Vs = Vp, Vvalid = V, vocab_begin = 0).
  // maxv[N] = max over this rank's valid columns of logits (-1e30 where it holds none)
  void (*crossentropy_max)(float* maxv, const E* logits, int64_t N, int Vvalid, int Vs);
  // with the complete max: sums[2N] = this rank's [N] sum of exp(logit - max) over its valid columns |
  // [N] the target's logit where this rank holds it, else 0
  void (*crossentropy_sums)(float* sums, const float* maxv, const E* logits, const int* targets, int64_t N,
                            int Vvalid, int Vs, int vocab_begin);
  // with the complete sums: probs[N,Vs] = exp(logit - max) / sum (padding set to 0; may alias logits);
  // losses[N] = log(sum) + max - logit(target) = -log p(target)
  void (*softmax_crossentropy_forward)(float* losses, E* probs, const E* logits, const float* maxv,
                                       const float* sums, int64_t N, int Vvalid, int Vs);
  // dlogits[N,Vs] += (probs - onehot(target)) * dloss * weights[n] over the valid columns (may alias
  // probs: then it is overwritten, not accumulated). dloss = d(mean loss)/d(loss_i), e.g. 1/N; weights
  // [N] (the model's memory) weigh each token's loss, e.g. the Goldfish mask (model/goldfish.hpp: 0 for
  // a dropped target, 1 for a kept one); null: every token weighs 1.
  void (*softmax_crossentropy_backward)(E* dlogits, const E* probs, const int* targets, const float* weights,
                                        float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin);
  // A chunk whose gradient is taken at once (a training forward, model/gpt.cpp): softmax_crossentropy_forward
  // and then softmax_crossentropy_backward in place, in one pass that never stores the probabilities: losses[N],
  // and dlogits[N,Vs] (may alias logits) = (probs - onehot(target)) * dloss * weights[n] over the valid columns,
  // padding 0. Each probability is rounded to E as the forward stores it, so both results equal the two steps'
  // bit for bit, in every table.
  void (*softmax_crossentropy_forward_backward)(float* losses, E* dlogits, const E* logits, const float* maxv,
                                                const float* sums, const int* targets, const float* weights,
                                                float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin);
  // AdamW (Loshchilov & Hutter), as llm.c, on the fp32 master weights: g = grad * grad_scale;
  // m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr (m_hat / (sqrt(v_hat) + eps) + weight_decay p), with
  // m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t), t >= 1. `copy` is the weights' copy in E that the other
  // ops read: the bf16 tables write round(p) there in the same pass (required); the fp32 tables take null
  // (their ops read the master itself).
  void (*adamw_update)(float* master, E* copy, float* m, float* v, const float* grads, int64_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t);
  // Gradient-norm clipping: sums[i] = the sum of squares of tensors[i][0, sizes[i]), accumulated in double,
  // for `count` fp32 tensors (the gradients; device pointers in the CUDA table). `sums`, `tensors` and `sizes`
  // are host arrays: one call takes every tensor's sum, so that the CUDA table waits for the device once per
  // norm, not once per tensor. Each sum is the one a call for that tensor alone gives.
  void (*sum_squares)(double* sums, const float* const* tensors, const int64_t* sizes, int count);
  // The weights' copies in E after loading or initialising the masters: out[n] = round(in[n]); and back,
  // out[n] = widen(in[n]). bf16 tables only (null in the fp32 ones).
  void (*cast_from_f32)(E* out, const float* in, int64_t n);
  void (*cast_to_f32)(float* out, const E* in, int64_t n);

  // --- the Llama block's ops ---
  // RMSNorm over rows of C_total channels of which this rank holds C, in steps so that the caller
  // completes each row statistic over the channels' group between them (model/block.hpp):
  // sumsq[N] = sum over this rank's channels of inp^2
  void (*rmsnorm_sumsq)(float* sumsq, const E* inp, int64_t N, int C);
  // rstd[N]: on entry the complete sums of squares, on return 1/sqrt(sum / C_total + eps) (kept for the
  // backward); out[N,C] = inp * rstd * weight[C]
  void (*rmsnorm_forward)(E* out, float* rstd, const E* inp, const E* weight, int64_t N, int C, int C_total,
                          float eps);
  // dot[N] = sum over this rank's channels of dout * weight * inp
  void (*rmsnorm_backward_dot)(float* dot, const E* dout, const E* inp, const E* weight, int64_t N, int C);
  // with the complete dot: dinp[N,C] += rstd (dout weight - inp rstd^2 dot / C_total);
  // dweight[C] += sum over the rows of dout inp rstd
  void (*rmsnorm_backward)(E* dinp, float* dweight, const E* dout, const E* inp, const E* weight, const float* rstd,
                           const float* dot, int64_t N, int C, int C_total);
  // RoPE, Hugging Face's rotate-half layout: in row b*T + t of x [B*T, stride], the first `heads` heads
  // of HS channels rotate in place, channel pair (i, i + HS/2) by the angle of (t, i):
  // (x_i, x_j) <- (x_i cos - x_j sin, x_j cos + x_i sin) with cos, sin [T, HS/2] (fp32)
  void (*rope_forward)(E* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride);
  // dx in place: the inverse rotation (the transpose of the forward's)
  void (*rope_backward)(E* dx, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride);
  // SwiGLU: out[N,F] = silu(gate) * up, where row n of inp [N,2F] is gate | up; silu(g) = g / (1 + exp(-g))
  void (*swiglu_forward)(E* out, const E* inp, int64_t N, int F);
  // dinp[N,2F] += the gradients of gate and up
  void (*swiglu_backward)(E* dinp, const E* inp, const E* dout, int64_t N, int F);
  // Grouped-query attention on attention_forward's layout: inp [N, (NH + 2 NKV) HS] holds q | k | v with
  // NKV heads in k and v; out [N, 3 NH HS] holds q | k | v with KV head j repeated for the query heads
  // [j G, (j+1) G), G = NH / NKV
  void (*repeat_kv_forward)(E* out, const E* inp, int64_t N, int NH, int NKV, int HS);
  // dinp += dout folded back: q's gradient, and each KV head's the sum of its G copies'
  void (*repeat_kv_backward)(E* dinp, const E* dout, int64_t N, int NH, int NKV, int HS);

  // --- inference with a KV cache (docs/generate.md; the CPU tables, fp32 and bf16, and the fp32 CUDA table) ---
  // n new positions [pos, pos + n) of each of B sequences; row b*n + i of qkv [B*n, (NH + 2 NKV) HS]
  // holds q | k | v (NKV heads in k and v; NKV = NH without grouping). The cache kcache, vcache
  // [B, Tc, NKV*HS] holds the keys and values of positions [0, Tc) of each sequence.
  // kcache, vcache at positions [pos, pos + n) <- the rows' k and v (pos + n <= Tc)
  void (*kv_cache_append)(E* kcache, E* vcache, const E* qkv, int B, int n, int pos, int Tc, int NH, int NKV, int HS);
  // Causal attention of the new positions over the cache: out[B*n, NH*HS]; query head h of row b*n + i
  // attends to KV head h / (NH / NKV) at cache positions [0, pos + i]; scale 1/sqrt(HS). With pos = 0
  // and n = T, attention_forward's output (on the repeated heads of repeat_kv_forward).
  void (*attention_cached_forward)(E* out, const E* qkv, const E* kcache, const E* vcache, int B, int n, int pos,
                                   int Tc, int NH, int NKV, int HS);
};
// The two precisions' tables.
using Ops = OpTable<float>;
using OpsBf16 = OpTable<bf16>;

// The table of a backend. kCuda is the table registered by kernels::cuda_setup() (kernels/cuda.hpp);
// without it (a CPU-only build, or no setup) InvalidArgument says what to do.
const Ops& ops_for(Backend backend);
// Called by the CUDA library (cuda_setup); the table must outlive its use.
void register_cuda_ops(const Ops* ops);

// The sum of squares of each tensor of `tensors` (fp32 slots, in the table's memory), slot by slot, by one
// sum_squares call: the gradient norm's sums, one wait on a GPU.
std::vector<double> sums_of_squares(const Ops& ops, const Arena& tensors);

// The op list by name, stated once (OpTable above states each op's signature and contract):
//   AXONN_OPS_ON_E: the ops on activations and weights of the element type E, in every table;
//   AXONN_OPS_ON_F32_GRADS: the ops on the fp32 parameter gradients (a bf16 table takes its fp32 table's);
//   AXONN_OPS_CASTS: the weights' copies in E (bf16 tables only);
//   AXONN_OPS_KV_CACHE: inference with a KV cache (every table).
// The implementations' declarations below and every backend's table (AXONN_FILL_OPS) are generated from
// these names and OpTable's member types: a new op is a member of OpTable, its name here, and its
// implementations. A member left out of the lists fails the static_assert below.
#define AXONN_OPS_ON_E(X, ns)                                                                                    \
  X(ns, embedding_forward) X(ns, embedding_backward) X(ns, position_forward) X(ns, position_backward)            \
  X(ns, layernorm_sum) X(ns, layernorm_centred_sumsq) X(ns, layernorm_forward) X(ns, layernorm_backward_sums)    \
  X(ns, layernorm_backward) X(ns, matmul_forward) X(ns, matmul_backward) X(ns, attention_forward)                \
  X(ns, attention_backward) X(ns, gelu_forward) X(ns, gelu_backward) X(ns, residual_forward)                     \
  X(ns, residual_backward) X(ns, crossentropy_max) X(ns, crossentropy_sums) X(ns, softmax_crossentropy_forward)  \
  X(ns, softmax_crossentropy_backward) X(ns, softmax_crossentropy_forward_backward) X(ns, adamw_update)          \
  X(ns, rmsnorm_sumsq) X(ns, rmsnorm_forward) X(ns, rmsnorm_backward_dot) X(ns, rmsnorm_backward)                \
  X(ns, rope_forward) X(ns, rope_backward) X(ns, swiglu_forward) X(ns, swiglu_backward) X(ns, repeat_kv_forward) \
  X(ns, repeat_kv_backward)
#define AXONN_OPS_ON_F32_GRADS(X, ns) X(ns, sum_squares)
#define AXONN_OPS_CASTS(X, ns) X(ns, cast_from_f32) X(ns, cast_to_f32)
#define AXONN_OPS_KV_CACHE(X, ns) X(ns, kv_cache_append) X(ns, attention_cached_forward)

namespace detail {
#define AXONN_COUNT_OP(ns, name) +1
inline constexpr int kListedOps = 0 AXONN_OPS_ON_E(AXONN_COUNT_OP, _) AXONN_OPS_ON_F32_GRADS(AXONN_COUNT_OP, _)
    AXONN_OPS_CASTS(AXONN_COUNT_OP, _) AXONN_OPS_KV_CACHE(AXONN_COUNT_OP, _);
#undef AXONN_COUNT_OP
}  // namespace detail
static_assert(sizeof(Ops) == detail::kListedOps * sizeof(void (*)()),
              "an OpTable member is missing from the op list (AXONN_OPS_* in kernels/ops.hpp)");

// table.op = ns::op for every op of a list, ns the namespace (or class) of the implementations:
// AXONN_OPS_ON_E(AXONN_FILL_OPS, cpu). The fp32 tables hold every op but the casts (they keep no copies
// of the weights): AXONN_FILL_FP32_OPS(ns).
#define AXONN_FILL_OPS(ns, name) table.name = ns::name;
#define AXONN_FILL_FP32_OPS(ns)                                                   \
  AXONN_OPS_ON_E(AXONN_FILL_OPS, ns) AXONN_OPS_ON_F32_GRADS(AXONN_FILL_OPS, ns) \
  AXONN_OPS_KV_CACHE(AXONN_FILL_OPS, ns)

// The fp32 implementations, callable directly (tests compare them): declared from the table's types.
#define AXONN_DECLARE_OP(ns, name) std::remove_pointer_t<decltype(Ops::name)> name;
#define AXONN_DECLARE_OPS AXONN_OPS_ON_E(AXONN_DECLARE_OP, _) AXONN_OPS_ON_F32_GRADS(AXONN_DECLARE_OP, _) \
  AXONN_OPS_KV_CACHE(AXONN_DECLARE_OP, _)

namespace ref {
AXONN_DECLARE_OPS
}
namespace cpu {
AXONN_DECLARE_OPS
}
// The CUDA implementations: every pointer is a DEVICE pointer. Built only with AXONN_CUDA=ON
// (target axonn_kernels_cuda); their table and the rest of the GPU API are in kernels/cuda.hpp.
namespace cuda {
AXONN_DECLARE_OPS
}
#undef AXONN_DECLARE_OPS
#undef AXONN_DECLARE_OP

}  // namespace axonn::kernels
