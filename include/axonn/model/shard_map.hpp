// model/shard_map.hpp — which elements of GPT-2's full tensors a rank of a grid holds, without MPI.
//
// The shards of model::Gpt are a pure function of (model config, grid shape, rank coordinates): the
// layouts of docs/parallelism.md, computed with parallel::TpLinearLayout for the four linear layers.
// ShardMap is that function on its own, so that code with no Grid (checkpoint resharding, `axonn
// convert`) can say for any grid where each element of a rank's shard lives in the full tensor.
//
// Gpt builds its parameter shards from the ShardMap of its grid (Gpt::shard_map(), Gpt::global_index):
// one definition of the layout.
//
//   model::ShardMap map(cfg, {2, 1, 2, 1}, {.x = 1, .y = 0, .z = 1});
//   for (int64_t j = 0; j < map.shard_layer_numel(Param::kQkvw); j++)
//     shard[j] = full_layer[map.global_index(Param::kQkvw, j)];
#pragma once

#include <cstdint>

#include "axonn/model/gpt.hpp"
#include "axonn/parallel/layout.hpp"
#include "axonn/tensor/shape.hpp"

namespace axonn::model {

// The grid axes over which a tensor's shard is replicated (bit mask), besides data, over which
// every tensor is.
enum ReplicaAxis : unsigned { kReplicatedOverX = 1u, kReplicatedOverY = 2u, kReplicatedOverZ = 4u };
// Axes along which ranks hold identical shards of p: the token embedding is split over X*Y (Z
// replicates it), the position embedding and LayerNorms over X (Y and Z replicate them), linear
// weights over X, Y and Z (no replica), a normal layer's bias over Y (X, Z replicate it), a
// transposed layer's over X (Y, Z replicate it).
unsigned replica_axes(Param p);

// The tensor-parallel linear layer behind a weight or bias tensor (qkv, attproj, fc, fcproj), as
// Gpt builds it; InvalidArgument for tensors that are not part of a linear layer.
parallel::TpLinearSpec linear_spec(const GptConfig& c, Param p);

class ShardMap {
 public:
  // Checks that the grid divides the model (InvalidArgument naming the size and the axis, as Gpt
  // does) and that the coordinates lie on the grid.
  ShardMap(const GptConfig& config, const parallel::GridShape& shape, const parallel::GridCoords& coords);

  const GptConfig& config() const { return config_; }
  const parallel::GridShape& shape() const { return shape_; }
  const parallel::GridCoords& coords() const { return coords_; }

  // Shape of this rank's shard of p, stacked over layers where p is per-layer: the shape of slot p
  // of Gpt::params() on that rank.
  Shape shard_shape(Param p) const;
  // Elements of one layer's shard (the whole shard if p is not per-layer).
  int64_t shard_layer_numel(Param p) const;
  // Elements of one layer's slice of the full tensor (the whole tensor if p is not per-layer).
  int64_t full_layer_numel(Param p) const;
  // Index in the full tensor p (within one layer's slice for per-layer tensors) of element j of
  // this rank's shard of one layer, 0 <= j < shard_layer_numel(p).
  int64_t global_index(Param p, int64_t j) const;
  // How many elements from j on map to consecutive full-tensor indices (global_index(p, j + k) ==
  // global_index(p, j) + k for k < run_length(p, j)), at least 1: shards are runs of rows or of a
  // row's columns, so copying them run by run costs one global_index per run.
  int64_t run_length(Param p, int64_t j) const;
  // True if this rank's shard of p equals that of the rank with coordinate 0 on every replica axis
  // of p; false for that canonical rank itself and for tensors it alone holds.
  bool is_replica(Param p) const;

  // First vocabulary row and rows of the token embedding on this rank.
  int vocab_begin() const { return vocab_begin_; }
  int vocab_rows() const { return vocab_rows_; }

 private:
  const parallel::TpLinearLayout& layout(Param p) const;

  GptConfig config_;
  parallel::GridShape shape_;
  parallel::GridCoords coords_;
  int Cx_ = 0, vocab_begin_ = 0, vocab_rows_ = 0;
  parallel::TpLinearLayout qkv_, attproj_, fc_, fcproj_;
};

}  // namespace axonn::model
