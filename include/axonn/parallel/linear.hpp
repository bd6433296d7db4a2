// parallel/linear.hpp — AxoNN's tensor-parallel linear layer (3D parallel matrix multiply).
//
// y = x W^T + b with the layout of layout.hpp. For a normal layer (transposed = false):
//   forward:  W_blk = all-gather over Z (second Z communicator) of the shards
//             y     = all-reduce over X of x_loc W_blk^T      (+ b, added once)
//   backward: dx    = all-reduce over Y of dy W_blk
//             dW    = reduce-scatter over Z of dy^T x_loc     (each Z rank saw other tokens)
//             db   += column sums of dy                       (dy is the same on every X rank)
// A transposed layer swaps the roles of X and Y. A normal layer's output ([m, out/Gy], replicated
// over X) is exactly a transposed layer's input, so A -> B -> A chains need no re-layout.
// Groups of size 1 cost nothing (the communicator short-circuits them).
//
// Collectives are blocking here; they are written as issue + wait so that they can be overlapped
// with the GEMMs (OAR, ORS, OAG) without changing the layer's shape.
#pragma once

#include <cstdint>

#include "axonn/kernels/ops.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/parallel/layout.hpp"

namespace axonn::parallel {

class TpLinear {
 public:
  TpLinear(const Grid& grid, const TpLinearSpec& spec, const char* name);
  const TpLinearLayout& layout() const { return layout_; }

  // y[m, out_local] = x[m, in_local] W^T + b, complete on every rank (summed over the input group).
  // w_shard [shard_size]; bias [out_local] or null; gathered: workspace of block_size floats.
  void forward(float* y, const float* x, const float* w_shard, const float* bias, float* gathered, int64_t m,
               const kernels::Ops& ops) const;

  // dx[m, in_local] (zero on entry) receives the complete input gradient; dw_shard [shard_size]
  // += this rank's piece of dW summed over Z; dbias [out_local] += column sums of dy (dbias may be
  // null). gathered, dw_block: workspaces of block_size floats.
  void backward(float* dx, float* dw_shard, float* dbias, const float* dy, const float* x, const float* w_shard,
                float* gathered, float* dw_block, int64_t m, const kernels::Ops& ops) const;

 private:
  // The full weight block: the shard itself when Gz = 1, else all-gathered into `gathered`.
  const float* gather_weight(const float* w_shard, float* gathered) const;

  TpLinearLayout layout_;
  comm::Communicator& in_group_;   // forward all-reduce: X (normal) or Y (transposed)
  comm::Communicator& out_group_;  // backward all-reduce: Y (normal) or X (transposed)
  comm::Communicator& z_;          // weight-gradient reduce-scatter
  comm::Communicator& z_gather_;   // weight all-gather (the second Z communicator)
};

}  // namespace axonn::parallel
