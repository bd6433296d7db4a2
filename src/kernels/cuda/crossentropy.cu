// kernels/cuda/crossentropy.cu — softmax + cross-entropy over a vocabulary slice (kernels/ops.hpp,
// ops_bf16.hpp) on device pointers, fp32 and bf16 from the same templates, in the caller's steps: the model
// completes each row value over the vocabulary's group X*Y (device arrays) between them (model/gpt.cpp):
//   crossentropy_max: this rank's row max -> maxv[n]; (all-reduce, max)
//   crossentropy_sums: with the max, sum of exp(z - max) -> sums[n], the target's logit (0 where this rank
//                      does not hold it) -> sums[N + n]; (all-reduce, sum)
//   softmax_crossentropy_forward: probabilities exp(z - max) / sum (padding zeroed), loss log(sum) + max -
//                                 logit(target);
//   or, where the gradient is taken at once, softmax_crossentropy_forward_backward: the loss and the gradient
//                                 (probs - onehot) * dloss * weight in one pass, the probabilities never stored.
// The kernels (a block per row, packs of 8) are crossentropy_rows.cuh's.
#include "axonn/kernels/ops.hpp"
#include "crossentropy_rows.cuh"

namespace axonn::kernels::cuda {
namespace {

using detail::rows_aligned16;
namespace rows = crossentropy_rows;

// --- launches, one set for each element type -------------------------------------------------

template <typename E>
void max_of(float* maxv, const E* logits, int64_t N, int Vvalid, int Vs) {
  if (N == 0) return;
  rows::row_max_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      maxv, logits, Vvalid, Vs, rows_aligned16<E>(Vs, {logits}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void sums_of(float* sums, const float* maxv, const E* logits, const int* targets, int64_t N, int Vvalid, int Vs,
             int vocab_begin) {
  if (N == 0) return;
  rows::exp_sum_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      sums, maxv, logits, targets, N, Vvalid, Vs, vocab_begin, rows_aligned16<E>(Vs, {logits}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void probs_and_losses(float* losses, E* probs, const E* logits, const float* maxv, const float* sums, int64_t N,
                      int Vvalid, int Vs) {
  if (N == 0) return;
  rows::probs_loss_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      losses, probs, logits, maxv, sums, N, Vvalid, Vs, rows_aligned16<E>(Vs, {probs, logits}));
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void gradient_of(E* dlogits, const E* probs, const int* targets, const float* weights, float dloss, int64_t N,
                 int Vvalid, int Vs, int vocab_begin) {
  if (N == 0) return;
  rows::softmax_crossentropy_backward_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      dlogits, probs, targets, weights, dloss, Vvalid, Vs, vocab_begin, rows_aligned16<E>(Vs, {dlogits, probs}));
  AXONN_CUDA_CHECK_LAUNCH();
}

template <typename E>
void probs_losses_and_gradient(float* losses, E* dlogits, const E* logits, const float* maxv, const float* sums,
                               const int* targets, const float* weights, float dloss, int64_t N, int Vvalid, int Vs,
                               int vocab_begin) {
  if (N == 0) return;
  rows::probs_loss_gradient_kernel<E><<<rows::row_blocks(N), rows::kThreads, 0, detail::stream()>>>(
      losses, dlogits, logits, maxv, sums, targets, weights, dloss, N, Vvalid, Vs, vocab_begin,
      rows_aligned16<E>(Vs, {dlogits, logits}));
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void crossentropy_max(float* maxv, const float* logits, int64_t N, int Vvalid, int Vs) {
  max_of(maxv, logits, N, Vvalid, Vs);
}
void crossentropy_sums(float* sums, const float* maxv, const float* logits, const int* targets, int64_t N, int Vvalid,
                       int Vs, int vocab_begin) {
  sums_of(sums, maxv, logits, targets, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const float* maxv,
                                  const float* sums, int64_t N, int Vvalid, int Vs) {
  probs_and_losses(losses, probs, logits, maxv, sums, N, Vvalid, Vs);
}
void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  gradient_of(dlogits, probs, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_forward_backward(float* losses, float* dlogits, const float* logits, const float* maxv,
                                           const float* sums, const int* targets, const float* weights, float dloss,
                                           int64_t N, int Vvalid, int Vs, int vocab_begin) {
  probs_losses_and_gradient(losses, dlogits, logits, maxv, sums, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}

}  // namespace axonn::kernels::cuda

// bf16 (kernels/ops_bf16.hpp)
namespace axonn::kernels::cuda_bf16 {

void crossentropy_max(float* maxv, const bf16* logits, int64_t N, int Vvalid, int Vs) {
  cuda::max_of(maxv, logits, N, Vvalid, Vs);
}
void crossentropy_sums(float* sums, const float* maxv, const bf16* logits, const int* targets, int64_t N, int Vvalid,
                       int Vs, int vocab_begin) {
  cuda::sums_of(sums, maxv, logits, targets, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_forward(float* losses, bf16* probs, const bf16* logits, const float* maxv, const float* sums,
                                  int64_t N, int Vvalid, int Vs) {
  cuda::probs_and_losses(losses, probs, logits, maxv, sums, N, Vvalid, Vs);
}
void softmax_crossentropy_backward(bf16* dlogits, const bf16* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  cuda::gradient_of(dlogits, probs, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_forward_backward(float* losses, bf16* dlogits, const bf16* logits, const float* maxv,
                                           const float* sums, const int* targets, const float* weights, float dloss,
                                           int64_t N, int Vvalid, int Vs, int vocab_begin) {
  cuda::probs_losses_and_gradient(losses, dlogits, logits, maxv, sums, targets, weights, dloss, N, Vvalid, Vs,
                                  vocab_begin);
}

}  // namespace axonn::kernels::cuda_bf16
