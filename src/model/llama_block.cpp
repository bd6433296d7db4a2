// The Llama block (Hugging Face's LlamaDecoderLayer): pre-RMSNorm grouped-query attention with RoPE and
// a SwiGLU MLP, no biases. Layouts on the grid (docs/parallelism.md): the residual stream and the
// norms [N, C/Gx] (statistics over X); q|k|v one normal linear of three parts, split over Y by heads
// (each rank's KV heads are those of its query heads); o_proj transposed; gate|up one normal linear of
// two parts; down transposed.
#include <cmath>
#include <vector>

#include "block.hpp"

namespace axonn::model::detail {

namespace {

enum Act : size_t {
  kLn1, kLn1Rstd, kQkv, kQkvRep, kAtty, kAtt, kAttproj, kResidual2, kLn2, kLn2Rstd, kFch, kFchAct, kFcproj,
};
enum Scratch : size_t { kDLn, kDAtty, kDQkv, kDQkvRep, kDFch, kDFchAct, kDAtt, kDot };
enum Linear : int { kLinQkv, kLinO, kLinGateUp, kLinDown };
enum Rope : size_t { kCos, kSin };

// RoPE's frequencies f_i = theta^(-2i/HS), i < HS/2, with Llama 3.1's "llama3" rescaling when given
// (transformers' _compute_llama3_parameters): wavelengths 2 pi / f longer than original/low_freq_factor
// are divided by the factor, shorter than original/high_freq_factor kept, and those between blended.
std::vector<double> rope_frequencies(const GptConfig& c) {
  const int half = c.head_size() / 2;
  std::vector<double> f(static_cast<size_t>(half));
  for (int i = 0; i < half; i++)
    f[static_cast<size_t>(i)] = 1.0 / std::pow(c.rope_theta, 2.0 * i / c.head_size());
  const RopeScaling& s = c.rope_scaling;
  if (!s.enabled()) return f;
  const double old = s.original_max_position_embeddings;
  const double low_wavelen = old / s.low_freq_factor, high_wavelen = old / s.high_freq_factor;
  for (double& x : f) {
    const double wavelen = 2.0 * M_PI / x;
    if (wavelen > low_wavelen) {
      x /= s.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      x = (1.0 - smooth) * x / s.factor + smooth * x;
    }
  }
  return f;
}

}  // namespace

LlamaBlock::LlamaBlock(const PassContext& ctx)
    : ctx_(ctx), NHy_(ctx.spec.config.num_heads / ctx.grid.shape().gy),
      KVy_(ctx.spec.config.kv_heads() / ctx.grid.shape().gy), HS_(ctx.spec.config.head_size()), Ay_(NHy_ * HS_),
      KVWy_(KVy_ * HS_), Fy_(ctx.spec.config.mlp_hidden() / ctx.grid.shape().gy),
      ln1_(ctx.spec.index("input_layernorm")), ln2_(ctx.spec.index("post_attention_layernorm")),
      eps_(ctx.spec.config.norm_eps), grouped_(KVy_ != NHy_),
      qkv_(ctx.grid, tp_linear_spec(ctx.spec.linears[kLinQkv]), "qkv"),
      o_proj_(ctx.grid, tp_linear_spec(ctx.spec.linears[kLinO]), "o_proj"),
      gate_up_(ctx.grid, tp_linear_spec(ctx.spec.linears[kLinGateUp]), "gate_up"),
      down_(ctx.grid, tp_linear_spec(ctx.spec.linears[kLinDown]), "down"),
      acts_("activations (Llama blocks)", ctx.mem.device), scratch_("backward scratch (Llama block)", ctx.mem.device),
      rope_("RoPE cos/sin", ctx.mem.device), cache_(ctx, NHy_, KVy_, HS_) {
  reserve(ctx.block_shape(), acts_, scratch_, rope_);
  acts_.allocate();
  scratch_.allocate();
  rope_.allocate();
  // the rotation of each position t < T: cos and sin of t f_i, computed in double, kept in fp32
  const int T = ctx.T, half = HS_ / 2;
  const std::vector<double> f = rope_frequencies(ctx.spec.config);
  std::vector<float> cos(static_cast<size_t>(T) * half), sin(cos.size());
  for (int t = 0; t < T; t++)
    for (int i = 0; i < half; i++) {
      const double angle = t * f[static_cast<size_t>(i)];
      cos[static_cast<size_t>(t) * half + i] = static_cast<float>(std::cos(angle));
      sin[static_cast<size_t>(t) * half + i] = static_cast<float>(std::sin(angle));
    }
  ctx.mem.upload(rope_.tensor(kCos).data(), cos.data(), sizeof(float) * cos.size());
  ctx.mem.upload(rope_.tensor(kSin).data(), sin.data(), sizeof(float) * sin.size());
}

int64_t LlamaBlock::kv_width(const BlockShape& s) {
  return static_cast<int64_t>(s.spec->config.kv_heads() / s.gy) * s.spec->config.head_size();
}

void LlamaBlock::reserve(const BlockShape& s, Arena& acts, Arena& scratch, Arena& rope) {
  const bool bf16 = s.bf16;
  const DType act = bf16 ? DType::kBF16 : DType::kF32, f32 = DType::kF32;
  const GptConfig& c = s.spec->config;
  const int64_t N = s.N, Lk = s.recompute ? 1 : c.num_layers, Cx = s.Cx;
  const int B = s.B, T = s.T, HS = c.head_size(), NHy = c.num_heads / s.gy, Ay = NHy * HS, Fy = c.mlp_hidden() / s.gy;
  const int64_t KVWy = kv_width(s);
  const bool grouped = KVWy != Ay;
  const int64_t qkv_width = Ay + 2 * KVWy, rep_width = grouped ? 3 * Ay : 0;
  auto add = [&](Act a, const char* name, Shape shape, DType dt) { reserve_slot(acts, a, name, shape, dt); };
  add(kLn1, "ln1", {Lk, N, Cx}, act);
  add(kLn1Rstd, "ln1_rstd", {Lk, N}, f32);
  add(kQkv, "qkv", {Lk, N, qkv_width}, act);           // q|k|v of this rank's heads, q and k rotated
  add(kQkvRep, "qkv_repeated", {Lk, N, rep_width}, act);  // with each KV head repeated for its queries
  add(kAtty, "atty", {Lk, N, Ay}, act);
  if (bf16)
    add(kAtt, "att_lse", {Lk, B, NHy, T}, f32);
  else
    add(kAtt, "att", {Lk, B, NHy, T, T}, f32);
  add(kAttproj, "o_proj", {Lk, N, Cx}, act);
  add(kResidual2, "residual2", {Lk, N, Cx}, act);
  add(kLn2, "ln2", {Lk, N, Cx}, act);
  add(kLn2Rstd, "ln2_rstd", {Lk, N}, f32);
  add(kFch, "gate_up", {Lk, N, 2 * Fy}, act);
  add(kFchAct, "swiglu", {Lk, N, Fy}, act);
  add(kFcproj, "down", {Lk, N, Cx}, act);
  auto sadd = [&](Scratch x, const char* name, Shape shape, DType dt) { reserve_slot(scratch, x, name, shape, dt); };
  sadd(kDLn, "dln", {N, Cx}, act);
  sadd(kDAtty, "datty", {N, Ay}, act);
  sadd(kDQkv, "dqkv", {N, qkv_width}, act);
  sadd(kDQkvRep, "dqkv_repeated", {N, rep_width}, act);
  sadd(kDFch, "dgate_up", {N, 2 * Fy}, act);
  sadd(kDFchAct, "dswiglu", {N, Fy}, act);
  if (bf16)
    sadd(kDAtt, "attention_d", {B, NHy, T}, f32);
  else
    sadd(kDAtt, "datt", {B, NHy, T, T}, f32);
  sadd(kDot, "rmsnorm_dot", {N}, f32);

  // the rotation of each position t < T: cos and sin of t f_i
  const int half = HS / 2;
  rope.reserve("cos", {T, half});
  rope.reserve("sin", {T, half});
}

// Forward: from the block's input to its output; the intermediate activations go to slot(l). Run by
// the forward and, under recompute, again by the backward (with the same collectives: the same results).
// With a chunk (inference), on its B*n rows: RoPE at its positions, the attention over the KV cache.
template <class E>
void LlamaBlock::forward(int l, const E* residual, E* out, const CachedChunk* chunk) {
  auto& tl = ctx_.tl;
  auto scope = tl.group("block forward");
  const auto& k = ctx_.kernels<E>();
  const int B = ctx_.B, T = ctx_.T, Cx = ctx_.Cx;
  const int64_t N = chunk ? static_cast<int64_t>(B) * chunk->n : ctx_.N;
  auto P = [&](int t) { return ctx_.weight<E>(t); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto W = [&](int kind) { return ctx_.gathered<E>(kind, l); };
  const float* cos = rope_.tensor(kCos).f32();
  const float* sin = rope_.tensor(kSin).f32();
  const int a = ctx_.slot(l);
  E* ln1 = ptr<E>(A(kLn1)[a]);
  E* qkv = ptr<E>(A(kQkv)[a]);
  E* qkv_rep = grouped_ ? ptr<E>(A(kQkvRep)[a]) : qkv;
  E* atty = ptr<E>(A(kAtty)[a]);
  E* attproj = ptr<E>(A(kAttproj)[a]);
  E* residual2 = ptr<E>(A(kResidual2)[a]);
  E* ln2 = ptr<E>(A(kLn2)[a]);
  E* fch = ptr<E>(A(kFch)[a]);
  E* fch_act = ptr<E>(A(kFchAct)[a]);
  E* fcproj = ptr<E>(A(kFcproj)[a]);
  // attention block: RMSNorm (statistics over X) -> q|k|v (A) -> RoPE on q and k -> attention on this
  // rank's heads (each KV head repeated for its query heads) -> o_proj (B)
  rmsnorm_forward<E>(ctx_, ln1, A(kLn1Rstd)[a].f32(), residual, ptr<E>(P(ln1_)[l]), eps_, N);
  AXONN_LINEAR(qkv_, forward, qkv, ln1, W(kLinQkv), nullptr, N);
  if (chunk) {
    // the chunk's rows [B, n] are positions [pos, pos + n): the rotation tables from row pos on
    const int64_t at = static_cast<int64_t>(chunk->pos) * (HS_ / 2);
    AXONN_OP(rope_forward, qkv, cos + at, sin + at, B, chunk->n, NHy_ + KVy_, HS_, Ay_ + 2 * KVWy_);
    cache_.attend<E>(l, *chunk, atty, qkv);  // the KV heads as they are: the cache keeps NKV heads
  } else {
    AXONN_OP(rope_forward, qkv, cos, sin, B, T, NHy_ + KVy_, HS_, Ay_ + 2 * KVWy_);  // q and k are adjacent
    if (grouped_) AXONN_OP(repeat_kv_forward, qkv_rep, qkv, N, NHy_, KVy_, HS_);
    // fp32: keeps the probabilities att [B, NH, T, T]; bf16 (flash): keeps their log-sum-exp [B, NH, T]
    AXONN_OP(attention_forward, atty, A(kAtt)[a].f32(), qkv_rep, B, T, Ay_, NHy_);
  }
  AXONN_LINEAR(o_proj_, forward, attproj, atty, W(kLinO), nullptr, N);
  AXONN_OP(residual_forward, residual2, residual, attproj, N * Cx);
  // MLP block: RMSNorm -> gate|up (A) -> SwiGLU on this rank's F/Gy -> down (B)
  rmsnorm_forward<E>(ctx_, ln2, A(kLn2Rstd)[a].f32(), residual2, ptr<E>(P(ln2_)[l]), eps_, N);
  AXONN_LINEAR(gate_up_, forward, fch, ln2, W(kLinGateUp), nullptr, N);
  AXONN_OP(swiglu_forward, fch_act, fch, N, Fy_);
  AXONN_LINEAR(down_, forward, fcproj, fch_act, W(kLinDown), nullptr, N);
  AXONN_OP(residual_forward, out, residual2, fcproj, N * Cx);
}

// Backward, in exact reverse of forward. Reads the block's activations from slot(l); accumulates the
// parameter gradients of layer l.
template <class E>
void LlamaBlock::backward(int l, const E* residual, E* dresidual, bool last) {
  auto& tl = ctx_.tl;
  auto scope = tl.group("block backward");
  const auto& k = ctx_.kernels<E>();
  const int B = ctx_.B, T = ctx_.T, Cx = ctx_.Cx;
  const int64_t N = ctx_.N;
  const MemoryOps& mem = ctx_.mem;
  GradientSync& sync = ctx_.sync;
  auto P = [&](int t) { return ctx_.weight<E>(t); };
  auto G = [&](int t) { return ctx_.grad(t); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto S = [&](Scratch s) { return ptr<E>(scratch_.tensor(s)); };
  auto W = [&](int kind) { return ctx_.gathered<E>(kind, l); };
  auto dW = [&](int kind) { return G(ctx_.spec.linears[static_cast<size_t>(kind)].weight)[l].f32(); };
  auto tag = [&](int kind) { return sync.shard_tag(kind, l, last); };
  const float* cos = rope_.tensor(kCos).f32();
  const float* sin = rope_.tensor(kSin).f32();
  const int a = ctx_.slot(l);
  E* dln = S(kDLn);
  float* dot = scratch_.tensor(kDot).f32();
  E* dqkv = S(kDQkv);
  E* dqkv_rep = grouped_ ? S(kDQkvRep) : dqkv;
  const E* qkv_rep = grouped_ ? ptr<E>(A(kQkvRep)[a]) : ptr<E>(A(kQkv)[a]);
  // Each linear's backward: dx all-reduced over its output group (overlapped with the dW GEMM under
  // OAR), dW reduce-scattered over Z (retired later under ORS); after each, the weight shards whose
  // gradient became complete are summed over data (DP overlap).
  // MLP block, reversed
  const size_t e = sizeof(E);
  mem.zero(S(kDFchAct), e * N * Fy_);
  mem.zero(S(kDFch), e * N * 2 * Fy_);
  mem.zero(dln, e * N * Cx);
  AXONN_LINEAR(down_, backward, S(kDFchAct), dW(kLinDown), nullptr, dresidual, ptr<E>(A(kFchAct)[a]), W(kLinDown), N,
               tag(kLinDown));
  sync.issue_retired_shards();
  AXONN_OP(swiglu_backward, S(kDFch), ptr<E>(A(kFch)[a]), S(kDFchAct), N, Fy_);
  AXONN_LINEAR(gate_up_, backward, dln, dW(kLinGateUp), nullptr, S(kDFch), ptr<E>(A(kLn2)[a]), W(kLinGateUp), N,
               tag(kLinGateUp));
  sync.issue_retired_shards();
  rmsnorm_backward<E>(ctx_, dresidual, G(ln2_)[l].f32(), dot, dln, ptr<E>(A(kResidual2)[a]), ptr<E>(P(ln2_)[l]),
                      A(kLn2Rstd)[a].f32());
  // attention block, reversed
  mem.zero(S(kDAtty), e * N * Ay_);
  mem.zero(dqkv, e * N * (Ay_ + 2 * KVWy_));
  if (grouped_) mem.zero(dqkv_rep, e * N * 3 * Ay_);
  mem.zero(dln, e * N * Cx);
  AXONN_LINEAR(o_proj_, backward, S(kDAtty), dW(kLinO), nullptr, dresidual, ptr<E>(A(kAtty)[a]), W(kLinO), N,
               tag(kLinO));
  sync.issue_retired_shards();
  // scratch: fp32 d att [B, NH, T, T]; bf16 (flash) D = rowsum(dout * out) [B, NH, T] from the forward's output
  AXONN_OP(attention_backward, dqkv_rep, scratch_.tensor(kDAtt).f32(), S(kDAtty), qkv_rep, ptr<E>(A(kAtty)[a]),
           A(kAtt)[a].f32(), B, T, Ay_, NHy_);
  if (grouped_) AXONN_OP(repeat_kv_backward, dqkv, dqkv_rep, N, NHy_, KVy_, HS_);
  AXONN_OP(rope_backward, dqkv, cos, sin, B, T, NHy_ + KVy_, HS_, Ay_ + 2 * KVWy_);
  AXONN_LINEAR(qkv_, backward, dln, dW(kLinQkv), nullptr, dqkv, ptr<E>(A(kLn1)[a]), W(kLinQkv), N, tag(kLinQkv));
  sync.issue_retired_shards();
  rmsnorm_backward<E>(ctx_, dresidual, G(ln1_)[l].f32(), dot, dln, residual, ptr<E>(P(ln1_)[l]), A(kLn1Rstd)[a].f32());
  sync.issue_stage(Stage::kBlock, l);  // over Z*data: the block's norms are complete
}

template void LlamaBlock::forward<float>(int, const float*, float*, const CachedChunk*);
template void LlamaBlock::forward<kernels::bf16>(int, const kernels::bf16*, kernels::bf16*, const CachedChunk*);
template void LlamaBlock::backward<float>(int, const float*, float*, bool);
template void LlamaBlock::backward<kernels::bf16>(int, const kernels::bf16*, kernels::bf16*, bool);

}  // namespace axonn::model::detail
