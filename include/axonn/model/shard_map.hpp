// model/shard_map.hpp — which elements of a model's full tensors a rank of a grid holds, without MPI.
//
// The shards of model::Gpt are a pure function of (model spec, grid shape, rank coordinates): the
// layouts of docs/parallelism.md for each tensor's role (model/spec.hpp), with
// layout::TpLinearLayout for the linear layers. ShardMap is that function on its own, so that code
// with no Grid (checkpoint resharding, `axonn convert`) can say for any grid where each element of a
// rank's shard lives in the full tensor.
//
// Gpt builds its parameter shards from the ShardMap of its grid (Gpt::shard_map(), Gpt::global_index):
// one definition of the layout. Tensors are named by their index in ModelSpec::params (for GPT-2,
// model::Param's values).
//
//   model::ShardMap map(cfg, {2, 1, 2, 1}, {.x = 1, .y = 0, .z = 1});
//   const int qkvw = map.spec().index("qkvw");
//   for (int64_t j = 0; j < map.shard_layer_numel(qkvw); j++)
//     shard[j] = full_layer[map.global_index(qkvw, j)];
#pragma once

#include <cstdint>
#include <vector>

#include "axonn/model/spec.hpp"
#include "axonn/layout/tp_linear.hpp"
#include "axonn/tensor/shape.hpp"

namespace axonn::model {

// Throws InvalidArgument unless the grid divides the model: hidden size over X; heads (and, for
// grouped-query attention, the KV heads, which Y splits with their query heads), the MLP's and the
// attention's features over Y (the message lists the Gy values that work); each weight block over Z.
void check_grid_fits(const ModelSpec& spec, const layout::GridShape& shape);

// The TpLinearSpec of a block's linear.
layout::TpLinearSpec tp_linear_spec(const LinearSpec& l);

class ShardMap {
 public:
  // Checks that the grid divides the model (check_grid_fits) and that the coordinates lie on the grid.
  ShardMap(const GptConfig& config, const layout::GridShape& shape, const layout::GridCoords& coords);
  ShardMap(ModelSpec spec, const layout::GridShape& shape, const layout::GridCoords& coords);

  const ModelSpec& spec() const { return spec_; }
  const GptConfig& config() const { return spec_.config; }
  const layout::GridShape& shape() const { return shape_; }
  const layout::GridCoords& coords() const { return coords_; }
  size_t size() const { return spec_.params.size(); }

  // Shape of this rank's shard of tensor t, stacked over layers where t is per-layer: the shape of
  // slot t of Gpt::params() on that rank.
  Shape shard_shape(int t) const;
  // Elements of one layer's shard (the whole shard if t is not per-layer).
  int64_t shard_layer_numel(int t) const;
  // Elements of one layer's slice of the full tensor (the whole tensor if t is not per-layer).
  int64_t full_layer_numel(int t) const { return spec_.params[static_cast<size_t>(t)].layer_numel(); }
  // Index in the full tensor t (within one layer's slice for per-layer tensors) of element j of
  // this rank's shard of one layer, 0 <= j < shard_layer_numel(t).
  int64_t global_index(int t, int64_t j) const;
  // How many elements from j on map to consecutive full-tensor indices (global_index(t, j + k) ==
  // global_index(t, j) + k for k < run_length(t, j)), at least 1: shards are runs of rows or of a
  // row's columns, so copying them run by run costs one global_index per run.
  int64_t run_length(int t, int64_t j) const;
  // True if this rank's shard of t equals that of the rank with coordinate 0 on every replica axis
  // of t; false for that canonical rank itself and for tensors it alone holds.
  bool is_replica(int t) const;

  // The layout of the block's linear k (ModelSpec::linears) on this rank.
  const layout::TpLinearLayout& linear_layout(int k) const { return layouts_[static_cast<size_t>(k)]; }
  // First vocabulary row and rows of the vocabulary tensors on this rank.
  int vocab_begin() const { return vocab_begin_; }
  int vocab_rows() const { return vocab_rows_; }

 private:
  const layout::TpLinearLayout& layout_of(int t) const;

  ModelSpec spec_;
  layout::GridShape shape_;
  layout::GridCoords coords_;
  int Cx_ = 0, vocab_begin_ = 0, vocab_rows_ = 0;
  std::vector<layout::TpLinearLayout> layouts_;
};

}  // namespace axonn::model
