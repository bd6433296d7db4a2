// kernels/cuda/layernorm.cu — LayerNorm forward and backward (kernels/ops.hpp, ops_bf16.hpp) on device
// pointers, fp32 and bf16 from the same templates, in the caller's steps: the model completes each row
// statistic over X (device arrays) between them (model/block.hpp):
//   forward:  layernorm_sum: sum(x) -> mean[n]; (all-reduce) layernorm_centred_sumsq: mean /= C_total, the
//             centred sum of squares -> var[n]; (all-reduce) layernorm_forward: rstd = 1/sqrt(var/C_total + eps),
//             the normalised row;
//   backward: layernorm_backward_sums: sum(dnorm), sum(dnorm * xhat) -> sums[2N]; (all-reduce)
//             layernorm_backward: dinp, and the weight and bias gradients.
// Same formulas and the same two-pass statistics as kernels::ref, each row by one warp (32 lanes and a
// butterfly instead of one loop), the lanes over the row in packs of 8 (packs.cuh: 16-byte loads and stores
// where the rows are aligned). fp32 math throughout; the statistics and parameter gradients are fp32; a
// bf16 output is rounded once, and the accumulated dinp is summed in fp32 with its old value first.
#include "axonn/kernels/ops.hpp"
#include "columns.cuh"
#include "common.cuh"
#include "packs.cuh"
#include "runtime_bf16.hpp"

namespace axonn::kernels::cuda {
namespace {

using detail::for_packs;
using detail::kPack;
using detail::kWarp;
using detail::load8;
using detail::rows_aligned16;
using detail::store8;
using detail::warp_sum;

constexpr float kLayerNormEps = 1e-5f;
constexpr int kRowsPerBlock = 8;  // warps per block: 256 threads
constexpr unsigned kBlockThreads = kRowsPerBlock * kWarp;

unsigned row_blocks(int64_t N) {
  const int64_t blocks = (N + kRowsPerBlock - 1) / kRowsPerBlock;
  AXONN_CHECK_ARG(blocks <= 0x7fffffffLL, "cuda layernorm: ", N, " rows exceed the grid; use smaller micro-batches");
  return static_cast<unsigned>(blocks);
}

// mean[n] = sum of this rank's channels of row n
template <typename E>
__global__ void row_sum_kernel(float* mean, const E* inp, int64_t N, int C, bool vec) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;  // the whole warp leaves together
  const E* x = inp + n * C;
  float s = 0.0f;
  for_packs(lane, kWarp, C, vec, [&](int i, int cnt, bool whole) {
    float a[kPack];
    load8(a, x + i, cnt, whole);  // the missing elements read as 0
#pragma unroll
    for (int j = 0; j < kPack; j++) s += a[j];
  });
  s = warp_sum(s);
  if (lane == 0) mean[n] = s;
}

// mean[n]: the complete row sum in, the mean out; var[n] = this rank's sum of (x - mean)^2
template <typename E>
__global__ void centred_squares_kernel(float* var, float* mean, const E* inp, int64_t N, int C, float c_total,
                                       bool vec) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float m = mean[n] / c_total;  // every lane reads before lane 0 writes (after the shuffles)
  const E* x = inp + n * C;
  float v = 0.0f;
  for_packs(lane, kWarp, C, vec, [&](int i, int cnt, bool whole) {
    float a[kPack];
    load8(a, x + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++) {
      const float d = j < cnt ? a[j] - m : 0.0f;
      v += d * d;
    }
  });
  v = warp_sum(v);
  if (lane == 0) {
    mean[n] = m;
    var[n] = v;
  }
}

// rstd[n]: the complete centred sum of squares in, 1/sqrt(var / C_total + eps) out; then the normalised row
template <typename E>
__global__ void normalise_kernel(E* out, const float* mean, float* rstd, const E* inp, const E* weight, const E* bias,
                                 int64_t N, int C, float c_total, bool vec) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float r = 1.0f / sqrtf(rstd[n] / c_total + kLayerNormEps);
  __syncwarp();  // every lane has read rstd[n] before lane 0 overwrites it
  const float m = mean[n];
  const E* x = inp + n * C;
  E* o = out + n * C;
  for_packs(lane, kWarp, C, vec, [&](int i, int cnt, bool whole) {
    float a[kPack], w[kPack], b[kPack], y[kPack];
    load8(a, x + i, cnt, whole);
    load8(w, weight + i, cnt, whole);
    load8(b, bias + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++) y[j] = r * (a[j] - m) * w[j] + b[j];
    store8(o + i, y, cnt, whole);
  });
  if (lane == 0) rstd[n] = r;
}

// sums[n] = this rank's sum(dnorm), sums[N + n] = sum(dnorm * xhat), dnorm = weight * dout
template <typename E>
__global__ void backward_row_sums_kernel(float* sums, const E* dout, const E* inp, const E* weight, const float* mean,
                                         const float* rstd, int64_t N, int C, bool vec) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const E* x = inp + n * C;
  const E* dy = dout + n * C;
  const float m = mean[n], r = rstd[n];
  float s1 = 0.0f, s2 = 0.0f;
  for_packs(lane, kWarp, C, vec, [&](int i, int cnt, bool whole) {
    float a[kPack], w[kPack], g[kPack];
    load8(a, x + i, cnt, whole);
    load8(w, weight + i, cnt, whole);
    load8(g, dy + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++) {
      const float dnorm = w[j] * g[j];  // 0 for the missing elements
      s1 += dnorm;
      s2 += dnorm * ((a[j] - m) * r);
    }
  });
  s1 = warp_sum(s1);
  s2 = warp_sum(s2);
  if (lane == 0) {
    sums[n] = s1;
    sums[N + n] = s2;
  }
}

// dinp += (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)) * rstd with the complete sums
template <typename E>
__global__ void backward_apply_kernel(E* dinp, const float* sums, const E* dout, const E* inp, const E* weight,
                                      const float* mean, const float* rstd, int64_t N, int C, float c_total,
                                      bool vec) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const E* x = inp + n * C;
  const E* dy = dout + n * C;
  const float m = mean[n], r = rstd[n];
  const float dnorm_mean = sums[n] / c_total, dnorm_norm_mean = sums[N + n] / c_total;
  E* dx = dinp + n * C;
  for_packs(lane, kWarp, C, vec, [&](int i, int cnt, bool whole) {
    float a[kPack], w[kPack], g[kPack], d[kPack];
    load8(a, x + i, cnt, whole);
    load8(w, weight + i, cnt, whole);
    load8(g, dy + i, cnt, whole);
    load8(d, dx + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++) {
      const float xhat = (a[j] - m) * r;
      d[j] += (w[j] * g[j] - dnorm_mean - xhat * dnorm_norm_mean) * r;
    }
    store8(dx + i, d, cnt, whole);
  });
}

// --- launches, one set for each element type -------------------------------------------------

template <typename E>
void layernorm_sum_of(float* mean, const E* inp, int64_t N, int C) {
  if (N == 0) return;
  row_sum_kernel<E><<<row_blocks(N), kBlockThreads, 0, detail::stream()>>>(mean, inp, N, C,
                                                                           rows_aligned16<E>(C, {inp}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void layernorm_centred_of(float* var, float* mean, const E* inp, int64_t N, int C, int C_total) {
  if (N == 0) return;
  centred_squares_kernel<E><<<row_blocks(N), kBlockThreads, 0, detail::stream()>>>(
      var, mean, inp, N, C, static_cast<float>(C_total), rows_aligned16<E>(C, {inp}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void layernorm_normalise(E* out, const float* mean, float* rstd, const E* inp, const E* weight, const E* bias,
                         int64_t N, int C, int C_total) {
  if (N == 0) return;
  normalise_kernel<E><<<row_blocks(N), kBlockThreads, 0, detail::stream()>>>(
      out, mean, rstd, inp, weight, bias, N, C, static_cast<float>(C_total),
      rows_aligned16<E>(C, {out, inp, weight, bias}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void layernorm_sums_of(float* sums, const E* dout, const E* inp, const E* weight, const float* mean, const float* rstd,
                       int64_t N, int C) {
  if (N == 0) return;
  backward_row_sums_kernel<E><<<row_blocks(N), kBlockThreads, 0, detail::stream()>>>(
      sums, dout, inp, weight, mean, rstd, N, C, rows_aligned16<E>(C, {dout, inp, weight}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void layernorm_grads(E* dinp, float* dweight, float* dbias, const E* dout, const E* inp, const E* weight,
                     const float* mean, const float* rstd, const float* sums, int64_t N, int C, int C_total) {
  if (N == 0 || C == 0) return;
  backward_apply_kernel<E><<<row_blocks(N), kBlockThreads, 0, detail::stream()>>>(
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
