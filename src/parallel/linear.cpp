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

template <class T>
void TpLinear::forward(T* y, const std::type_identity_t<T>* x, const std::type_identity_t<T>* w,
                       const std::type_identity_t<T>* bias, int64_t m, const LinearRun& run) const {
  const TpLinearLayout& l = layout_;
  constexpr DType dt = kernels::Precision<T>::kDType;
  // The bias is added by one rank of the input group only, so the all-reduce adds it exactly once.
  const T* b = in_group_.rank() == 0 ? bias : nullptr;
  {
    auto gemm = run.tl.compute("matmul_forward");
    run.table<T>().matmul_forward(y, x, w, b, m, l.in_local, l.out_local);
  }
  // Blocking, as in AxoNN: the next op needs y at once, and there is no other work to hide it under.
  run.tl.all_reduce(in_group_, y, static_cast<size_t>(m) * l.out_local, dt);  // over X (normal) / Y (transposed)
}

template <class T>
void TpLinear::backward(T* dx, float* dw_shard, float* dbias, const std::type_identity_t<T>* dy,
                        const std::type_identity_t<T>* x, const std::type_identity_t<T>* w, int64_t m, int tag,
                        const LinearRun& run) const {
  const TpLinearLayout& l = layout_;
  constexpr DType dt = kernels::Precision<T>::kDType;
  const auto& ops = run.table<T>();
  // dx = dy W, partial over this rank's output features: summed over the output group. Issued now;
  // under OAR it runs during the dW GEMM below (spec §4.1), else it completes before that GEMM.
  {
    auto gemm = run.tl.compute("matmul_backward_dx");
    ops.matmul_backward(dx, nullptr, nullptr, dy, x, w, m, l.in_local, l.out_local);
  }
  auto dx_sum = run.tl.all_reduce_async(out_group_, dx, static_cast<size_t>(m) * l.in_local, dt);  // over Y / X
  // The waits are device-side on the GPU (Work::wait_on: the compute stream waits, the host goes on
  // queueing kernels); on the host backends they are wait().
  if (!run.overlap_all_reduce) dx_sum->wait_on(nullptr);

  // dW = dy^T x over this rank's tokens. With Gz = 1 it is the shard: accumulate into it directly.
  // Else into a block of the reduce-scatter queue, summed over Z (each Z rank saw other tokens) by
  // a reduce-scatter that the queue retires now or, under ORS, later (spec §4.2).
  const bool reduce = z_.size() > 1;
  AXONN_CHECK(!reduce || run.reduce_scatters, "TpLinear::backward with Gz > 1 needs a ReduceScatterQueue");
  float* dw = reduce ? run.reduce_scatters->block(l.block_size) : dw_shard;
  {
    auto gemm = run.tl.compute("matmul_backward_dw");
    ops.matmul_backward(nullptr, dw, dbias, dy, x, w, m, l.in_local, l.out_local);
  }
  if (reduce)
    run.reduce_scatters->issue(z_, dw, dw_shard, l.shard_size, tag);  // over Z
  else if (run.reduce_scatters)
    run.reduce_scatters->complete_now(tag);

  dx_sum->wait_on(nullptr);  // the previous layer needs dx
}

template void TpLinear::forward<float>(float*, const float*, const float*, const float*, int64_t,
                                       const LinearRun&) const;
template void TpLinear::forward<kernels::bf16>(kernels::bf16*, const kernels::bf16*, const kernels::bf16*,
                                               const kernels::bf16*, int64_t, const LinearRun&) const;
template void TpLinear::backward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                        int, const LinearRun&) const;
template void TpLinear::backward<kernels::bf16>(kernels::bf16*, float*, float*, const kernels::bf16*,
                                                const kernels::bf16*, const kernels::bf16*, int64_t, int,
                                                const LinearRun&) const;

}  // namespace axonn::parallel
