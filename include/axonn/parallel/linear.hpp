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
// The weight all-gather is the caller's (WeightGather, which prefetches it under OAG): forward and
// backward take the gathered block. The backward's collectives overlap as LinearRun says: OAR (the
// dx all-reduce runs during the dW GEMM) and ORS (the dW reduce-scatter is queued, not waited).
#pragma once

#include <cstdint>
#include <type_traits>

#include "axonn/core/error.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/parallel/layout.hpp"
#include "axonn/parallel/overlap.hpp"
#include "axonn/parallel/timeline.hpp"

namespace axonn::parallel {

// How one call of a layer runs: kernels, where its time and collectives are recorded, and which
// of its collectives overlap.
struct LinearRun {
  const kernels::Ops& ops;
  Timeline& tl;
  // The dW reduce-scatters over Z (completed in the layer unless the queue overlaps: ORS).
  ReduceScatterQueue* reduce_scatters = nullptr;
  bool overlap_all_reduce = false;  // OAR
  const kernels::OpsBf16* ops_bf16 = nullptr;  // the kernels of the bf16 calls (mixed precision)

  // The kernels for activations of type T (float: ops; bf16: ops_bf16).
  template <class T>
  const typename kernels::Precision<T>::Table& table() const {
    if constexpr (std::is_same_v<T, float>) {
      return ops;
    } else {
      AXONN_CHECK(ops_bf16, "a bf16 linear call without bf16 kernels in its LinearRun");
      return *ops_bf16;
    }
  }
};

class TpLinear {
 public:
  TpLinear(const Grid& grid, const TpLinearSpec& spec, const char* name);
  const TpLinearLayout& layout() const { return layout_; }
  const char* name() const { return name_; }

  // The full weight block [block_size]: the shard itself when Gz = 1, else all-gathered now (blocking)
  // over the second Z communicator into `gathered` [block_size]. For callers without a WeightGather.
  const float* gather_weight(const float* w_shard, float* gathered, Timeline& tl) const;

  // T is the activations' and weights' type: float, or kernels::bf16 in mixed precision (then y and dx
  // are all-reduced in bf16, as AxoNN does, and dW stays fp32).
  //
  // y[m, out_local] = x[m, in_local] W^T + b, complete on every rank (summed over the input group).
  // w: the gathered block [block_size]; bias [out_local] or null.
  template <class T>
  void forward(T* y, const std::type_identity_t<T>* x, const std::type_identity_t<T>* w,
               const std::type_identity_t<T>* bias, int64_t m, const LinearRun& run) const;

  // dx[m, in_local] (zero on entry) receives the complete input gradient; dw_shard [shard_size] (fp32)
  // += this rank's piece of dW summed over Z, at once (Gz = 1), or when run.reduce_scatters retires
  // it (needed when Gz > 1; `tag` names the shard there); dbias [out_local] (fp32) += column sums of dy
  // (dbias may be null). w: the gathered block.
  template <class T>
  void backward(T* dx, float* dw_shard, float* dbias, const std::type_identity_t<T>* dy,
                const std::type_identity_t<T>* x, const std::type_identity_t<T>* w, int64_t m, int tag,
                const LinearRun& run) const;

 private:
  TpLinearLayout layout_;
  const char* name_;
  comm::Communicator& in_group_;   // forward all-reduce: X (normal) or Y (transposed)
  comm::Communicator& out_group_;  // backward all-reduce: Y (normal) or X (transposed)
  comm::Communicator& z_;          // weight-gradient reduce-scatter
  comm::Communicator& z_gather_;   // weight all-gather (the second Z communicator)
};

}  // namespace axonn::parallel
