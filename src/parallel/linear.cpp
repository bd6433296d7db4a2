#include "axonn/parallel/linear.hpp"

#include <cstring>

namespace axonn::parallel {

TpLinear::TpLinear(const Grid& grid, const TpLinearSpec& spec, const char* name)
    : layout_(spec, grid.shape(), grid.coords(), name),
      in_group_(spec.transposed ? grid.y() : grid.x()),
      out_group_(spec.transposed ? grid.x() : grid.y()),
      z_(grid.z()),
      z_gather_(grid.z2()) {}

const float* TpLinear::gather_weight(const float* w_shard, float* gathered) const {
  if (z_gather_.size() == 1) return w_shard;
  z_gather_.all_gather(w_shard, gathered, static_cast<size_t>(layout_.shard_size), DType::kF32);  // over Z
  return gathered;
}

void TpLinear::forward(float* y, const float* x, const float* w_shard, const float* bias, float* gathered,
                       int64_t m, const kernels::Ops& ops) const {
  const TpLinearLayout& l = layout_;
  const float* w = gather_weight(w_shard, gathered);
  // The bias is added by one rank of the input group only, so the all-reduce adds it exactly once.
  const float* b = in_group_.rank() == 0 ? bias : nullptr;
  ops.matmul_forward(y, x, w, b, m, l.in_local, l.out_local);
  in_group_.all_reduce(y, static_cast<size_t>(m) * l.out_local, DType::kF32);  // over X (normal) / Y (transposed)
}

void TpLinear::backward(float* dx, float* dw_shard, float* dbias, const float* dy, const float* x,
                        const float* w_shard, float* gathered, float* dw_block, int64_t m,
                        const kernels::Ops& ops) const {
  const TpLinearLayout& l = layout_;
  const float* w = gather_weight(w_shard, gathered);
  // With Gz = 1 the block is the shard: accumulate into it directly.
  float* dw = z_.size() == 1 ? dw_shard : dw_block;
  if (dw != dw_shard) std::memset(dw, 0, sizeof(float) * static_cast<size_t>(l.block_size));
  ops.matmul_backward(dx, dw, dbias, dy, x, w, m, l.in_local, l.out_local);
  out_group_.all_reduce(dx, static_cast<size_t>(m) * l.in_local, DType::kF32);  // over Y (normal) / X (transposed)
  if (dw != dw_shard) {
    // Sum the block over Z (each Z rank saw other tokens) and keep this rank's piece; the gathered
    // weight is no longer needed, so its buffer receives the piece.
    z_.reduce_scatter(dw, gathered, static_cast<size_t>(l.shard_size), DType::kF32);  // over Z
    for (int64_t i = 0; i < l.shard_size; i++) dw_shard[i] += gathered[i];
  }
}

}  // namespace axonn::parallel
