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

// dweight[c] += sum_n xhat * dout, dbias[c] += sum_n dout (fp32). Block (32, 8) over 32 columns and a
// chunk of rows; one atomic per column per block (as the fp32 kernel).
constexpr int kColThreadsY = 8;
__global__ void layernorm_backward_params_kernel(float* dweight, float* dbias, const uint16_t* dout,
                                                 const uint16_t* inp, const float* mean, const float* rstd,
                                                 int64_t N, int C, int64_t rows_per_block) {
  __shared__ float sw[kColThreadsY][kWarp + 1], sb[kColThreadsY][kWarp + 1];
  const int c = blockIdx.x * kWarp + threadIdx.x;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  const int64_t n1 = n0 + rows_per_block < N ? n0 + rows_per_block : N;
  float aw = 0.0f, ab = 0.0f;
  if (c < C)
    for (int64_t n = n0 + threadIdx.y; n < n1; n += kColThreadsY) {
      const float dy = widen(dout[n * C + c]);
      aw += (widen(inp[n * C + c]) - mean[n]) * rstd[n] * dy;
      ab += dy;
    }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int y = 1; y < kColThreadsY; y++) {
      aw += sw[y][threadIdx.x];
      ab += sb[y][threadIdx.x];
    }
    atomicAdd(&dweight[c], aw);
    atomicAdd(&dbias[c], ab);
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
  int64_t rows_per_block = 256;
  if ((N + rows_per_block - 1) / rows_per_block > 65535) rows_per_block = (N + 65534) / 65535;
  const dim3 grid(static_cast<unsigned>((C + kWarp - 1) / kWarp),
                  static_cast<unsigned>((N + rows_per_block - 1) / rows_per_block));
  layernorm_backward_params_kernel<<<grid, dim3(kWarp, kColThreadsY), 0, detail::stream()>>>(
      dweight, dbias, dout, inp, mean, rstd, N, C, rows_per_block);
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace axonn::kernels::cuda_bf16
