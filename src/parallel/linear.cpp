#include "axonn/parallel/linear.hpp"

#include "axonn/core/error.hpp"

namespace axonn::parallel {

TpLinear::TpLinear(const Grid& grid, const TpLinearSpec& spec, const char* name)
    : layout_(spec, grid.shape(), grid.coords(), name),
      name_(name),
      in_group_(spec.transposed ? grid.y() : grid.x()),
      out_group_(spec.transposed ? grid.x() : grid.y()),
      z_(grid.z()),
      z_gather_(grid.z2()) {}

const float* TpLinear::gather_weight(const float* w_shard, float* gathered, Timeline& tl) const {
  if (z_gather_.size() == 1) return w_shard;
  tl.all_gather(z_gather_, w_shard, gathered, static_cast<size_t>(layout_.shard_size));  // over Z (second)
  return gathered;
}

void TpLinear::forward(float* y, const float* x, const float* w, const float* bias, int64_t m,
                       const LinearRun& run) const {
  const TpLinearLayout& l = layout_;
  // The bias is added by one rank of the input group only, so the all-reduce adds it exactly once.
  const float* b = in_group_.rank() == 0 ? bias : nullptr;
  {
    auto gemm = run.tl.compute("matmul_forward");
    run.ops.matmul_forward(y, x, w, b, m, l.in_local, l.out_local);
  }
  // Blocking, as in AxoNN: the next op needs y at once, and there is no other work to hide it under.
  run.tl.all_reduce(in_group_, y, static_cast<size_t>(m) * l.out_local);  // over X (normal) / Y (transposed)
}

void TpLinear::backward(float* dx, float* dw_shard, float* dbias, const float* dy, const float* x, const float* w,
                        int64_t m, int tag, const LinearRun& run) const {
  const TpLinearLayout& l = layout_;
  // dx = dy W, partial over this rank's output features: summed over the output group. Issued now;
  // under OAR it runs during the dW GEMM below (spec §4.1), else it completes before that GEMM.
  {
    auto gemm = run.tl.compute("matmul_backward_dx");
    run.ops.matmul_backward(dx, nullptr, nullptr, dy, x, w, m, l.in_local, l.out_local);
  }
  auto dx_sum = run.tl.all_reduce_async(out_group_, dx, static_cast<size_t>(m) * l.in_local);  // over Y / X
  if (!run.overlap_all_reduce) dx_sum->wait();

  // dW = dy^T x over this rank's tokens. With Gz = 1 it is the shard: accumulate into it directly.
  // Else into a block of the reduce-scatter queue, summed over Z (each Z rank saw other tokens) by
  // a reduce-scatter that the queue retires now or, under ORS, later (spec §4.2).
  const bool reduce = z_.size() > 1;
  AXONN_CHECK(!reduce || run.reduce_scatters, "TpLinear::backward with Gz > 1 needs a ReduceScatterQueue");
  float* dw = reduce ? run.reduce_scatters->block(l.block_size) : dw_shard;
  {
    auto gemm = run.tl.compute("matmul_backward_dw");
    run.ops.matmul_backward(nullptr, dw, dbias, dy, x, w, m, l.in_local, l.out_local);
  }
  if (reduce)
    run.reduce_scatters->issue(z_, dw, dw_shard, l.shard_size, tag);  // over Z
  else if (run.reduce_scatters)
    run.reduce_scatters->complete_now(tag);

  dx_sum->wait();  // the previous layer needs dx
}

}  // namespace axonn::parallel
