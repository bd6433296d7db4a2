// kernels/cuda/layernorm.cu — LayerNorm forward and backward (kernels/ops.hpp, ops_bf16.hpp) on device
// pointers, fp32 and bf16 from the same templates, in the caller's steps: the model completes each row
// statistic over X (device arrays) between them (model/block.hpp):
//   forward:  layernorm_sum: sum(x) -> mean[n]; (all-reduce) layernorm_centred_sumsq: mean /= C_total, the
//             centred sum of squares -> var[n]; (all-reduce) layernorm_forward: rstd = 1/sqrt(var/C_total + eps),
//             the normalised row;
//   backward: layernorm_backward_sums: sum(dnorm), sum(dnorm * xhat) -> sums[2N]; (all-reduce)
//             layernorm_backward: dinp, and the weight and bias gradients.
// The kernels (one warp per row, packs of 8) are norm_rows.cuh's; the parameter gradients columns.cuh's.
#include "axonn/kernels/ops.hpp"
#include "columns.cuh"
#include "norm_rows.cuh"

namespace axonn::kernels::cuda {
namespace {

using detail::rows_aligned16;
namespace rows = norm_rows;

// --- launches, one set for each element type -------------------------------------------------

template <typename E>
void layernorm_sum_of(float* mean, const E* inp, int64_t N, int C) {
  if (N == 0) return;
  rows::row_sum_kernel<E, false><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      mean, inp, N, C, rows_aligned16<E>(C, {inp}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void layernorm_centred_of(float* var, float* mean, const E* inp, int64_t N, int C, int C_total) {
  if (N == 0) return;
  rows::layernorm_centred_squares_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      var, mean, inp, N, C, static_cast<float>(C_total), rows_aligned16<E>(C, {inp}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void layernorm_normalise(E* out, const float* mean, float* rstd, const E* inp, const E* weight, const E* bias,
                         int64_t N, int C, int C_total) {
  if (N == 0) return;
  rows::layernorm_normalise_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      out, mean, rstd, inp, weight, bias, N, C, static_cast<float>(C_total),
      rows_aligned16<E>(C, {out, inp, weight, bias}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void layernorm_sums_of(float* sums, const E* dout, const E* inp, const E* weight, const float* mean, const float* rstd,
                       int64_t N, int C) {
  if (N == 0) return;
  rows::layernorm_backward_sums_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      sums, dout, inp, weight, mean, rstd, N, C, rows_aligned16<E>(C, {dout, inp, weight}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void layernorm_grads(E* dinp, float* dweight, float* dbias, const E* dout, const E* inp, const E* weight,
                     const float* mean, const float* rstd, const float* sums, int64_t N, int C, int C_total) {
  if (N == 0 || C == 0) return;
  rows::layernorm_backward_apply_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      dinp, sums, dout, inp, weight, mean, rstd, N, C, static_cast<float>(C_total),
      rows_aligned16<E>(C, {dinp, dout, inp, weight}));
  AXONN_CUDA_CHECK_LAUNCH();
  detail::layernorm_params_accumulate(dweight, dbias, dout, inp, mean, rstd, N, C);
}

}  // namespace

void layernorm_sum(float* mean, const float* inp, int64_t N, int C) { layernorm_sum_of(mean, inp, N, C); }
void layernorm_centred_sumsq(float* var, float* mean, const float* inp, int64_t N, int C, int C_total) {
  layernorm_centred_of(var, mean, inp, N, C, C_total);
}
void layernorm_forward(float* out, const float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int C, int C_total) {
  layernorm_normalise(out, mean, rstd, inp, weight, bias, N, C, C_total);
}
void layernorm_backward_sums(float* sums, const float* dout, const float* inp, const float* weight, const float* mean,
                             const float* rstd, int64_t N, int C) {
  layernorm_sums_of(sums, dout, inp, weight, mean, rstd, N, C);
}
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const float* sums, int64_t N, int C,
                        int C_total) {
  layernorm_grads(dinp, dweight, dbias, dout, inp, weight, mean, rstd, sums, N, C, C_total);
}

}  // namespace axonn::kernels::cuda

// bf16 (kernels/ops_bf16.hpp)
namespace axonn::kernels::cuda_bf16 {

void layernorm_sum(float* mean, const bf16* inp, int64_t N, int C) { cuda::layernorm_sum_of(mean, inp, N, C); }
void layernorm_centred_sumsq(float* var, float* mean, const bf16* inp, int64_t N, int C, int C_total) {
  cuda::layernorm_centred_of(var, mean, inp, N, C, C_total);
}
void layernorm_forward(bf16* out, const float* mean, float* rstd, const bf16* inp, const bf16* weight,
                       const bf16* bias, int64_t N, int C, int C_total) {
  cuda::layernorm_normalise(out, mean, rstd, inp, weight, bias, N, C, C_total);
}
void layernorm_backward_sums(float* sums, const bf16* dout, const bf16* inp, const bf16* weight, const float* mean,
                             const float* rstd, int64_t N, int C) {
  cuda::layernorm_sums_of(sums, dout, inp, weight, mean, rstd, N, C);
}
void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const bf16* weight, const float* mean, const float* rstd, const float* sums, int64_t N, int C,
                        int C_total) {
  cuda::layernorm_grads(dinp, dweight, dbias, dout, inp, weight, mean, rstd, sums, N, C, C_total);
}

}  // namespace axonn::kernels::cuda_bf16
