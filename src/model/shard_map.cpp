#include "axonn/model/shard_map.hpp"

#include <algorithm>

#include "axonn/core/error.hpp"

namespace axonn::model {

namespace {

// The grid divides the model (the same conditions and messages as Gpt's constructor) and the
// coordinates are on it.
const GptConfig& checked(const GptConfig& c, const parallel::GridShape& g, const parallel::GridCoords& at) {
  c.validate();
  AXONN_CHECK_ARG(g.gx >= 1 && g.gy >= 1 && g.gz >= 1 && g.gdata >= 1, "grid ", g.str(), " has an empty axis");
  AXONN_CHECK_ARG(at.x >= 0 && at.x < g.gx && at.y >= 0 && at.y < g.gy && at.z >= 0 && at.z < g.gz && at.d >= 0 &&
                      at.d < g.gdata,
                  "coordinates (", at.x, ",", at.y, ",", at.z, ",", at.d, ") are outside the grid ", g.str());
  AXONN_CHECK_ARG(c.channels % g.gx == 0, "channels ", c.channels, " are not divisible by Gx=", g.gx,
                  "; the hidden size is split over X: choose a Gx that divides ", c.channels);
  AXONN_CHECK_ARG(c.num_heads % g.gy == 0, "heads ", c.num_heads, " are not divisible by Gy=", g.gy,
                  "; attention heads are split over Y: choose a Gy that divides ", c.num_heads);
  AXONN_CHECK_ARG(c.channels % g.gy == 0, "channels ", c.channels, " are not divisible by Gy=", g.gy,
                  "; attention and MLP outputs are split over Y: choose a Gy that divides ", c.channels);
  return c;
}

}  // namespace

unsigned replica_axes(Param p) {
  switch (p) {
    case Param::kWte: return kReplicatedOverZ;
    case Param::kWpe: case Param::kLn1w: case Param::kLn1b: case Param::kLn2w: case Param::kLn2b:
    case Param::kLnfw: case Param::kLnfb: return kReplicatedOverY | kReplicatedOverZ;
    case Param::kQkvw: case Param::kAttprojw: case Param::kFcw: case Param::kFcprojw: return 0;
    case Param::kQkvb: case Param::kFcb: return kReplicatedOverX | kReplicatedOverZ;           // out over Y
    case Param::kAttprojb: case Param::kFcprojb: return kReplicatedOverY | kReplicatedOverZ;   // out over X
  }
  return 0;
}

parallel::TpLinearSpec linear_spec(const GptConfig& c, Param p) {
  const int C = c.channels;
  switch (p) {
    case Param::kQkvw: case Param::kQkvb: return {.in = C, .out = 3 * C, .out_parts = 3};
    case Param::kAttprojw: case Param::kAttprojb: return {.in = C, .out = C, .transposed = true};
    case Param::kFcw: case Param::kFcb: return {.in = C, .out = 4 * C};
    case Param::kFcprojw: case Param::kFcprojb: return {.in = 4 * C, .out = C, .transposed = true};
    default: break;
  }
  throw InvalidArgument(std::string("tensor ") + param_name(p) + " belongs to no linear layer");
}

ShardMap::ShardMap(const GptConfig& config, const parallel::GridShape& shape, const parallel::GridCoords& coords)
    : config_(checked(config, shape, coords)), shape_(shape), coords_(coords),
      qkv_(linear_spec(config, Param::kQkvw), shape, coords, "qkv"),
      attproj_(linear_spec(config, Param::kAttprojw), shape, coords, "attproj"),
      fc_(linear_spec(config, Param::kFcw), shape, coords, "fc"),
      fcproj_(linear_spec(config, Param::kFcprojw), shape, coords, "fcproj") {
  Cx_ = config_.channels / shape.gx;
  const int gxy = shape.gx * shape.gy, r = coords.y * shape.gx + coords.x;  // rank in X*Y
  const int Vp = config_.padded_vocab_size;
  vocab_begin_ = static_cast<int>(parallel::split_begin(Vp, gxy, r));
  vocab_rows_ = static_cast<int>(parallel::split_begin(Vp, gxy, r + 1)) - vocab_begin_;
}

const parallel::TpLinearLayout& ShardMap::layout(Param p) const {
  switch (p) {
    case Param::kQkvw: case Param::kQkvb: return qkv_;
    case Param::kAttprojw: case Param::kAttprojb: return attproj_;
    case Param::kFcw: case Param::kFcb: return fc_;
    case Param::kFcprojw: case Param::kFcprojb: return fcproj_;
    default: break;
  }
  throw InvalidArgument(std::string("tensor ") + param_name(p) + " belongs to no linear layer");
}

int64_t ShardMap::shard_layer_numel(Param p) const {
  switch (p) {
    case Param::kWte: return static_cast<int64_t>(vocab_rows_) * config_.channels;
    case Param::kWpe: return static_cast<int64_t>(config_.max_seq_len) * Cx_;
    case Param::kLn1w: case Param::kLn1b: case Param::kLn2w: case Param::kLn2b:
    case Param::kLnfw: case Param::kLnfb: return Cx_;
    case Param::kQkvw: case Param::kAttprojw: case Param::kFcw: case Param::kFcprojw: return layout(p).shard_size;
    case Param::kQkvb: case Param::kAttprojb: case Param::kFcb: case Param::kFcprojb: return layout(p).out_local;
  }
  return 0;
}

Shape ShardMap::shard_shape(Param p) const {
  const int64_t L = config_.num_layers;
  switch (p) {
    case Param::kWte: return {vocab_rows_, config_.channels};
    case Param::kWpe: return {config_.max_seq_len, Cx_};
    case Param::kLnfw: case Param::kLnfb: return {Cx_};
    default: return {L, shard_layer_numel(p)};
  }
}

int64_t ShardMap::full_layer_numel(Param p) const {
  Shape s = param_shape(config_, p);
  return param_is_per_layer(p) ? s.numel() / s[0] : s.numel();
}

int64_t ShardMap::global_index(Param p, int64_t j) const {
  const int64_t C = config_.channels;
  const int64_t x = coords_.x;
  switch (p) {
    case Param::kWte: return static_cast<int64_t>(vocab_begin_) * C + j;  // rows [begin, begin + rows)
    case Param::kWpe: return (j / Cx_) * C + x * Cx_ + j % Cx_;            // X slice of the channels
    case Param::kLn1w: case Param::kLn1b: case Param::kLn2w: case Param::kLn2b:
    case Param::kLnfw: case Param::kLnfb: return x * Cx_ + j;
    case Param::kQkvw: case Param::kAttprojw: case Param::kFcw: case Param::kFcprojw: {
      const parallel::TpLinearLayout& l = layout(p);
      return l.weight_index(l.shard_offset + j);
    }
    case Param::kQkvb: case Param::kAttprojb: case Param::kFcb: case Param::kFcprojb:
      return layout(p).out_row(static_cast<int>(j));
  }
  return 0;
}

int64_t ShardMap::run_length(Param p, int64_t j) const {
  const int64_t n = shard_layer_numel(p);
  int64_t len = 1;
  switch (p) {
    case Param::kWte: case Param::kLn1w: case Param::kLn1b: case Param::kLn2w: case Param::kLn2b:
    case Param::kLnfw: case Param::kLnfb: len = n - j; break;  // one block of rows, or of channels
    case Param::kWpe: len = Cx_ - j % Cx_; break;              // the X slice of one position's row
    case Param::kQkvw: case Param::kAttprojw: case Param::kFcw: case Param::kFcprojw: {
      const parallel::TpLinearLayout& l = layout(p);  // the in_local columns of one block row
      len = l.in_local - (l.shard_offset + j) % l.in_local;
      break;
    }
    case Param::kQkvb: case Param::kAttprojb: case Param::kFcb: case Param::kFcprojb: {
      const parallel::TpLinearLayout& l = layout(p);  // the rows of one part in the block
      const int64_t part_rows = l.out_local / l.spec.out_parts;
      len = part_rows - j % part_rows;
      break;
    }
  }
  return std::max<int64_t>(1, std::min(len, n - j));
}

bool ShardMap::is_replica(Param p) const {
  const unsigned axes = replica_axes(p);
  return ((axes & kReplicatedOverX) && coords_.x != 0) || ((axes & kReplicatedOverY) && coords_.y != 0) ||
         ((axes & kReplicatedOverZ) && coords_.z != 0);
}

}  // namespace axonn::model
