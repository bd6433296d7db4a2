#include "grad_sync.hpp"

namespace axonn::model::detail {

GradientSync::GradientSync(const ModelSpec& spec, const parallel::Grid& grid, parallel::Timeline& tl,
                           const MemoryOps& memory, const Arena& grads, parallel::ReduceScatterQueue& reduce_scatters)
    : spec_(spec), grid_(grid), grads_(grads), rs_(reduce_scatters), all_reduce_(tl, memory) {
  // the buckets of each stage, as the model's description states them
  for (Stage stage : {Stage::kBlock, Stage::kHead, Stage::kEmbedding})
    for (std::vector<int>& tensors : zdata_grad_buckets(spec, stage))
      buckets_[static_cast<int>(stage)].push_back(Bucket{std::move(tensors)});
}

void GradientSync::issue(const Bucket& b, int layer) {
  std::vector<parallel::GradAllReduce::Part> parts;
  for (int i : b.tensors) {
    Tensor g = grads_.tensor(static_cast<size_t>(i));
    if (spec_.params[static_cast<size_t>(i)].per_layer) g = g[layer];
    parts.push_back({g.f32(), g.numel()});
  }
  all_reduce_.issue(grid_.zdata(), parts);  // over Z*data: one packed bucket, or one tensor in place
}

void GradientSync::issue_shard(int k, int l) {
  Tensor g = grads_.tensor(static_cast<size_t>(spec_.linears[static_cast<size_t>(k)].weight))[l];
  all_reduce_.issue(grid_.data(), {{g.f32(), g.numel()}});  // over data
}

void GradientSync::issue_retired_shards() {
  // the retired reduce-scatters, oldest first; only the last micro-batch's make a shard final
  const int K = static_cast<int>(spec_.linears.size());
  for (int tag : rs_.take_retired()) {
    if (!armed_ || tag % 2 == 0) continue;
    const int id = tag / 2;
    issue_shard(id % K, id / K);
  }
}

void GradientSync::issue_stage(Stage stage, int layer) {
  if (!armed_) return;
  for (const Bucket& b : buckets(stage)) issue(b, layer);
}

void GradientSync::sync(int layers) {
  // the weight-gradient reduce-scatters still in flight (ORS): accumulated into the shards first,
  // before anything reads or sums the gradients
  rs_.drain();
  if (armed_) {
    // DP overlap: everything else was issued during the backward; the shards just completed now
    issue_retired_shards();
  } else {
    // no DP overlap: the same buckets in the same order, each completed before the next is packed
    (void)rs_.take_retired();
    auto each = [&](Stage stage, int layer) {
      for (const Bucket& b : buckets(stage)) {
        issue(b, layer);
        all_reduce_.wait_all();
      }
    };
    each(Stage::kHead, -1);
    for (int l = layers - 1; l >= 0; l--) {
      for (int k = static_cast<int>(spec_.linears.size()) - 1; k >= 0; k--) {
        issue_shard(k, l);
        all_reduce_.wait_all();
      }
      each(Stage::kBlock, l);
    }
    for (const Bucket& b : buckets(Stage::kEmbedding)) issue(b, -1);
  }
  all_reduce_.wait_all();
  armed_ = false;
}

void GradientSync::reset() {
  // A reduce-scatter retired after the zeroing would add the old step's gradient to the new one.
  rs_.drain();
  (void)rs_.take_retired();
  AXONN_CHECK(!all_reduce_.pending(), "zero_grad() while gradient sums are in flight: call sync_gradients() first");
  armed_ = false;
}

}  // namespace axonn::model::detail
