// kernels/cuda/norm_rows.cuh — the row kernels of LayerNorm (layernorm.cu) and RMSNorm (llama.cu), fp32 and bf16
// from the same templates (device code; the .cu files launch them). Each row is one warp's: its 32 lanes take
// the row's packs of 8 in turn (packs.cuh: 16-byte loads and stores where the rows are aligned) and meet in a
// butterfly (warp_sum), instead of one loop over the row. Same formulas and the same two-pass statistics as
// kernels::ref; fp32 math throughout, a bf16 output rounded once, an accumulated dinp summed in fp32 with its
// old value first. The caller completes each row statistic over the channels' group between the kernels
// (model/block.hpp):
//   LayerNorm forward:  sum(x) -> mean; (all-reduce) mean /= C_total, centred sum of squares -> var;
//                       (all-reduce) rstd = 1/sqrt(var/C_total + eps), the normalised row.
//   LayerNorm backward: sum(dnorm), sum(dnorm * xhat) -> sums[2N]; (all-reduce) dinp.
//   RMSNorm forward:    sum(x^2) -> sumsq; (all-reduce) rstd, the normalised row.
//   RMSNorm backward:   sum(dout * weight * x) -> dot; (all-reduce) dinp.
// (The parameter gradients sum down the rows: columns.cuh.) Builds for the SIMT emulator as well
// (tests/unit/cuda_emu runs these kernels on the CPU against kernels::ref).
#pragma once

#include <cstdint>

#include "axonn/core/error.hpp"
#include "common.cuh"
#include "packs.cuh"

namespace axonn::kernels::cuda::norm_rows {

using detail::for_packs;
using detail::kPack;
using detail::kWarp;
using detail::load8;
using detail::store8;
using detail::warp_sum;

constexpr int kRowsPerBlock = 8;  // warps per block
constexpr unsigned kThreads = kRowsPerBlock * kWarp;
constexpr float kLayerNormEps = 1e-5f;

// The launch's blocks for N rows.
inline unsigned row_blocks(int64_t N) {
  const int64_t blocks = (N + kRowsPerBlock - 1) / kRowsPerBlock;
  AXONN_CHECK_ARG(blocks <= 0x7fffffffLL, "cuda norm: ", N, " rows exceed the grid; use smaller micro-batches");
  return static_cast<unsigned>(blocks);
}

// The row of the calling thread's warp (kRowsPerBlock rows a block) and the thread's lane in it.
struct WarpRow {
  int64_t n;
  int lane;
};
__device__ __forceinline__ WarpRow warp_row() {
  return {static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp,
          static_cast<int>(threadIdx.x % kWarp)};
}

// --- both norms ---


// out[n] = sum of this rank's channels of row n (LayerNorm's mean, before the division), or of their squares
// (kSquares: RMSNorm's sum of squares)
template <typename E, bool kSquares>
__global__ void row_sum_kernel(float* out, const E* inp, int64_t N, int C, bool vec) {
  const auto [n, lane] = warp_row();
  if (n >= N) return;  // the whole warp leaves together
  const E* x = inp + n * C;
  float s = 0.0f;
  for_packs(lane, kWarp, C, vec, [&](int i, int cnt, bool whole) {
    float a[kPack];
    load8(a, x + i, cnt, whole);  // the missing elements read as 0
#pragma unroll
    for (int j = 0; j < kPack; j++) s += kSquares ? a[j] * a[j] : a[j];
  });
  s = warp_sum(s);
  if (lane == 0) out[n] = s;
}

// --- LayerNorm ---

// mean[n]: the complete row sum in, the mean out; var[n] = this rank's sum of (x - mean)^2
template <typename E>
__global__ void layernorm_centred_squares_kernel(float* var, float* mean, const E* inp, int64_t N, int C,
                                                 float c_total, bool vec) {
  const auto [n, lane] = warp_row();
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
__global__ void layernorm_normalise_kernel(E* out, const float* mean, float* rstd, const E* inp, const E* weight,
                                           const E* bias, int64_t N, int C, float c_total, bool vec) {
  const auto [n, lane] = warp_row();
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
__global__ void layernorm_backward_sums_kernel(float* sums, const E* dout, const E* inp, const E* weight,
                                               const float* mean, const float* rstd, int64_t N, int C, bool vec) {
  const auto [n, lane] = warp_row();
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
__global__ void layernorm_backward_apply_kernel(E* dinp, const float* sums, const E* dout, const E* inp,
                                                const E* weight, const float* mean, const float* rstd, int64_t N, int C,
                                                float c_total, bool vec) {
  const auto [n, lane] = warp_row();
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

// --- RMSNorm ---

// rstd[n] <- 1/sqrt(rstd[n] / C_total + eps) (rstd holds the complete sum of squares on entry);
// out = inp * rstd * weight
template <typename E>
__global__ void rmsnorm_forward_kernel(E* out, float* rstd, const E* inp, const E* weight, int64_t N, int C,
                                       float c_total, float eps, bool vec) {
  const auto [n, lane] = warp_row();
  if (n >= N) return;
  const float r = 1.0f / sqrtf(rstd[n] / c_total + eps);  // every lane reads before lane 0 writes below
  __syncwarp();
  const E* x = inp + n * C;
  E* o = out + n * C;
  for_packs(lane, kWarp, C, vec, [&](int i, int cnt, bool whole) {
    float a[kPack], w[kPack];
    load8(a, x + i, cnt, whole);
    load8(w, weight + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++) a[j] = a[j] * r * w[j];
    store8(o + i, a, cnt, whole);
  });
  if (lane == 0) rstd[n] = r;
}

// dot[n] = sum_i dout[n, i] * weight[i] * inp[n, i]
template <typename E>
__global__ void rmsnorm_dot_kernel(float* dot, const E* dout, const E* inp, const E* weight, int64_t N, int C,
                                   bool vec) {
  const auto [n, lane] = warp_row();
  if (n >= N) return;
  const E* x = inp + n * C;
  const E* dy = dout + n * C;
  float s = 0.0f;
  for_packs(lane, kWarp, C, vec, [&](int i, int cnt, bool whole) {
    float g[kPack], w[kPack], a[kPack];
    load8(g, dy + i, cnt, whole);
    load8(w, weight + i, cnt, whole);
    load8(a, x + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++) s += g[j] * w[j] * a[j];
  });
  s = warp_sum(s);
  if (lane == 0) dot[n] = s;
}

// dinp += rstd (dout weight - inp rstd^2 dot / C_total)
template <typename E>
__global__ void rmsnorm_input_grad_kernel(E* dinp, const E* dout, const E* inp, const E* weight, const float* rstd,
                                          const float* dot, int64_t N, int C, float c_total, bool vec) {
  const auto [n, lane] = warp_row();
  if (n >= N) return;
  const float r = rstd[n], k = r * r * dot[n] / c_total;
  const E* x = inp + n * C;
  const E* dy = dout + n * C;
  E* dx = dinp + n * C;
  for_packs(lane, kWarp, C, vec, [&](int i, int cnt, bool whole) {
    float d[kPack], g[kPack], w[kPack], a[kPack];
    load8(d, dx + i, cnt, whole);
    load8(g, dy + i, cnt, whole);
    load8(w, weight + i, cnt, whole);
    load8(a, x + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++) d[j] += r * (g[j] * w[j] - a[j] * k);
    store8(dx + i, d, cnt, whole);
  });
}

}  // namespace axonn::kernels::cuda::norm_rows
