// kernels/cuda/layernorm_bf16.cu — LayerNorm in bf16 (statistics and parameter gradients fp32), one warp
// per row, the same two-pass statistics as kernels::ref.
//
// With a RowReducer (channels sharded over ranks) the kernel runs in its passes and the reducer completes
// the per-row partial sums in between, on DEVICE arrays (the row statistics live in the kernels' memory):
//   forward:  pass 1 sum(x) -> mean[n]; reduce; pass 2 mean /= C_total, centred sum of squares -> rstd[n];
//             reduce; pass 3 rstd = 1/sqrt(.../C_total + eps), write out.
//   backward: pass 1 sum(dnorm), sum(dnorm * xhat) -> scratch[2N]; reduce; pass 2 write dinp.
// Without one, a single fused pass does all of it.
#include "bf16.cuh"
#include "columns.cuh"

namespace axonn::kernels::cuda_bf16 {
namespace {

using detail::kWarp;
using detail::widen;
using kernels::cuda::detail::warp_sum;

constexpr float kLayerNormEps = 1e-5f;
constexpr int kRowsPerBlock = 8;  // warps per block: 256 threads

enum Pass : int { kFused = 0, kSum = 1, kCentred = 2, kApply = 3 };

__global__ void layernorm_forward_kernel(uint16_t* out, float* mean, float* rstd, const uint16_t* inp,
                                         const uint16_t* weight, const uint16_t* bias, int64_t N, int C,
                                         float c_total, int pass) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;  // the whole warp leaves together
  const uint16_t* x = inp + n * C;
  float m;
  if (pass == kFused || pass == kSum) {
    float s = 0.0f;
    for (int i = lane; i < C; i += kWarp) s += widen(x[i]);
    s = warp_sum(s);
    if (pass == kSum) {
      if (lane == 0) mean[n] = s;  // partial: the reducer completes it
      return;
    }
    m = s / c_total;
  } else {
    m = pass == kCentred ? mean[n] / c_total : mean[n];
  }
  float r;
  if (pass == kFused || pass == kCentred) {
    float v = 0.0f;
    for (int i = lane; i < C; i += kWarp) {
      const float d = widen(x[i]) - m;
      v += d * d;
    }
    v = warp_sum(v);  // every lane has read mean[n] before lane 0 overwrites it below
    if (pass == kCentred) {
      if (lane == 0) {
        mean[n] = m;
        rstd[n] = v;  // partial
      }
      return;
    }
    r = 1.0f / sqrtf(v / c_total + kLayerNormEps);
  } else {
    r = 1.0f / sqrtf(rstd[n] / c_total + kLayerNormEps);
    __syncwarp();  // every lane has read rstd[n]
  }
  uint16_t* o = out + n * C;
  for (int i = lane; i < C; i += kWarp)
    o[i] = detail::round_bf16(r * (widen(x[i]) - m) * widen(weight[i]) + widen(bias[i]));
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

// dinp += (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)) * rstd, dnorm = weight * dout; the sum with
// the old bf16 value is formed in fp32 and rounded once. kSum writes the two partial sums to sums[n] and
// sums[N + n]; kApply reads them completed.
__global__ void layernorm_backward_input_kernel(uint16_t* dinp, float* sums, const uint16_t* dout,
                                                const uint16_t* inp, const uint16_t* weight, const float* mean,
                                                const float* rstd, int64_t N, int C, float c_total, int pass) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const uint16_t* x = inp + n * C;
  const uint16_t* dy = dout + n * C;
  const float m = mean[n], r = rstd[n];
  float s1, s2;
  if (pass == kApply) {
    s1 = sums[n];
    s2 = sums[N + n];
  } else {
    s1 = 0.0f;
    s2 = 0.0f;
    for (int i = lane; i < C; i += kWarp) {
      const float dnorm = widen(weight[i]) * widen(dy[i]);
      s1 += dnorm;
      s2 += dnorm * ((widen(x[i]) - m) * r);
    }
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    if (pass == kSum) {
      if (lane == 0) {
        sums[n] = s1;
        sums[N + n] = s2;
      }
      return;
    }
  }
  const float dnorm_mean = s1 / c_total, dnorm_norm_mean = s2 / c_total;
  uint16_t* dx = dinp + n * C;
  for (int i = lane; i < C; i += kWarp) {
    const float xhat = (widen(x[i]) - m) * r;
    const float d = (widen(weight[i]) * widen(dy[i]) - dnorm_mean - xhat * dnorm_norm_mean) * r;
    dx[i] = detail::round_bf16(widen(dx[i]) + d);
  }
}

unsigned row_blocks(int64_t N) {
  const int64_t blocks = (N + kRowsPerBlock - 1) / kRowsPerBlock;
  AXONN_CHECK_ARG(blocks <= 0x7fffffffLL, "cuda bf16 layernorm: ", N,
                  " rows exceed the grid; use smaller micro-batches");
  return static_cast<unsigned>(blocks);
}

}  // namespace

void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias,
                       int64_t N, int C, int C_total, const RowReducer* reducer) {
  // out [N,C], mean [N], rstd [N] fp32, inp [N,C], weight [C], bias [C]; rows of C_total channels
  if (N == 0) return;
  const float ct = static_cast<float>(C_total);
  auto pass = [&](int p) {
    layernorm_forward_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, detail::stream()>>>(
        out, mean, rstd, inp, weight, bias, N, C, ct, p);
    AXONN_CUDA_CHECK_LAUNCH();
  };
  if (reducer == nullptr) return pass(kFused);
  pass(kSum);
  reducer->all_reduce(reducer->ctx, mean, N, false);
  pass(kCentred);
  reducer->all_reduce(reducer->ctx, rstd, N, false);
  pass(kApply);
}

void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const bf16* weight, const float* mean, const float* rstd, int64_t N, int C, int C_total,
                        const RowReducer* reducer) {
  // dinp [N,C] (added to), dweight [C], dbias [C] fp32 (added to), dout [N,C], inp [N,C], weight [C],
  // mean [N], rstd [N]
  if (N == 0 || C == 0) return;
  const float ct = static_cast<float>(C_total);
  float* sums = nullptr;
  auto pass = [&](int p) {
    layernorm_backward_input_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, detail::stream()>>>(
        dinp, sums, dout, inp, weight, mean, rstd, N, C, ct, p);
    AXONN_CUDA_CHECK_LAUNCH();
  };
  if (reducer == nullptr) {
    pass(kFused);
  } else {
    sums = static_cast<float*>(detail::scratch(2 * static_cast<size_t>(N) * sizeof(float)));
    pass(kSum);
    reducer->all_reduce(reducer->ctx, sums, 2 * N, false);
    pass(kApply);
  }
  kernels::cuda::detail::layernorm_params_accumulate(dweight, dbias, dout, inp, mean, rstd, N, C);
}

}  // namespace axonn::kernels::cuda_bf16
