// The GPT-2 block (llm.c's): pre-LayerNorm attention and GELU MLP, with biases. Layouts on the grid
// (docs/parallelism.md): the residual stream and LayerNorms [N, C/Gx] (statistics over X); QKV and
// FC normal linears (heads split over Y), the projections transposed.
#include <cstring>

#include "block.hpp"

namespace axonn::model::detail {

namespace {

// The block's activations kept for the backward ([L, ...], or [1, ...] under recompute) and the
// backward's scratch (one layer's gradients); shapes local.
enum Act : size_t {
  kLn1, kLn1Mean, kLn1Rstd, kQkv, kAtty, kAtt, kAttproj, kResidual2, kLn2, kLn2Mean, kLn2Rstd, kFch, kFchGelu,
  kFcproj,
};
enum Scratch : size_t { kDLn, kDAtty, kDQkv, kDFch, kDFchGelu, kDAtt, kLnSums };
// The linears, in forward order (ModelSpec::linears; the weight all-gathers' order).
enum Linear : int { kLinQkv, kLinAttproj, kLinFc, kLinFcproj };

}  // namespace

Gpt2Block::Gpt2Block(const PassContext& ctx)
    : ctx_(ctx), Cy_(ctx.spec.config.channels / ctx.grid.shape().gy),
      NHy_(ctx.spec.config.num_heads / ctx.grid.shape().gy), ln1w_(ctx.spec.index("ln1w")),
      ln1b_(ctx.spec.index("ln1b")), ln2w_(ctx.spec.index("ln2w")), ln2b_(ctx.spec.index("ln2b")),
      qkv_(ctx.grid, tp_linear_spec(ctx.spec.linears[kLinQkv]), "qkv"),
      attproj_(ctx.grid, tp_linear_spec(ctx.spec.linears[kLinAttproj]), "attproj"),
      fc_(ctx.grid, tp_linear_spec(ctx.spec.linears[kLinFc]), "fc"),
      fcproj_(ctx.grid, tp_linear_spec(ctx.spec.linears[kLinFcproj]), "fcproj"),
      acts_("activations (GPT-2 blocks)", ctx.mem.device), scratch_("backward scratch (GPT-2 block)", ctx.mem.device),
      cache_(ctx, NHy_, NHy_, ctx.spec.config.head_size()) {
  reserve(ctx.block_shape(), acts_, scratch_);
  acts_.allocate();
  scratch_.allocate();
}

int64_t Gpt2Block::kv_width(const BlockShape& s) { return s.spec->config.channels / s.gy; }

void Gpt2Block::reserve(const BlockShape& s, Arena& acts, Arena& scratch) {
  // every block's activations, or under recompute one block's; of the model's precision (`act`),
  // but the row statistics and the attention's probabilities (fp32) or log-sum-exp (bf16, flash-style)
  const bool bf16 = s.bf16;
  const DType act = bf16 ? DType::kBF16 : DType::kF32, f32 = DType::kF32;
  const int64_t N = s.N, Lk = s.recompute ? 1 : s.spec->config.num_layers, Cx = s.Cx;
  const int B = s.B, T = s.T, Cy = s.spec->config.channels / s.gy, NHy = s.spec->config.num_heads / s.gy;
  auto add = [&](Act a, const char* name, Shape shape, DType dt) { reserve_slot(acts, a, name, shape, dt); };
  add(kLn1, "ln1", {Lk, N, Cx}, act);
  add(kLn1Mean, "ln1_mean", {Lk, N}, f32);
  add(kLn1Rstd, "ln1_rstd", {Lk, N}, f32);
  add(kQkv, "qkv", {Lk, N, 3 * Cy}, act);
  add(kAtty, "atty", {Lk, N, Cy}, act);
  if (bf16)
    add(kAtt, "att_lse", {Lk, B, NHy, T}, f32);
  else
    add(kAtt, "att", {Lk, B, NHy, T, T}, f32);
  add(kAttproj, "attproj", {Lk, N, Cx}, act);
  add(kResidual2, "residual2", {Lk, N, Cx}, act);
  add(kLn2, "ln2", {Lk, N, Cx}, act);
  add(kLn2Mean, "ln2_mean", {Lk, N}, f32);
  add(kLn2Rstd, "ln2_rstd", {Lk, N}, f32);
  add(kFch, "fch", {Lk, N, 4 * Cy}, act);
  add(kFchGelu, "fch_gelu", {Lk, N, 4 * Cy}, act);
  add(kFcproj, "fcproj", {Lk, N, Cx}, act);
  auto sadd = [&](Scratch c, const char* name, Shape shape, DType dt) { reserve_slot(scratch, c, name, shape, dt); };
  sadd(kDLn, "dln", {N, Cx}, act);
  sadd(kDAtty, "datty", {N, Cy}, act);
  sadd(kDQkv, "dqkv", {N, 3 * Cy}, act);
  sadd(kDFch, "dfch", {N, 4 * Cy}, act);
  sadd(kDFchGelu, "dfch_gelu", {N, 4 * Cy}, act);
  if (bf16)
    sadd(kDAtt, "attention_d", {B, NHy, T}, f32);  // the flash backward's rowsum(dout * out)
  else
    sadd(kDAtt, "datt", {B, NHy, T, T}, f32);
  sadd(kLnSums, "layernorm_sums", {2, N}, f32);  // sum(dnorm) | sum(dnorm * xhat) per row, all-reduced over X
}

// Forward: from the block's input to its output; the intermediate activations go to slot(l). Run by
// the forward and, under recompute, again by the backward (with the same collectives: the same results).
// With a chunk (inference), on its B*n rows, the attention over the KV cache.
template <class E>
void Gpt2Block::forward(int l, const E* residual, E* out, const CachedChunk* chunk) {
  auto& tl = ctx_.tl;
  auto scope = tl.group("block forward");
  const auto& k = ctx_.kernels<E>();
  const int B = ctx_.B, T = ctx_.T, Cx = ctx_.Cx;
  const int64_t N = chunk ? static_cast<int64_t>(B) * chunk->n : ctx_.N;
  auto P = [&](int t) { return ctx_.weight<E>(t); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto W = [&](int kind) { return ctx_.gathered<E>(kind, l); };
  auto bias = [&](int kind) { return ptr<E>(P(ctx_.spec.linears[static_cast<size_t>(kind)].bias)[l]); };
  const int a = ctx_.slot(l);
  E* ln1 = ptr<E>(A(kLn1)[a]);
  E* qkv = ptr<E>(A(kQkv)[a]);
  E* atty = ptr<E>(A(kAtty)[a]);
  E* attproj = ptr<E>(A(kAttproj)[a]);
  E* residual2 = ptr<E>(A(kResidual2)[a]);
  E* ln2 = ptr<E>(A(kLn2)[a]);
  E* fch = ptr<E>(A(kFch)[a]);
  E* fch_gelu = ptr<E>(A(kFchGelu)[a]);
  E* fcproj = ptr<E>(A(kFcproj)[a]);
  // Each linear takes its weight block from the WeightGather: it waits for the block's all-gather
  // over Z (issued one linear earlier under OAG, else now) and issues the next linear's.
  // attention block: LayerNorm (statistics over X) -> QKV (A) -> attention on this rank's heads -> proj (B)
  layernorm_forward<E>(ctx_, ln1, A(kLn1Mean)[a].f32(), A(kLn1Rstd)[a].f32(), residual, ptr<E>(P(ln1w_)[l]),
                       ptr<E>(P(ln1b_)[l]), N);
  AXONN_LINEAR(qkv_, forward, qkv, ln1, W(kLinQkv), bias(kLinQkv), N);
  // fp32: keeps the probabilities att [B, NH, T, T]; bf16 (flash): keeps their log-sum-exp [B, NH, T]
  if (chunk)
    cache_.attend<E>(l, *chunk, atty, qkv);
  else
    AXONN_OP(attention_forward, atty, A(kAtt)[a].f32(), qkv, B, T, Cy_, NHy_);
  AXONN_LINEAR(attproj_, forward, attproj, atty, W(kLinAttproj), bias(kLinAttproj), N);
  AXONN_OP(residual_forward, residual2, residual, attproj, N * Cx);
  // MLP block: LayerNorm -> FC (A) -> GELU on this rank's 4C/Gy -> FC2 (B)
  layernorm_forward<E>(ctx_, ln2, A(kLn2Mean)[a].f32(), A(kLn2Rstd)[a].f32(), residual2, ptr<E>(P(ln2w_)[l]),
                       ptr<E>(P(ln2b_)[l]), N);
  AXONN_LINEAR(fc_, forward, fch, ln2, W(kLinFc), bias(kLinFc), N);
  AXONN_OP(gelu_forward, fch_gelu, fch, N * 4 * Cy_);
  AXONN_LINEAR(fcproj_, forward, fcproj, fch_gelu, W(kLinFcproj), bias(kLinFcproj), N);
  AXONN_OP(residual_forward, out, residual2, fcproj, N * Cx);
}

// Backward, in exact reverse of forward. Reads the block's activations from slot(l); accumulates the
// parameter gradients of layer l.
template <class E>
void Gpt2Block::backward(int l, const E* residual, E* dresidual, bool last) {
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
  auto dbias = [&](int kind) { return G(ctx_.spec.linears[static_cast<size_t>(kind)].bias)[l].f32(); };
  auto tag = [&](int kind) { return sync.shard_tag(kind, l, last); };
  const int a = ctx_.slot(l);
  E* dln = S(kDLn);
  float* ln_sums = scratch_.tensor(kLnSums).f32();  // the LayerNorm backward's row sums [2, N]
  // Each linear's backward: dx all-reduced over its output group (overlapped with the dW GEMM under
  // OAR), dW reduce-scattered over Z (retired later under ORS); after each, the weight shards whose
  // gradient became complete are summed over data (DP overlap).
  // MLP block, reversed
  const size_t e = sizeof(E);
  mem.zero(S(kDFchGelu), e * N * 4 * Cy_);
  mem.zero(S(kDFch), e * N * 4 * Cy_);
  mem.zero(dln, e * N * Cx);
  AXONN_LINEAR(fcproj_, backward, S(kDFchGelu), dW(kLinFcproj), dbias(kLinFcproj), dresidual, ptr<E>(A(kFchGelu)[a]),
               W(kLinFcproj), N, tag(kLinFcproj));
  sync.issue_retired_shards();
  AXONN_OP(gelu_backward, S(kDFch), ptr<E>(A(kFch)[a]), S(kDFchGelu), N * 4 * Cy_);
  AXONN_LINEAR(fc_, backward, dln, dW(kLinFc), dbias(kLinFc), S(kDFch), ptr<E>(A(kLn2)[a]), W(kLinFc), N, tag(kLinFc));
  sync.issue_retired_shards();
  layernorm_backward<E>(ctx_, dresidual, G(ln2w_)[l].f32(), G(ln2b_)[l].f32(), ln_sums, dln,
                        ptr<E>(A(kResidual2)[a]), ptr<E>(P(ln2w_)[l]), A(kLn2Mean)[a].f32(), A(kLn2Rstd)[a].f32());
  // attention block, reversed
  mem.zero(S(kDAtty), e * N * Cy_);
  mem.zero(S(kDQkv), e * N * 3 * Cy_);
  mem.zero(dln, e * N * Cx);
  AXONN_LINEAR(attproj_, backward, S(kDAtty), dW(kLinAttproj), dbias(kLinAttproj), dresidual, ptr<E>(A(kAtty)[a]),
               W(kLinAttproj), N, tag(kLinAttproj));
  sync.issue_retired_shards();
  // fp32: scratch receives d att [B, NH, T, T]; bf16 (flash): D = rowsum(dout * out) [B, NH, T], and the
  // backward reads the forward's output (atty) and log-sum-exp
  AXONN_OP(attention_backward, S(kDQkv), scratch_.tensor(kDAtt).f32(), S(kDAtty), ptr<E>(A(kQkv)[a]),
           ptr<E>(A(kAtty)[a]), A(kAtt)[a].f32(), B, T, Cy_, NHy_);
  AXONN_LINEAR(qkv_, backward, dln, dW(kLinQkv), dbias(kLinQkv), S(kDQkv), ptr<E>(A(kLn1)[a]), W(kLinQkv), N,
               tag(kLinQkv));
  sync.issue_retired_shards();
  layernorm_backward<E>(ctx_, dresidual, G(ln1w_)[l].f32(), G(ln1b_)[l].f32(), ln_sums, dln, residual,
                        ptr<E>(P(ln1w_)[l]), A(kLn1Mean)[a].f32(), A(kLn1Rstd)[a].f32());
  sync.issue_stage(Stage::kBlock, l);  // over Z*data: the block's norms and biases are complete
}

template void Gpt2Block::forward<float>(int, const float*, float*, const CachedChunk*);
template void Gpt2Block::forward<kernels::bf16>(int, const kernels::bf16*, kernels::bf16*, const CachedChunk*);
template void Gpt2Block::backward<float>(int, const float*, float*, bool);
template void Gpt2Block::backward<kernels::bf16>(int, const kernels::bf16*, kernels::bf16*, bool);

}  // namespace axonn::model::detail
