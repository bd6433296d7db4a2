// The collectives of one step of this project's model, from its tensor list (planner/step_collectives.hpp).
#include "axonn/planner/step_collectives.hpp"

#include "axonn/model/shard_map.hpp"
#include "cost_internal.hpp"

namespace axonn::planner {

using internal::d;
using internal::group_size;

namespace {

// The weight all-gathers over Z of linear k (of K) in one step: WeightGather (parallel/overlap.hpp)
// takes the forward's uses (0..K-1 of each block in order), the backward's (K-1..0 of each block in
// reverse, a recomputed block's 0..K-1 first) and holds the last two gathered blocks, which are not
// gathered again: the backward's first two (the last block's K-1 and K-2, the forward's last), after
// a recompute the block's K-1 and K-2 again, and the next micro-batch's forward's first two (block 0's
// 0 and 1, the backward's last). With the cache every block is gathered once per step.
double weight_gathers(int k, int K, long L, long M, bool recompute, bool cache) {
  if (cache) return d(L);
  const bool late = k >= K - 2;  // held at the start of each block's backward (of its last two uses)
  const bool early = k <= 1;     // held at the start of a later micro-batch's forward
  const double forward = d(L) + d(M - 1) * d(L - (early ? 1 : 0));  // the first micro-batch's, the later ones'
  const double backward = recompute ? (late ? 0.0 : d(L)) + d(L - 1) : d(L) - (late ? 1.0 : 0.0);
  return forward + d(M) * backward;
}

}  // namespace

std::vector<double> local_elements(const model::ModelSpec& spec, const GridShape& g) {
  // the last rank of the replica holds the largest part of every split (layout::split_begin's parts
  // grow towards the end); every other split is even
  const model::ShardMap shards(spec, g, {g.gx - 1, g.gy - 1, g.gz - 1, 0});
  std::vector<double> out;
  for (int t = 0; t < static_cast<int>(spec.params.size()); t++) out.push_back(d(shards.shard_shape(t).numel()));
  return out;
}

std::vector<ModelCollective> model_collectives(const model::ModelSpec& spec, const GridShape& g, const StepShape& s) {
  const model::GptConfig& c = spec.config;
  const double N = s.tokens, M = d(s.micro_batches), L = d(c.num_layers), C = d(c.channels);
  const double b = s.activation_bytes, f32 = 4.0;
  // block forward passes per micro-batch: every block, and again all but the last under recompute
  const double fwd_blocks = L + (s.recompute ? L - 1 : 0.0), bwd_blocks = L;
  std::vector<ModelCollective> out;
  auto add = [&](std::string what, CommGroup grp, CollectiveKind kind, double bytes, double calls, bool block,
                 Hiding hiding = Hiding::kNone, int linear = -1) {
    if (group_size(grp, g) <= 1 || calls <= 0) return;
    out.push_back({std::move(what), grp, kind, bytes, calls, block, hiding, linear});
  };
  const bool layernorm = spec.norm == model::Norm::kLayerNorm;
  // A norm's statistics over X: LayerNorm's mean and variance (N each) forward and its two row sums
  // (2N) backward; RMSNorm's sum of squares (N) forward and its one row sum (N) backward.
  auto norm = [&](const std::string& name, double fwd_passes, double bwd_passes, bool block) {
    add(name + " fwd statistics all-reduce", CommGroup::kX, CollectiveKind::kAllReduce, N * f32,
        (layernorm ? 2 : 1) * fwd_passes * M, block);
    add(name + " bwd statistics all-reduce", CommGroup::kX, CollectiveKind::kAllReduce, (layernorm ? 2 : 1) * N * f32,
        bwd_passes * M, block);
  };

  // entry: the vocabulary-parallel embedding, completed over X*Y
  add("embedding fwd all-reduce", CommGroup::kXY, CollectiveKind::kAllReduce, N * C * b, M, false);
  // the blocks
  for (const model::ParamSpec& p : spec.params)
    if (p.per_layer && p.role == model::Role::kNormWeight) norm(p.name, fwd_blocks, bwd_blocks, true);
  const int K = static_cast<int>(spec.linears.size());
  for (int k = 0; k < K; k++) {
    const model::LinearSpec& l = spec.linears[static_cast<size_t>(k)];
    const CommGroup in_grp = l.transposed ? CommGroup::kY : CommGroup::kX;
    const CommGroup out_grp = l.transposed ? CommGroup::kX : CommGroup::kY;
    const double in_local = d(l.in) / d(group_size(in_grp, g)), out_local = d(l.out) / d(group_size(out_grp, g));
    const double block = in_local * out_local;  // the gathered weight block
    add(l.name + " fwd all-reduce", in_grp, CollectiveKind::kAllReduce, N * out_local * b, fwd_blocks * M, true,
        Hiding::kNone, k);
    add(l.name + " bwd all-reduce (dX)", out_grp, CollectiveKind::kAllReduce, N * in_local * b, bwd_blocks * M, true,
        Hiding::kUnderDataGrad, k);
    add(l.name + " weight-grad reduce-scatter", CommGroup::kZ, CollectiveKind::kReduceScatter, block * f32,
        bwd_blocks * M, true, Hiding::kUnderLayer, k);
    add(l.name + " weight all-gather", CommGroup::kZ, CollectiveKind::kAllGather, block * b,
        weight_gathers(k, K, c.num_layers, s.micro_batches, s.recompute, s.cache_gathered_weights), true,
        Hiding::kUnderLayer, k);
    add(l.name + " shard grad all-reduce over data", CommGroup::kData, CollectiveKind::kAllReduce,
        block / d(g.gz) * f32, L, true, Hiding::kUnderBackward, k);
  }
  // exit: the final norm, the LM head (its input gathered over X, its rows' partial d input summed over
  // X*Y), the vocabulary-parallel cross-entropy, the loss
  norm(spec.params[static_cast<size_t>(spec.final_norm)].name, 1, 1, false);
  add("LM head input all-gather", CommGroup::kX, CollectiveKind::kAllGather, N * C * b, M, false);
  add("cross-entropy row-max all-reduce", CommGroup::kXY, CollectiveKind::kAllReduce, N * f32, M, false);
  add("cross-entropy sum/target all-reduce", CommGroup::kXY, CollectiveKind::kAllReduce, 2 * N * f32, M, false);
  add("loss all-reduce over Z", CommGroup::kZ, CollectiveKind::kAllReduce, f32, M, false);
  add("loss all-reduce over data", CommGroup::kData, CollectiveKind::kAllReduce, f32, M, false);
  add("LM head bwd all-reduce (d lnf)", CommGroup::kXY, CollectiveKind::kAllReduce, N * C * b, M, false);
  add("embedding bwd all-gather", CommGroup::kX, CollectiveKind::kAllGather, N * C * b, M, false);

  // the gradient sums over Z*data, in the model's buckets (model::zdata_grad_buckets): per stage one
  // packed bucket of its norms and biases, each embedding in place; the local elements of each tensor
  // as ShardMap gives them. With --overlap dp they run in the last micro-batch's backward, each once
  // its gradient is final.
  const std::vector<double> local = local_elements(spec, g);
  for (model::Stage stage : {model::Stage::kHead, model::Stage::kBlock, model::Stage::kEmbedding}) {
    const bool block = stage == model::Stage::kBlock;
    for (const std::vector<int>& bucket : model::zdata_grad_buckets(spec, stage)) {
      double n = 0;  // one layer's elements
      for (int t : bucket) n += local[static_cast<size_t>(t)] / (spec.params[static_cast<size_t>(t)].per_layer ? L : 1.0);
      const model::Role role = spec.params[static_cast<size_t>(bucket[0])].role;
      if (role == model::Role::kVocab || role == model::Role::kPosition)  // an embedding, alone
        add(spec.params[static_cast<size_t>(bucket[0])].name + " grad all-reduce over Z*data", CommGroup::kZData,
            CollectiveKind::kAllReduce, n * f32, 1, false, Hiding::kUnderBackward);
      else
        add(std::string(block ? "block" : "head") + " norms/biases grad all-reduce over Z*data", CommGroup::kZData,
            CollectiveKind::kAllReduce, n * f32, block ? L : 1, block, Hiding::kUnderBackward);
    }
  }
  add("gradient-norm all-reduce", CommGroup::kXYZ, CollectiveKind::kAllReduce, 2 * f32, 1, false);
  return out;
}

}  // namespace axonn::planner
