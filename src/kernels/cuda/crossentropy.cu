// kernels/cuda/crossentropy.cu — fused softmax + cross-entropy over a vocabulary slice, one block
// per row (the vocabulary is long: 50k columns for GPT-2), and its backward. A vocabulary sharded
// over ranks (a RowReducer) splits the forward into its passes, with the reducer's all_reduce
// completing the row max, the sum of exponentials and the target's logit (device arrays) in between.
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

// dlogits += (probs - onehot) * dloss * weights[n] over the valid columns (weights null: 1); in place
// (dlogits == probs) it overwrites instead and zeroes the padding, as kernels::ref.
__global__ void softmax_crossentropy_backward_kernel(float* dlogits, const float* probs, const int* targets,
                                                     const float* weights, float dloss, int Vvalid, int Vs,
                                                     int vocab_begin) {
  const int64_t n = blockIdx.x;
  float* dz = dlogits + n * Vs;
  const float* p = probs + n * Vs;
  const int t = targets[n] - vocab_begin;
  const float d = weights ? dloss * weights[n] : dloss;
  if (dz == p) {
    for (int i = threadIdx.x; i < Vs; i += blockDim.x)
      dz[i] = i < Vvalid ? (dz[i] - (i == t ? 1.0f : 0.0f)) * d : 0.0f;
  } else {
    for (int i = threadIdx.x; i < Vvalid; i += blockDim.x) dz[i] += (p[i] - (i == t ? 1.0f : 0.0f)) * d;
  }
}

// --- the passes of the sharded forward -----------------------------------------------------------
// maxv[n] = max of this rank's valid logits of row n (-1e30 when it holds none, as kernels::ref)
__global__ void row_max_kernel(float* maxv, const float* logits, int Vvalid, int Vs) {
  __shared__ float shared[kWarp];
  const int64_t n = blockIdx.x;
  const float* z = logits + n * Vs;
  float m = -1e30f;
  for (int i = threadIdx.x; i < Vvalid; i += blockDim.x) m = fmaxf(m, z[i]);
  m = block_reduce(m, shared, detail::MaxOp{}, -1e30f);
  if (threadIdx.x == 0) maxv[n] = m;
}

// With the global row max: p = exp(z - max) (padding 0), sum_target[n] = this rank's sum of them,
// sum_target[N + n] = the target's logit where this rank holds it, else 0. probs may alias logits.
__global__ void exp_sum_kernel(float* sum_target, float* probs, const float* logits, const float* maxv,
                               const int* targets, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  __shared__ float shared[kWarp];
  const int64_t n = blockIdx.x;
  const float* z = logits + n * Vs;
  float* p = probs + n * Vs;
  const int t = targets[n] - vocab_begin;
  const float target_logit = (t >= 0 && t < Vvalid) ? z[t] : 0.0f;
  const float m = maxv[n];
  __syncthreads();  // every thread has read the target's logit before any overwrites it
  float s = 0.0f;
  for (int i = threadIdx.x; i < Vs; i += blockDim.x) {
    const float e = i < Vvalid ? expf(z[i] - m) : 0.0f;
    p[i] = e;
    s += e;
  }
  s = block_reduce(s, shared, detail::SumOp{}, 0.0f);
  if (threadIdx.x == 0) {
    sum_target[n] = s;
    sum_target[N + n] = target_logit;
  }
}

// With the global sums: p /= sum; loss = log(sum) + max - logit(target)
__global__ void normalise_loss_kernel(float* losses, float* probs, const float* maxv, const float* sum_target,
                                      int64_t N, int Vvalid, int Vs) {
  const int64_t n = blockIdx.x;
  float* p = probs + n * Vs;
  const float s = sum_target[n];
  for (int i = threadIdx.x; i < Vvalid; i += blockDim.x) p[i] /= s;
  if (threadIdx.x == 0) losses[n] = logf(s) + maxv[n] - sum_target[N + n];
}

void check_rows(int64_t N) {
  AXONN_CHECK_ARG(N <= 0x7fffffffLL, "cuda cross-entropy: ", N, " rows exceed the grid; use smaller micro-batches");
}

}  // namespace

void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const int* targets, int64_t N,
                                  int Vvalid, int Vs, int vocab_begin, const RowReducer* reducer) {
  // losses [N], probs [N,Vs] (may alias logits), logits [N,Vs], targets [N]
  check_rows(N);
  if (reducer == nullptr) {
    if (N == 0) return;
    softmax_crossentropy_forward_kernel<<<static_cast<unsigned>(N), kThreads, 0, detail::stream()>>>(
        losses, probs, logits, targets, Vvalid, Vs, vocab_begin);
    AXONN_CUDA_CHECK_LAUNCH();
    return;
  }
  // Sharded vocabulary: [N] max | [N] sum of exponentials | [N] target logit, completed by the
  // reducer (every rank makes the same calls, even with N == 0 rows).
  auto* stats = static_cast<float*>(detail::scratch(sizeof(float) * 3 * static_cast<size_t>(N > 0 ? N : 1)));
  float* maxv = stats;
  float* sum_target = stats + N;
  const auto blocks = static_cast<unsigned>(N);
  if (N > 0) {
    row_max_kernel<<<blocks, kThreads, 0, detail::stream()>>>(maxv, logits, Vvalid, Vs);
    AXONN_CUDA_CHECK_LAUNCH();
  }
  reducer->all_reduce(reducer->ctx, maxv, N, true);  // the row max over the group
  if (N > 0) {
    exp_sum_kernel<<<blocks, kThreads, 0, detail::stream()>>>(sum_target, probs, logits, maxv, targets, N, Vvalid, Vs,
                                                             vocab_begin);
    AXONN_CUDA_CHECK_LAUNCH();
  }
  reducer->all_reduce(reducer->ctx, sum_target, 2 * N, false);  // the sums and the target logit over the group
  if (N > 0) {
    normalise_loss_kernel<<<blocks, kThreads, 0, detail::stream()>>>(losses, probs, maxv, sum_target, N, Vvalid, Vs);
    AXONN_CUDA_CHECK_LAUNCH();
  }
}

void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  // dlogits [N,Vs] (may alias probs), probs [N,Vs], targets [N], weights [N] (device memory) or null
  check_rows(N);
  if (N == 0) return;
  softmax_crossentropy_backward_kernel<<<static_cast<unsigned>(N), kThreads, 0, detail::stream()>>>(
      dlogits, probs, targets, weights, dloss, Vvalid, Vs, vocab_begin);
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace axonn::kernels::cuda
