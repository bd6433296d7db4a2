// kernels/cuda/adamw.cu — the fused AdamW update for both tables (the bf16 table's writes the weights' bf16
// copy in the same pass), the sum of squares (gradient-norm clipping), and the bf16 table's fp32 <-> bf16 casts.
#include <cuda_bf16.h>

#include <cmath>

#include "axonn/kernels/ops.hpp"
#include "adamw.cuh"
#include "common.cuh"
#include "packs.cuh"

namespace axonn::kernels::cuda {
namespace {

using detail::global_index;
using detail::global_stride;

constexpr int kThreads = 256;

// Each thread sums squares in double over its grid-stride slice; a block reduction and one atomic
// per block finish the job (the order of the atomics varies, in double that is far below fp32 noise).
__global__ void sum_squares_kernel(double* out, const float* x, int64_t n) {
  __shared__ double shared[detail::kWarp];
  double s = 0.0;
  for (int64_t i = global_index(); i < n; i += global_stride()) s += static_cast<double>(x[i]) * x[i];
  s = detail::block_reduce(s, shared, detail::SumOp{}, 0.0);
  if (threadIdx.x == 0) atomicAdd(out, s);
}

// out[n] = in[n], widened exactly or rounded once, in packs of 8 (packs.cuh).
template <typename To, typename From>
struct Cast {
  To* out;
  const From* in;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float x[detail::kPack];
    detail::load8(x, in + i, cnt, vec);
    detail::store8(out + i, x, cnt, vec);
  }
};

void adamw_launch(float* params, uint16_t* copy, float* m, float* v, const float* grads, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
  if (n == 0) return;
  AXONN_CHECK_ARG(t >= 1, "cuda adamw_update: step t = ", t,
                  " must be >= 1 (the bias corrections divide by 1 - beta^t)");
  const adamw::Packs update{params, copy, m, v, grads,
                            adamw::step_of(lr, beta1, beta2, eps, weight_decay, grad_scale, t)};
  detail::launch_packs(update, n, update.aligned());
}

}  // namespace

void adamw_update(float* params, float* copy, float* m, float* v, const float* grads, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
  // params [n], m [n], v [n], grads [n]; t >= 1
  AXONN_CHECK_ARG(copy == nullptr, "cuda adamw_update: the fp32 table keeps no copy of the weights; pass null");
  adamw_launch(params, nullptr, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}

void sum_squares(double* sums, const float* const* tensors, const int64_t* sizes, int count) {
  // tensors[count] device pointers, sums/tensors/sizes on the host. Every tensor's kernel adds into its own
  // slot of one device array, which is copied back once: the norm waits for the GPU once, where a wait per
  // tensor (about 150 for GPT-2) left it idle between them.
  AXONN_CHECK_ARG(count >= 0, "cuda sum_squares: count = ", count);
  if (count == 0) return;
  const size_t bytes = sizeof(double) * static_cast<size_t>(count);
  auto* acc = static_cast<double*>(detail::scratch(bytes));
  AXONN_CUDA_CHECK(cudaMemsetAsync(acc, 0, bytes, detail::stream()));
  for (int k = 0; k < count; k++) {
    if (sizes[k] == 0) continue;
    sum_squares_kernel<<<detail::grid_for(sizes[k], kThreads), kThreads, 0, detail::stream()>>>(acc + k, tensors[k],
                                                                                                 sizes[k]);
    AXONN_CUDA_CHECK_LAUNCH();
  }
  // On the compute stream after the kernels, then waited: the legacy cudaMemcpy would not be ordered
  // with them.
  AXONN_CUDA_CHECK(cudaMemcpyAsync(sums, acc, bytes, cudaMemcpyDeviceToHost, detail::stream()));
  AXONN_CUDA_CHECK(cudaStreamSynchronize(detail::stream()));
}

}  // namespace axonn::kernels::cuda

// bf16 (kernels/ops_bf16.hpp)
namespace axonn::kernels::cuda_bf16 {

void adamw_update(float* master, bf16* params, float* m, float* v, const float* grads, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
  // master, m, v, grads [n] fp32; params [n] bf16 = round(master) after the step; t >= 1
  AXONN_CHECK_ARG(params != nullptr || n == 0, "cuda bf16 adamw_update: the bf16 copy of the weights is required");
  cuda::adamw_launch(master, params, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}

void cast_from_f32(bf16* out, const float* in, int64_t n) {
  // out [n] bf16, in [n] fp32
  cuda::detail::launch_packs(cuda::Cast<bf16, float>{out, in}, n, cuda::detail::all_aligned16({out, in}));
}

void cast_to_f32(float* out, const bf16* in, int64_t n) {
  // out [n] fp32, in [n] bf16
  cuda::detail::launch_packs(cuda::Cast<float, bf16>{out, in}, n, cuda::detail::all_aligned16({out, in}));
}

}  // namespace axonn::kernels::cuda_bf16
