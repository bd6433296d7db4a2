#include "axonn/model/shard_map.hpp"

#include <algorithm>

#include "axonn/core/error.hpp"

namespace axonn::model {

void check_grid_fits(const ModelSpec& spec, const layout::GridShape& g) {
  AXONN_CHECK_ARG(g.gx >= 1 && g.gy >= 1 && g.gz >= 1 && g.gdata >= 1, "grid ", g.str(), " has an empty axis");
  if (auto why = grid_misfit(spec, g.gx, g.gy, g.gz)) throw InvalidArgument(why->message);
}

layout::TpLinearSpec tp_linear_spec(const LinearSpec& l) {
  return {.in = l.in, .out = l.out, .out_parts = l.parts, .transposed = l.transposed};
}

namespace {

const ModelSpec& checked(const ModelSpec& s, const layout::GridShape& g, const layout::GridCoords& at) {
  check_grid_fits(s, g);
  AXONN_CHECK_ARG(at.x >= 0 && at.x < g.gx && at.y >= 0 && at.y < g.gy && at.z >= 0 && at.z < g.gz && at.d >= 0 &&
                      at.d < g.gdata,
                  "coordinates (", at.x, ",", at.y, ",", at.z, ",", at.d, ") are outside the grid ", g.str());
  return s;
}

}  // namespace

ShardMap::ShardMap(const GptConfig& config, const layout::GridShape& shape, const layout::GridCoords& coords)
    : ShardMap(model_spec(config), shape, coords) {}

ShardMap::ShardMap(ModelSpec spec, const layout::GridShape& shape, const layout::GridCoords& coords)
    : spec_(std::move(spec)), shape_(shape), coords_(coords) {
  checked(spec_, shape, coords);
  for (const LinearSpec& l : spec_.linears) layouts_.emplace_back(tp_linear_spec(l), shape, coords, l.name.c_str());
  Cx_ = spec_.config.channels / shape.gx;
  const int gxy = shape.gx * shape.gy, r = coords.y * shape.gx + coords.x;  // rank in X*Y
  const int Vp = spec_.config.padded_vocab_size;
  vocab_begin_ = static_cast<int>(layout::split_begin(Vp, gxy, r));
  vocab_rows_ = static_cast<int>(layout::split_begin(Vp, gxy, r + 1)) - vocab_begin_;
}

const layout::TpLinearLayout& ShardMap::layout_of(int t) const {
  const ParamSpec& p = spec_.params[static_cast<size_t>(t)];
  AXONN_CHECK(p.linear >= 0, "tensor ", p.name, " belongs to no linear layer");
  return layouts_[static_cast<size_t>(p.linear)];
}

int64_t ShardMap::shard_layer_numel(int t) const {
  const ParamSpec& p = spec_.params[static_cast<size_t>(t)];
  switch (p.role) {
    case Role::kVocab: return static_cast<int64_t>(vocab_rows_) * spec_.config.channels;
    case Role::kPosition: return p.shape[0] * Cx_;
    case Role::kNormWeight: case Role::kNormBias: return Cx_;
    case Role::kLinearWeight: return layout_of(t).shard_size;
    case Role::kLinearBias: return layout_of(t).out_local;
  }
  return 0;
}

Shape ShardMap::shard_shape(int t) const {
  const ParamSpec& p = spec_.params[static_cast<size_t>(t)];
  if (p.per_layer) return {p.shape[0], shard_layer_numel(t)};
  switch (p.role) {
    case Role::kVocab: return {vocab_rows_, spec_.config.channels};
    case Role::kPosition: return {p.shape[0], Cx_};
    default: return {shard_layer_numel(t)};
  }
}

int64_t ShardMap::global_index(int t, int64_t j) const {
  const int64_t C = spec_.config.channels;
  const int64_t x = coords_.x;
  switch (spec_.params[static_cast<size_t>(t)].role) {
    case Role::kVocab: return static_cast<int64_t>(vocab_begin_) * C + j;  // rows [begin, begin + rows)
    case Role::kPosition: return (j / Cx_) * C + x * Cx_ + j % Cx_;        // X slice of the channels
    case Role::kNormWeight: case Role::kNormBias: return x * Cx_ + j;
    case Role::kLinearWeight: {
      const layout::TpLinearLayout& l = layout_of(t);
      return l.weight_index(l.shard_offset + j);
    }
    case Role::kLinearBias: return layout_of(t).out_row(static_cast<int>(j));
  }
  return 0;
}

int64_t ShardMap::run_length(int t, int64_t j) const {
  const int64_t n = shard_layer_numel(t);
  int64_t len = 1;
  switch (spec_.params[static_cast<size_t>(t)].role) {
    case Role::kVocab: case Role::kNormWeight: case Role::kNormBias:
      len = n - j;  // one block of rows, or of channels
      break;
    case Role::kPosition: len = Cx_ - j % Cx_; break;  // the X slice of one position's row
    case Role::kLinearWeight: {
      const layout::TpLinearLayout& l = layout_of(t);  // the in_local columns of one block row
      len = l.in_local - (l.shard_offset + j) % l.in_local;
      break;
    }
    case Role::kLinearBias: len = layout_of(t).part_run(static_cast<int>(j)); break;  // the rest of j's part
  }
  return std::max<int64_t>(1, std::min(len, n - j));
}

bool ShardMap::is_replica(int t) const {
  const unsigned axes = spec_.replica_axes(t);
  return ((axes & kReplicatedOverX) && coords_.x != 0) || ((axes & kReplicatedOverY) && coords_.y != 0) ||
         ((axes & kReplicatedOverZ) && coords_.z != 0);
}

}  // namespace axonn::model
