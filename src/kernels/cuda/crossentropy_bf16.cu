// kernels/cuda/crossentropy_bf16.cu — fused softmax + cross-entropy over a bf16 vocabulary slice, one block
// per row; fp32 max, sum and loss, probabilities rounded once to bf16.
//
// With a RowReducer (vocabulary sharded over ranks) the row is done in passes, and the reducer completes
// the per-row values in between, on DEVICE arrays: pass 1 row max -> maxv[N]; reduce (max); pass 2 sum of
// exponentials and the target's logit (0 where not held) -> st[2N]; reduce (sum); pass 3 probabilities and
// loss. Without one, a single fused pass does all of it. Same formulas and order as kernels::ref.
#include "bf16.cuh"

namespace axonn::kernels::cuda_bf16 {
namespace {

using detail::kWarp;
using detail::widen;
using kernels::cuda::detail::block_reduce;
using kernels::cuda::detail::MaxOp;
using kernels::cuda::detail::SumOp;

constexpr int kThreads = 512;

enum Pass : int { kFused = 0, kMax = 1, kSum = 2, kApply = 3 };

// probs may alias logits: the target's logit is read before any write (block_reduce syncs in between),
// and every element is read and then written by the same thread.
__global__ void softmax_crossentropy_forward_kernel(float* losses, uint16_t* probs, const uint16_t* logits,
                                                    const int* targets, float* maxv, float* st, int64_t N,
                                                    int Vvalid, int Vs, int vocab_begin, int pass) {
  __shared__ float shared[kWarp];
  const int64_t n = blockIdx.x;
  const uint16_t* z = logits + n * Vs;
  uint16_t* p = probs + n * Vs;
  const int t = targets[n] - vocab_begin;
  float m;
  if (pass == kFused || pass == kMax) {
    m = -1e30f;  // as kernels::ref
    for (int i = threadIdx.x; i < Vvalid; i += blockDim.x) m = fmaxf(m, widen(z[i]));
    m = block_reduce(m, shared, MaxOp{}, -1e30f);
    if (pass == kMax) {
      if (threadIdx.x == 0) maxv[n] = m;
      return;
    }
  } else {
    m = maxv[n];
  }
  float s, target_logit;
  if (pass == kApply) {
    s = st[n];
    target_logit = st[N + n];
  } else {
    target_logit = (t >= 0 && t < Vvalid) ? widen(z[t]) : 0.0f;
    s = 0.0f;
    for (int i = threadIdx.x; i < Vvalid; i += blockDim.x) s += expf(widen(z[i]) - m);
    s = block_reduce(s, shared, SumOp{}, 0.0f);  // syncs: every read of z[t] is done before the writes
    if (pass == kSum) {
      if (threadIdx.x == 0) {
        st[n] = s;
        st[N + n] = target_logit;
      }
      return;
    }
  }
  for (int i = threadIdx.x; i < Vs; i += blockDim.x)
    p[i] = i < Vvalid ? detail::round_bf16(expf(widen(z[i]) - m) / s) : uint16_t{0};
  if (threadIdx.x == 0) losses[n] = logf(s) + m - target_logit;
}

// dlogits += (probs - onehot) * dloss * weights[n] over the valid columns (weights null: 1; sum in fp32,
// rounded once); in place (dlogits == probs) it overwrites instead and zeroes the padding, as kernels::ref.
__global__ void softmax_crossentropy_backward_kernel(uint16_t* dlogits, const uint16_t* probs, const int* targets,
                                                     const float* weights, float dloss, int Vvalid, int Vs,
                                                     int vocab_begin) {
  const int64_t n = blockIdx.x;
  uint16_t* dz = dlogits + n * Vs;
  const uint16_t* p = probs + n * Vs;
  const int t = targets[n] - vocab_begin;
  const float d = weights ? dloss * weights[n] : dloss;
  if (dz == p) {
    for (int i = threadIdx.x; i < Vs; i += blockDim.x)
      dz[i] = i < Vvalid ? detail::round_bf16((widen(dz[i]) - (i == t ? 1.0f : 0.0f)) * d) : uint16_t{0};
  } else {
    for (int i = threadIdx.x; i < Vvalid; i += blockDim.x)
      dz[i] = detail::round_bf16(widen(dz[i]) + (widen(p[i]) - (i == t ? 1.0f : 0.0f)) * d);
  }
}

void check_rows(int64_t N) {
  AXONN_CHECK_ARG(N <= 0x7fffffffLL, "cuda bf16 cross-entropy: ", N,
                  " rows exceed the grid; use smaller micro-batches");
}

}  // namespace

void softmax_crossentropy_forward(float* losses, bf16* probs, const bf16* logits, const int* targets, int64_t N,
                                  int Vvalid, int Vs, int vocab_begin, const RowReducer* reducer) {
  // losses [N] fp32, probs [N,Vs] (may alias logits), logits [N,Vs], targets [N]
  check_rows(N);
  if (N == 0) return;
  float* maxv = nullptr;
  float* st = nullptr;
  auto pass = [&](int p) {
    softmax_crossentropy_forward_kernel<<<static_cast<unsigned>(N), kThreads, 0, detail::stream()>>>(
        losses, probs, logits, targets, maxv, st, N, Vvalid, Vs, vocab_begin, p);
    AXONN_CUDA_CHECK_LAUNCH();
  };
  if (reducer == nullptr) return pass(kFused);
  maxv = static_cast<float*>(detail::scratch(3 * static_cast<size_t>(N) * sizeof(float)));
  st = maxv + N;
  pass(kMax);
  reducer->all_reduce(reducer->ctx, maxv, N, true);
  pass(kSum);
  reducer->all_reduce(reducer->ctx, st, 2 * N, false);
  pass(kApply);
}

void softmax_crossentropy_backward(bf16* dlogits, const bf16* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  // dlogits [N,Vs] (may alias probs), probs [N,Vs], targets [N], weights [N] (device memory) or null
  check_rows(N);
  if (N == 0) return;
  softmax_crossentropy_backward_kernel<<<static_cast<unsigned>(N), kThreads, 0, detail::stream()>>>(
      dlogits, probs, targets, weights, dloss, Vvalid, Vs, vocab_begin);
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace axonn::kernels::cuda_bf16
