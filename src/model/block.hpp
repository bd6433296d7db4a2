// model/block.hpp (private to the model) — the transformer blocks, one class per kind, each with an
// explicit forward and backward (the backward in exact reverse order), every collective written where
// it runs:
//   Gpt2Block   LayerNorm -> QKV -> attention -> projection -> residual -> LayerNorm -> FC -> GELU ->
//               projection -> residual (src/model/gpt2_block.cpp)
//   LlamaBlock  RMSNorm -> QKV -> RoPE -> grouped-query attention -> o_proj -> residual -> RMSNorm ->
//               gate|up -> SwiGLU -> down -> residual (src/model/llama_block.cpp)
// A block reads its input (the residual stream [N, C/Gx]) and writes its output; it keeps the
// activations its backward needs for every layer, or under recompute for one (slot 0). Its backward
// reads the stream's gradient from `dresidual` and adds the gradient of its input back into it.
// The model (model/gpt.hpp) owns what the blocks share: PassContext.
#pragma once

#include <type_traits>

#include "axonn/core/memory.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"
#include "axonn/model/shard_map.hpp"
#include "axonn/model/spec.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/parallel/linear.hpp"
#include "axonn/parallel/overlap.hpp"
#include "axonn/parallel/timeline.hpp"
#include "axonn/tensor/arena.hpp"
#include "grad_sync.hpp"

namespace axonn::model::detail {

// The elements of a tensor as the passes' element type E (fp32, or bf16 in mixed precision).
template <class E>
E* ptr(const Tensor& t) {
  if constexpr (std::is_same_v<E, float>)
    return t.f32();
  else
    return t.bf16();
}

// Reserves a tensor in an arena whose slots an enum names: the slot must be the enum's value.
inline void reserve_slot(Arena& arena, size_t slot, const char* name, Shape shape, DType dtype) {
  AXONN_CHECK(arena.reserve(name, shape, dtype) == slot, arena.name(), ": slots out of order at ", name);
}

// What a block's arenas are sized by: PassContext's numbers without its communicators, so that
// Gpt::memory_need sizes them, through the blocks' own reserve(), before any grid exists.
struct BlockShape {
  const ModelSpec* spec;
  int gy, B, T, Cx;
  int64_t N;
  bool recompute, bf16;
};

// What the passes of the model and of its blocks share, owned by the model.
struct PassContext {
  const ModelSpec& spec;
  const ShardMap& shards;
  const parallel::Grid& grid;
  parallel::Timeline& tl;
  const MemoryOps& mem;
  const kernels::Ops& ops;             // fp32 kernels: always (gradients are fp32 in both precisions)
  const kernels::OpsBf16* ops_bf16;    // bf16 kernels: mixed precision only, else null
  const Arena& params;                 // the fp32 parameters
  const Arena& params_bf16;            // mixed precision: their bf16 copies, which the kernels read
  const Arena& grads;
  const parallel::LinearRun& linear_run;
  GradientSync& sync;
  parallel::WeightGather* gather = nullptr;     // set once the model has built it
  int B = 0, T = 0;
  int64_t N = 0;                       // B * T rows
  int Cx = 0;                          // the residual stream's channels on this rank: C / Gx
  bool recompute = false;

  BlockShape block_shape() const { return {&spec, grid.shape().gy, B, T, Cx, N, recompute, ops_bf16 != nullptr}; }

  // The kernels of precision E.
  template <class E>
  const typename kernels::Precision<E>::Table& kernels() const {
    if constexpr (std::is_same_v<E, float>)
      return ops;
    else
      return *ops_bf16;
  }
  // The tensor of parameter t the kernels read (the bf16 copy in mixed precision).
  template <class E>
  Tensor weight(int t) const {
    if constexpr (std::is_same_v<E, float>)
      return params.tensor(static_cast<size_t>(t));
    else
      return params_bf16.tensor(static_cast<size_t>(t));
  }
  Tensor grad(int t) const { return grads.tensor(static_cast<size_t>(t)); }
  // Activation slot of layer l: l, or 0 under recompute (one block's activations are kept).
  int slot(int l) const { return recompute ? 0 : l; }
  // The gathered weight block of linear k, layer l (WeightGather: waits for its all-gather over Z,
  // issued one linear earlier under OAG, or gathers it now; and issues the next one's).
  template <class E>
  const E* gathered(int k, int l) const {
    return static_cast<const E*>(gather->take(k, l));
  }
};

// Each kernel call is timed (and traced) under its op name; needs `tl` (the Timeline) and `k` (the
// kernels of the pass's precision) in scope.
#define AXONN_OP(op, ...)           \
  do {                              \
    auto scope_ = tl.compute(#op);  \
    k.op(__VA_ARGS__);              \
  } while (0)
// Each tensor-parallel linear (GEMMs, weight all-gather wait and the layer's collectives) as a group
// named after the layer and direction ("fc_ backward"); needs `tl` and `ctx_`.
#define AXONN_LINEAR(layer, direction, ...)                     \
  do {                                                          \
    auto scope_ = tl.group(#layer " " #direction);              \
    layer.template direction<E>(__VA_ARGS__, ctx_.linear_run);  \
  } while (0)

// LayerNorm over rows of C channels split over X, with fp32 two-pass statistics (exact on every grid):
//   out = (x - mean) * rstd * w + b, mean = sum(x) / C, rstd = 1 / sqrt(sum((x - mean)^2) / C + eps)
// Each row statistic is computed by one kernel, completed by an all-reduce over X here, and used by the
// next (the call sites of the collectives are these two functions, as for RMSNorm below).
// On N rows (inference's chunks); the passes' ctx.N rows below.
template <class E>
void layernorm_forward(const PassContext& ctx, E* out, float* mean, float* rstd, const E* inp, const E* weight,
                       const E* bias, int64_t N) {
  auto& tl = ctx.tl;
  const auto& k = ctx.kernels<E>();
  const int C = ctx.spec.config.channels;
  AXONN_OP(layernorm_sum, mean, inp, N, ctx.Cx);                     // mean <- sum of x of this rank's channels
  tl.all_reduce(ctx.grid.x(), mean, static_cast<size_t>(N));        // over X
  AXONN_OP(layernorm_centred_sumsq, rstd, mean, inp, N, ctx.Cx, C);  // mean <- sum / C; rstd <- sum of (x - mean)^2
  tl.all_reduce(ctx.grid.x(), rstd, static_cast<size_t>(N));        // over X
  AXONN_OP(layernorm_forward, out, mean, rstd, inp, weight, bias, N, ctx.Cx, C);  // rstd <- 1 / std; out
}
template <class E>
void layernorm_forward(const PassContext& ctx, E* out, float* mean, float* rstd, const E* inp, const E* weight,
                       const E* bias) {
  layernorm_forward<E>(ctx, out, mean, rstd, inp, weight, bias, ctx.N);
}

// dinp += d out / d inp . dout, dweight += ..., dbias += ...; `sums` [2N] fp32 scratch receives
// sum(dout * w) | sum(dout * w * xhat) over all channels (partial, then all-reduced over X).
template <class E>
void layernorm_backward(const PassContext& ctx, E* dinp, float* dweight, float* dbias, float* sums, const E* dout,
                        const E* inp, const E* weight, const float* mean, const float* rstd) {
  auto& tl = ctx.tl;
  const auto& k = ctx.kernels<E>();
  const int C = ctx.spec.config.channels;
  AXONN_OP(layernorm_backward_sums, sums, dout, inp, weight, mean, rstd, ctx.N, ctx.Cx);
  tl.all_reduce(ctx.grid.x(), sums, 2 * static_cast<size_t>(ctx.N));  // over X
  AXONN_OP(layernorm_backward, dinp, dweight, dbias, dout, inp, weight, mean, rstd, sums, ctx.N, ctx.Cx, C);
}

// RMSNorm over rows of C channels split over X, with fp32 statistics (exact on every grid):
//   out = x * rstd * w, rstd = 1 / sqrt(sum(x^2) / C + eps)
// The row statistics are computed by one kernel, completed by an all-reduce over X here, and applied
// by the next (the call sites of the collectives are these two functions).
// On N rows (inference's chunks); the passes' ctx.N rows below.
template <class E>
void rmsnorm_forward(const PassContext& ctx, E* out, float* rstd, const E* inp, const E* weight, float eps, int64_t N) {
  auto& tl = ctx.tl;
  const auto& k = ctx.kernels<E>();
  const int C = ctx.spec.config.channels;
  AXONN_OP(rmsnorm_sumsq, rstd, inp, N, ctx.Cx);                   // rstd <- sum of x^2 of this rank's channels
  tl.all_reduce(ctx.grid.x(), rstd, static_cast<size_t>(N));      // over X
  AXONN_OP(rmsnorm_forward, out, rstd, inp, weight, N, ctx.Cx, C, eps);  // rstd <- 1 / rms; out
}
template <class E>
void rmsnorm_forward(const PassContext& ctx, E* out, float* rstd, const E* inp, const E* weight, float eps) {
  rmsnorm_forward<E>(ctx, out, rstd, inp, weight, eps, ctx.N);
}

// Inference (Gpt::forward_cached): a chunk of n new tokens at positions [pos, pos + n) of each of the
// B sequences (rows [B, n]; pos + n <= T).
struct CachedChunk {
  int pos, n;
};

// The keys and values of every layer's past positions, this rank's KV heads: [L, B, T, NKV*HS] each, of
// the activations' type (fp32 or bf16), allocated at the first chunk. Each chunk appends its keys and
// values, then its queries attend over positions [0, pos + n).
class KvCache {
 public:
  KvCache(const PassContext& ctx, int NH, int NKV, int HS) : ctx_(ctx), NH_(NH), NKV_(NKV), HS_(HS),
        cache_("KV cache", ctx.mem.device) {}
  // out [B*n, NH*HS] from qkv [B*n, (NH + 2 NKV) HS] (q|k|v, q and k at their positions: rotated for RoPE)
  template <class E>
  void attend(int l, const CachedChunk& chunk, E* out, const E* qkv) {
    auto& tl = ctx_.tl;
    const auto& k = ctx_.kernels<E>();
    const int B = ctx_.B, T = ctx_.T;
    if (!cache_.allocated()) {
      reserve(cache_, ctx_.spec.config.num_layers, B, T, static_cast<int64_t>(NKV_) * HS_,
              kernels::Precision<E>::kDType);
      cache_.allocate();
    }
    E* keys = ptr<E>(cache_.tensor(0)[l]);
    E* values = ptr<E>(cache_.tensor(1)[l]);
    AXONN_OP(kv_cache_append, keys, values, qkv, B, chunk.n, chunk.pos, T, NH_, NKV_, HS_);
    AXONN_OP(attention_cached_forward, out, qkv, keys, values, B, chunk.n, chunk.pos, T, NH_, NKV_, HS_);
  }
  size_t bytes() const { return cache_.bytes(); }
  // The keys and values of L layers, B sequences of T positions, `width` (this rank's NKV*HS) each.
  static void reserve(Arena& cache, int64_t L, int64_t B, int64_t T, int64_t width, DType dtype) {
    cache.reserve("keys", {L, B, T, width}, dtype);
    cache.reserve("values", {L, B, T, width}, dtype);
  }

 private:
  const PassContext& ctx_;
  int NH_, NKV_, HS_;
  Arena cache_;
};
// dinp += d out / d inp . dout, dweight += ...; `dot` [N] fp32 scratch receives sum(dout * w * x) over
// all channels (partial, then all-reduced over X).
template <class E>
void rmsnorm_backward(const PassContext& ctx, E* dinp, float* dweight, float* dot, const E* dout, const E* inp,
                      const E* weight, const float* rstd) {
  auto& tl = ctx.tl;
  const auto& k = ctx.kernels<E>();
  const int C = ctx.spec.config.channels;
  AXONN_OP(rmsnorm_backward_dot, dot, dout, inp, weight, ctx.N, ctx.Cx);
  tl.all_reduce(ctx.grid.x(), dot, static_cast<size_t>(ctx.N));  // over X
  AXONN_OP(rmsnorm_backward, dinp, dweight, dout, inp, weight, rstd, dot, ctx.N, ctx.Cx, C);
}

class Gpt2Block {
 public:
  explicit Gpt2Block(const PassContext& ctx);
  // in, out: the residual stream [N, C/Gx] before and after the block. With a chunk (inference):
  // [B*n, C/Gx], attention over the KV cache, which the chunk's keys and values join.
  template <class E>
  void forward(int l, const E* in, E* out, const CachedChunk* chunk = nullptr);
  // dresidual [N, C/Gx]: the gradient of the block's output on entry, of its input on return.
  template <class E>
  void backward(int l, const E* in, E* dresidual, bool last);
  size_t activation_bytes() const { return acts_.bytes() + scratch_.bytes() + cache_.bytes(); }
  void zero_scratch() { scratch_.zero(); }
  // The activations and the backward's scratch the block of this shape holds (reserved, not
  // allocated); its KV cache's width (this rank's KV heads times the head size).
  static void reserve(const BlockShape& s, Arena& acts, Arena& scratch);
  static int64_t kv_width(const BlockShape& s);

 private:
  const PassContext& ctx_;
  int Cy_, NHy_;
  int ln1w_, ln1b_, ln2w_, ln2b_;  // parameter indices
  parallel::TpLinear qkv_, attproj_, fc_, fcproj_;
  Arena acts_, scratch_;
  KvCache cache_;
};

class LlamaBlock {
 public:
  explicit LlamaBlock(const PassContext& ctx);
  // As Gpt2Block::forward (with a chunk: RoPE at the chunk's positions).
  template <class E>
  void forward(int l, const E* in, E* out, const CachedChunk* chunk = nullptr);
  template <class E>
  void backward(int l, const E* in, E* dresidual, bool last);
  size_t activation_bytes() const { return acts_.bytes() + scratch_.bytes() + rope_.bytes() + cache_.bytes(); }
  void zero_scratch() { scratch_.zero(); }
  // As Gpt2Block::reserve, and RoPE's cos and sin.
  static void reserve(const BlockShape& s, Arena& acts, Arena& scratch, Arena& rope);
  static int64_t kv_width(const BlockShape& s);

 private:
  const PassContext& ctx_;
  int NHy_, KVy_, HS_, Ay_, KVWy_, Fy_;  // this rank's heads, KV heads, head size, and widths (over Y)
  int ln1_, ln2_;                        // the norms' parameter indices
  float eps_;
  bool grouped_;                         // fewer KV heads than heads: k and v are repeated for attention
  parallel::TpLinear qkv_, o_proj_, gate_up_, down_;
  Arena acts_, scratch_;
  Arena rope_;                           // cos, sin [T, HS/2] (fp32): the rotation of position t
  KvCache cache_;
};

}  // namespace axonn::model::detail
