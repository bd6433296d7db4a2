// model/grad_sync.hpp (private to the model) — the gradient sums over the ranks that saw other tokens
// (spec §3.5), derived from the model's tensor list (model/spec.hpp):
//   - a linear's weight shard was summed over Z by its reduce-scatter: it is summed over data, in
//     place, when that reduce-scatter retires;
//   - every other tensor saw only this Z rank's tokens: it is summed over Z*data. The norms and biases
//     completed at one stage (a block's backward, the LM head's) go in one packed bucket; each
//     vocabulary or position embedding is a bucket of its own, summed in place.
// The buckets and their order per communicator are the same whether they are issued during the step's
// last backward (DP overlap, as each stage completes) or by sync() afterwards, so the sums are the
// same bits:
//   Z*data: head stage | block L-1 | ... | block 0 | embedding stage
//   data:   weight shards in backward order (block L-1's linears last to first, ..., block 0's)
#pragma once

#include <vector>

#include "axonn/model/spec.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/parallel/overlap.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::model::detail {

class GradientSync {
 public:
  GradientSync(const ModelSpec& spec, const parallel::Grid& grid, parallel::Timeline& tl, const MemoryOps& memory,
               const Arena& grads, parallel::ReduceScatterQueue& reduce_scatters);

  // The reduce-scatter queue's tag of the weight shard of linear k, layer l; odd in the last micro-batch.
  int shard_tag(int k, int l, bool last) const {
    return 2 * (l * static_cast<int>(spec_.linears.size()) + k) + (last ? 1 : 0);
  }
  // DP overlap: this backward (the step's last) issues the sums as the gradients complete.
  void arm(bool on) { armed_ = on; }
  bool armed() const { return armed_; }
  // After a linear's backward: the weight shards whose reduce-scatter retired, summed over data (when
  // armed and they are final).
  void issue_retired_shards();
  // The Z*data buckets of a stage (of block `layer` for Stage::kBlock), when armed.
  void issue_stage(Stage stage, int layer = -1);
  // Completes the reduce-scatters still in flight and every sum (issuing those the backward did not).
  void sync(int layers);
  // Drops the bookkeeping of retired reduce-scatters (zero_grad); refuses while sums are in flight.
  void reset();
  bool pending() const { return all_reduce_.pending(); }

 private:
  struct Bucket {
    std::vector<int> tensors;  // indices in spec.params, packed when more than one
  };
  void issue(const Bucket& b, int layer);
  void issue_shard(int k, int l);
  const std::vector<Bucket>& buckets(Stage stage) const { return buckets_[static_cast<int>(stage)]; }

  const ModelSpec& spec_;
  const parallel::Grid& grid_;
  const Arena& grads_;
  parallel::ReduceScatterQueue& rs_;
  parallel::GradAllReduce all_reduce_;
  std::vector<Bucket> buckets_[3];  // per Stage, in issue order
  bool armed_ = false;
};

}  // namespace axonn::model::detail
