// kernels/cpu/crossentropy.cpp — softmax and cross-entropy over a vocabulary-parallel row, in steps.
#include "row_ops.hpp"

namespace axonn::kernels::cpu {

using namespace detail;  // NOLINT: the shared row helpers (row_ops.hpp)

namespace {
// p[i] = exp(z[i] - m) for i < n, and their sum. Not inlined: the sums and the probabilities take the
// exponentials in two calls for a row (they are not kept between the caller's steps) and must get the same
// bits both times.
[[gnu::noinline]] float exp_and_sum(float* p, const float* z, int n, float m) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; i++) {
    p[i] = std::exp(z[i] - m);
    sum += p[i];
  }
  return sum;
}

// The cross-entropy's steps (ops.hpp): maxv[N], then sums[2N] = sum of exp | the target's logit, then
// probs and losses; the caller completes maxv and sums over the vocabulary-parallel group between them.
template <class E>
void crossentropy_max_impl(float* maxv, const E* logits, int64_t N, int Vvalid, int Vs) {
#pragma omp parallel
  {
    RowView<E> logit_row(Vvalid);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* z = logit_row.read(logits + n * Vs, Vvalid);
      float m = -1e30f;
#pragma omp simd reduction(max : m)
      for (int i = 0; i < Vvalid; i++) m = std::max(m, z[i]);
      maxv[n] = m;
    }
  }
}

template <class E>
void crossentropy_sums_impl(float* sums, const float* maxv, const E* logits, const int* targets, int64_t N,
                            int Vvalid, int Vs, int vocab_begin) {
#pragma omp parallel
  {
    RowView<E> logit_row(Vvalid);
    std::vector<float> exps(static_cast<size_t>(Vvalid));  // this thread's row of exponentials, not kept
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* z = logit_row.read(logits + n * Vs, Vvalid);
      int t = targets[n] - vocab_begin;
      sums[n] = exp_and_sum(exps.data(), z, Vvalid, maxv[n]);
      sums[N + n] = (t >= 0 && t < Vvalid) ? z[t] : 0.0f;
    }
  }
}

template <class E>
void softmax_crossentropy_forward_impl(float* losses, E* probs, const E* logits, const float* maxv,
                                       const float* sums, int64_t N, int Vvalid, int Vs) {
  // losses [N], probs [N,Vs] (may alias logits: each row is read before it is written), logits [N,Vs]
#pragma omp parallel
  {
    RowView<E> logit_row(Vvalid), prob_row(Vs);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* z = logit_row.read(logits + n * Vs, Vvalid);
      float* p = prob_row.write(probs + n * Vs);
      exp_and_sum(p, z, Vvalid, maxv[n]);  // the exponentials of crossentropy_sums, bit for bit
      float inv = 1.0f / sums[n];
#pragma omp simd
      for (int i = 0; i < Vvalid; i++) p[i] *= inv;
      for (int i = Vvalid; i < Vs; i++) p[i] = 0.0f;
      prob_row.commit(probs + n * Vs, Vs);
      // -log softmax(target) = log(sum exp) + max - logit(target)
      losses[n] = std::log(sums[n]) + maxv[n] - sums[N + n];
    }
  }
}

template <class E>
void softmax_crossentropy_backward_impl(E* dlogits, const E* probs, const int* targets, const float* weights,
                                        float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  // dlogits [N,Vs], probs [N,Vs], targets [N], weights [N] or null
  bool in_place = dlogits == probs;
#pragma omp parallel
  {
    RowView<E> dlogit_row(Vs), prob_row(Vvalid);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      float* dz = dlogit_row.update(dlogits + n * Vs, in_place ? Vvalid : Vs);
      const float d = weights ? dloss * weights[n] : dloss;
      if (in_place) {
#pragma omp simd
        for (int i = 0; i < Vvalid; i++) dz[i] = dz[i] * d;
        for (int i = Vvalid; i < Vs; i++) dz[i] = 0.0f;
      } else {
        const float* p = prob_row.read(probs + n * Vs, Vvalid);
#pragma omp simd
        for (int i = 0; i < Vvalid; i++) dz[i] += p[i] * d;
      }
      int t = targets[n] - vocab_begin;
      if (t >= 0 && t < Vvalid) dz[t] -= d;
      dlogit_row.commit(dlogits + n * Vs, Vs);
    }
  }
}
}  // namespace

void crossentropy_max(float* maxv, const float* logits, int64_t N, int Vvalid, int Vs) {
  crossentropy_max_impl(maxv, logits, N, Vvalid, Vs);
}
void crossentropy_max(float* maxv, const bf16* logits, int64_t N, int Vvalid, int Vs) {
  crossentropy_max_impl(maxv, logits, N, Vvalid, Vs);
}
void crossentropy_sums(float* sums, const float* maxv, const float* logits, const int* targets, int64_t N, int Vvalid,
                       int Vs, int vocab_begin) {
  crossentropy_sums_impl(sums, maxv, logits, targets, N, Vvalid, Vs, vocab_begin);
}
void crossentropy_sums(float* sums, const float* maxv, const bf16* logits, const int* targets, int64_t N, int Vvalid,
                       int Vs, int vocab_begin) {
  crossentropy_sums_impl(sums, maxv, logits, targets, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const float* maxv,
                                  const float* sums, int64_t N, int Vvalid, int Vs) {
  softmax_crossentropy_forward_impl(losses, probs, logits, maxv, sums, N, Vvalid, Vs);
}
void softmax_crossentropy_forward(float* losses, bf16* probs, const bf16* logits, const float* maxv, const float* sums,
                                  int64_t N, int Vvalid, int Vs) {
  softmax_crossentropy_forward_impl(losses, probs, logits, maxv, sums, N, Vvalid, Vs);
}
void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  softmax_crossentropy_backward_impl(dlogits, probs, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_backward(bf16* dlogits, const bf16* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  softmax_crossentropy_backward_impl(dlogits, probs, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}

}  // namespace axonn::kernels::cpu
