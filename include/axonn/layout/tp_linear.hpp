// layout/tp_linear.hpp — which part of each full tensor a rank of the 4D grid holds (pure index
// arithmetic, no communication; spec/axonn.md §3.2–3.4).
//
// A tensor-parallel linear layer y = x W^T + b, W [out, in], is split three ways:
//   normal ("A"):     in-features over X, out-features over Y;
//   transposed ("B"): in-features over Y, out-features over X;
// and the (out_local x in_local) block a rank uses is stored flat, cut into Gz equal contiguous
// pieces: rank z keeps piece z (ZeRO-3 over the depth axis). The bias follows the output block.
// A layer whose output is several stacked matrices (QKV: q|k|v; SwiGLU's gate|up) splits each part
// separately, so an output block holds the same heads of q, k and v (with grouped-query attention,
// the k and v parts are smaller: the block holds the KV heads of its query heads).
//
//   TpLinearLayout qkv({.in = C, .out = 3 * C, .out_parts = {C, C, C}}, shape, coords);
//   for (int64_t j = 0; j < qkv.shard_size; j++) shard[j] = full[qkv.weight_index(qkv.shard_offset + j)];
#pragma once

#include <cstdint>
#include <vector>

#include "axonn/layout/grid.hpp"

namespace axonn::layout {

struct TpLinearSpec {
  int in = 0;                // input features (k)
  int out = 0;               // output features (n)
  std::vector<int> out_parts = {};  // rows of each stacked matrix of the output (sum: out), each split alone;
                               // empty: one matrix
  bool transposed = false;   // false: in over X, out over Y; true: in over Y, out over X

  // The parts' rows (out_parts, or {out}).
  std::vector<int> parts() const { return out_parts.empty() ? std::vector<int>{out} : out_parts; }
};

struct TpLinearLayout {
  // Checks divisibility (InvalidArgument naming the layer and what to change).
  TpLinearLayout(const TpLinearSpec& spec, const GridShape& shape, const GridCoords& coords, const char* name = "linear");

  TpLinearSpec spec;
  int in_local = 0;          // columns of x this rank holds
  int out_local = 0;         // columns of y it produces (and bias entries it holds)
  int in_block = 0;          // index of this rank's block along in (x, or y when transposed)
  int out_block = 0;         // ... along out (y, or x when transposed)
  int64_t block_size = 0;    // out_local * in_local: the gathered weight block
  int64_t shard_size = 0;    // block_size / Gz: what this rank stores
  int64_t shard_offset = 0;  // z * shard_size: where its piece starts in the flat block
  std::vector<int> part_rows;  // rows of each part in this rank's block (part p's rows / G_out)

  // Full output row of local output row r (0 <= r < out_local).
  int64_t out_row(int r) const;
  // Local output rows from r on that are consecutive full rows (the rest of r's part in the block).
  int part_run(int r) const;
  // Index in the full row-major W [out, in] of element e of the flat block (0 <= e < block_size).
  int64_t weight_index(int64_t e) const { return out_row(static_cast<int>(e / in_local)) * spec.in + in_block * in_local + e % in_local; }
};

// Balanced split of n items over `parts`: part p holds [begin(p), begin(p+1)). Sizes differ by at
// most one, so any number of parts works (the vocabulary needs no extra padding).
inline int64_t split_begin(int64_t n, int parts, int p) { return n * p / parts; }

}  // namespace axonn::layout
