// kernels/cuda/layernorm.cu — LayerNorm forward and backward, one warp per row.
//
// Same formulas and the same two-pass statistics as kernels::ref (mean first, then the centred sum
// of squares), with the sums over a row done by 32 lanes and a butterfly instead of one loop.
// Rows sharded over ranks (a RowReducer): the kernel is split into its passes, and the reducer's
// all_reduce completes the partial row sums (device arrays) between them, as kernels::ref does.
#include "axonn/kernels/ops.hpp"
#include "columns.cuh"
#include "common.cuh"

namespace axonn::kernels::cuda {
namespace {

using detail::kWarp;
using detail::warp_sum;

constexpr float kLayerNormEps = 1e-5f;
constexpr int kRowsPerBlock = 8;  // warps per block: 256 threads

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int64_t N, int C,
                                         float c_total) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;  // the whole warp leaves together
  const float* x = inp + n * C;
  float s = 0.0f;
  for (int i = lane; i < C; i += kWarp) s += x[i];
  const float m = warp_sum(s) / c_total;
  float v = 0.0f;
  for (int i = lane; i < C; i += kWarp) {
    const float d = x[i] - m;
    v += d * d;
  }
  const float r = 1.0f / sqrtf(warp_sum(v) / c_total + kLayerNormEps);
  float* o = out + n * C;
  for (int i = lane; i < C; i += kWarp) o[i] = r * (x[i] - m) * weight[i] + bias[i];
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

// dinp += (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)) * rstd, dnorm = weight * dout.
__global__ void layernorm_backward_input_kernel(float* dinp, const float* dout, const float* inp,
                                                const float* weight, const float* mean, const float* rstd,
                                                int64_t N, int C, float c_total) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float* x = inp + n * C;
  const float* dy = dout + n * C;
  const float m = mean[n], r = rstd[n];
  float s1 = 0.0f, s2 = 0.0f;
  for (int i = lane; i < C; i += kWarp) {
    const float dnorm = weight[i] * dy[i];
    s1 += dnorm;
    s2 += dnorm * ((x[i] - m) * r);
  }
  const float dnorm_mean = warp_sum(s1) / c_total, dnorm_norm_mean = warp_sum(s2) / c_total;
  float* dx = dinp + n * C;
  for (int i = lane; i < C; i += kWarp) {
    const float xhat = (x[i] - m) * r;
    dx[i] += (weight[i] * dy[i] - dnorm_mean - xhat * dnorm_norm_mean) * r;
  }
}

unsigned row_blocks(int64_t N) { return static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock); }

// --- the passes of the sharded forward (a RowReducer completes each row sum in between) ---------
// sums[n] = sum of this rank's channels of row n
__global__ void row_sum_kernel(float* sums, const float* inp, int64_t N, int C) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float* x = inp + n * C;
  float s = 0.0f;
  for (int i = lane; i < C; i += kWarp) s += x[i];
  s = warp_sum(s);
  if (lane == 0) sums[n] = s;
}

// mean[n]: the complete row sum in, the mean out; var[n] = this rank's sum of (x - mean)^2
__global__ void centred_squares_kernel(float* mean, float* var, const float* inp, int64_t N, int C, float c_total) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float m = mean[n] / c_total;  // every lane reads before lane 0 writes (after the shuffles)
  const float* x = inp + n * C;
  float v = 0.0f;
  for (int i = lane; i < C; i += kWarp) {
    const float d = x[i] - m;
    v += d * d;
  }
  v = warp_sum(v);
  if (lane == 0) {
    mean[n] = m;
    var[n] = v;
  }
}

// rstd[n]: the complete centred sum of squares in, 1/sqrt(var + eps) out; then the normalised row
__global__ void normalise_kernel(float* out, float* rstd, const float* mean, const float* inp, const float* weight,
                                 const float* bias, int64_t N, int C, float c_total) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float r = 1.0f / sqrtf(rstd[n] / c_total + kLayerNormEps);
  __syncwarp();  // every lane has read rstd[n] before lane 0 overwrites it
  const float m = mean[n];
  const float* x = inp + n * C;
  float* o = out + n * C;
  for (int i = lane; i < C; i += kWarp) o[i] = r * (x[i] - m) * weight[i] + bias[i];
  if (lane == 0) rstd[n] = r;
}

// --- the passes of the sharded backward -------------------------------------------------------
// sums[n] = this rank's sum(dnorm), sums[N + n] = sum(dnorm * xhat), dnorm = weight * dout
__global__ void backward_row_sums_kernel(float* sums, const float* dout, const float* inp, const float* weight,
                                         const float* mean, const float* rstd, int64_t N, int C) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float* x = inp + n * C;
  const float* dy = dout + n * C;
  const float m = mean[n], r = rstd[n];
  float s1 = 0.0f, s2 = 0.0f;
  for (int i = lane; i < C; i += kWarp) {
    const float dnorm = weight[i] * dy[i];
    s1 += dnorm;
    s2 += dnorm * ((x[i] - m) * r);
  }
  s1 = warp_sum(s1);
  s2 = warp_sum(s2);
  if (lane == 0) {
    sums[n] = s1;
    sums[N + n] = s2;
  }
}

// dinp += (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)) * rstd with the complete sums
__global__ void backward_apply_kernel(float* dinp, const float* sums, const float* dout, const float* inp,
                                      const float* weight, const float* mean, const float* rstd, int64_t N, int C,
                                      float c_total) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float* x = inp + n * C;
  const float* dy = dout + n * C;
  const float m = mean[n], r = rstd[n];
  const float dnorm_mean = sums[n] / c_total, dnorm_norm_mean = sums[N + n] / c_total;
  float* dx = dinp + n * C;
  for (int i = lane; i < C; i += kWarp) {
    const float xhat = (x[i] - m) * r;
    dx[i] += (weight[i] * dy[i] - dnorm_mean - xhat * dnorm_norm_mean) * r;
  }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int C, int C_total, const RowReducer* reducer) {
  // out [N,C], mean [N], rstd [N], inp [N,C], weight [C], bias [C]; rows of C_total channels
  const float ct = static_cast<float>(C_total);
  if (reducer == nullptr) {
    if (N == 0) return;
    layernorm_forward_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, detail::stream()>>>(
        out, mean, rstd, inp, weight, bias, N, C, ct);
    AXONN_CUDA_CHECK_LAUNCH();
    return;
  }
  // Sharded rows: every rank makes the same reducer calls, even with N == 0 rows here.
  if (N > 0) {
    row_sum_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, detail::stream()>>>(mean, inp, N, C);
    AXONN_CUDA_CHECK_LAUNCH();
  }
  reducer->all_reduce(reducer->ctx, mean, N, false);  // device array: the row sums over the group
  if (N > 0) {
    centred_squares_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, detail::stream()>>>(mean, rstd, inp, N, C, ct);
    AXONN_CUDA_CHECK_LAUNCH();
  }
  reducer->all_reduce(reducer->ctx, rstd, N, false);  // the centred sums of squares over the group
  if (N > 0) {
    normalise_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, detail::stream()>>>(out, rstd, mean, inp, weight,
                                                                                      bias, N, C, ct);
    AXONN_CUDA_CHECK_LAUNCH();
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int C, int C_total,
                        const RowReducer* reducer) {
  // dinp [N,C], dweight [C], dbias [C], dout [N,C], inp [N,C], weight [C], mean [N], rstd [N]
  const float ct = static_cast<float>(C_total);
  if (reducer == nullptr) {
    if (N == 0 || C == 0) return;
    layernorm_backward_input_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, detail::stream()>>>(
        dinp, dout, inp, weight, mean, rstd, N, C, ct);
    AXONN_CUDA_CHECK_LAUNCH();
  } else {
    // Sharded rows: the two row sums are partial here; the reducer completes them (device array,
    // [N] sum(dnorm) | [N] sum(dnorm * xhat), as kernels::ref) before they are applied.
    auto* sums = static_cast<float*>(detail::scratch(sizeof(float) * 2 * static_cast<size_t>(N > 0 ? N : 1)));
    if (N > 0) {
      backward_row_sums_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, detail::stream()>>>(sums, dout, inp, weight,
                                                                                              mean, rstd, N, C);
      AXONN_CUDA_CHECK_LAUNCH();
    }
    reducer->all_reduce(reducer->ctx, sums, 2 * N, false);  // over the group
    if (N == 0 || C == 0) return;
    backward_apply_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, detail::stream()>>>(dinp, sums, dout, inp, weight,
                                                                                         mean, rstd, N, C, ct);
    AXONN_CUDA_CHECK_LAUNCH();
  }
  detail::layernorm_params_accumulate(dweight, dbias, dout, inp, mean, rstd, N, C);
}

}  // namespace axonn::kernels::cuda
