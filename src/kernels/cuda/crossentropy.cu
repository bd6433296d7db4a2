// kernels/cuda/crossentropy.cu — fused softmax + cross-entropy over a vocabulary slice, one block
// per row (the vocabulary is long: 50k columns for GPT-2), and its backward.
#include "axonn/kernels/ops.hpp"
#include "common.cuh"

namespace axonn::kernels::cuda {
namespace {

using detail::block_reduce;
using detail::kWarp;

constexpr int kThreads = 512;

// Row n: max over the valid columns, sum of exponentials, probabilities (padding zeroed), and the
// loss log(sum) + max - logit(target). probs may alias logits: the target's logit is read before
// the row is overwritten, and every element is read and then written by the same thread.
__global__ void softmax_crossentropy_forward_kernel(float* losses, float* probs, const float* logits,
                                                    const int* targets, int Vvalid, int Vs, int vocab_begin) {
  __shared__ float shared[kWarp];
  const int64_t n = blockIdx.x;
  const float* z = logits + n * Vs;
  float* p = probs + n * Vs;
  const int t = targets[n] - vocab_begin;
  const float target_logit = (t >= 0 && t < Vvalid) ? z[t] : 0.0f;  // read by every thread, before any write
  float m = -1e30f;  // as kernels::ref
  for (int i = threadIdx.x; i < Vvalid; i += blockDim.x) m = fmaxf(m, z[i]);
  m = block_reduce(m, shared, detail::MaxOp{}, -1e30f);
  float s = 0.0f;
  for (int i = threadIdx.x; i < Vvalid; i += blockDim.x) s += expf(z[i] - m);
  s = block_reduce(s, shared, detail::SumOp{}, 0.0f);  // syncs: every read of z is done before the writes
  for (int i = threadIdx.x; i < Vs; i += blockDim.x) p[i] = i < Vvalid ? expf(z[i] - m) / s : 0.0f;
  if (threadIdx.x == 0) losses[n] = logf(s) + m - target_logit;
}

// dlogits += (probs - onehot) * dloss over the valid columns; in place (dlogits == probs) it
// overwrites instead and zeroes the padding, as kernels::ref.
__global__ void softmax_crossentropy_backward_kernel(float* dlogits, const float* probs, const int* targets,
                                                     float dloss, int Vvalid, int Vs, int vocab_begin) {
  const int64_t n = blockIdx.x;
  float* dz = dlogits + n * Vs;
  const float* p = probs + n * Vs;
  const int t = targets[n] - vocab_begin;
  if (dz == p) {
    for (int i = threadIdx.x; i < Vs; i += blockDim.x)
      dz[i] = i < Vvalid ? (dz[i] - (i == t ? 1.0f : 0.0f)) * dloss : 0.0f;
  } else {
    for (int i = threadIdx.x; i < Vvalid; i += blockDim.x) dz[i] += (p[i] - (i == t ? 1.0f : 0.0f)) * dloss;
  }
}

void check_rows(int64_t N) {
  AXONN_CHECK_ARG(N <= 0x7fffffffLL, "cuda cross-entropy: ", N, " rows exceed the grid; use smaller micro-batches");
}

}  // namespace

void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const int* targets, int64_t N,
                                  int Vvalid, int Vs, int vocab_begin, const RowReducer* reducer) {
  // losses [N], probs [N,Vs] (may alias logits), logits [N,Vs], targets [N]
  detail::require_no_reducer(reducer, "softmax_crossentropy_forward");
  check_rows(N);
  if (N == 0) return;
  softmax_crossentropy_forward_kernel<<<static_cast<unsigned>(N), kThreads, 0, detail::stream()>>>(
      losses, probs, logits, targets, Vvalid, Vs, vocab_begin);
  AXONN_CUDA_CHECK_LAUNCH();
}

void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets, float dloss, int64_t N,
                                   int Vvalid, int Vs, int vocab_begin) {
  // dlogits [N,Vs] (may alias probs), probs [N,Vs], targets [N]
  check_rows(N);
  if (N == 0) return;
  softmax_crossentropy_backward_kernel<<<static_cast<unsigned>(N), kThreads, 0, detail::stream()>>>(
      dlogits, probs, targets, dloss, Vvalid, Vs, vocab_begin);
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace axonn::kernels::cuda
