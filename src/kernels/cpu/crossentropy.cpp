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

// Row helpers shared by the forward, the backward and the two in one pass, so that each gives the same bits (not
// inlined: the same machine code, vectorised once, whichever op calls them).
// p[0, Vs) = the row's probabilities exp(z - max) / sum, padding 0 (p may be z's row: each element is read
// before it is written).
[[gnu::noinline]] void probabilities_of_row(float* p, const float* z, int Vvalid, int Vs, float max, float sum) {
  exp_and_sum(p, z, Vvalid, max);  // the exponentials of crossentropy_sums, bit for bit
  float inv = 1.0f / sum;
#pragma omp simd
  for (int i = 0; i < Vvalid; i++) p[i] *= inv;
  for (int i = Vvalid; i < Vs; i++) p[i] = 0.0f;
}
// In place, from the row's probabilities: dz = (p - onehot(t)) * d over the valid columns, padding 0.
[[gnu::noinline]] void gradient_in_place(float* dz, int Vvalid, int Vs, float d, int t) {
#pragma omp simd
  for (int i = 0; i < Vvalid; i++) dz[i] = dz[i] * d;
  for (int i = Vvalid; i < Vs; i++) dz[i] = 0.0f;
  if (t >= 0 && t < Vvalid) dz[t] -= d;
}
// -log softmax(target) = log(sum exp) + max - logit(target)
float row_loss(const float* maxv, const float* sums, int64_t N, int64_t n) {
  return std::log(sums[n]) + maxv[n] - sums[N + n];
}

// The forward: each row's probabilities over the logits' row (out may alias logits: each row is read before it is
// written) and its loss. With kGradient, softmax_crossentropy_forward_backward: the backward in place follows on
// the row while it is in this thread's buffer (in cache), instead of going to memory and back; in bf16 the
// probabilities are rounded as the forward stores them first, so the gradient has the two steps' bits.
template <class E, bool kGradient>
void forward_rows(float* losses, E* out, const E* logits, const float* maxv, const float* sums, const int* targets,
                  const float* weights, float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
#pragma omp parallel
  {
    RowView<E> logit_row(Vvalid), out_row(Vs);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* z = logit_row.read(logits + n * Vs, Vvalid);
      float* p = out_row.write(out + n * Vs);
      probabilities_of_row(p, z, Vvalid, Vs, maxv[n], sums[n]);
      losses[n] = row_loss(maxv, sums, N, n);
      if constexpr (kGradient) {
        if constexpr (!kIsF32<E>) {
#pragma omp simd
          for (int i = 0; i < Vvalid; i++) p[i] = bf16_to_f32(f32_to_bf16(p[i]));
        }
        gradient_in_place(p, Vvalid, Vs, weights ? dloss * weights[n] : dloss, targets[n] - vocab_begin);
      }
      out_row.commit(out + n * Vs, Vs);
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
      const int t = targets[n] - vocab_begin;
      if (in_place) {
        gradient_in_place(dz, Vvalid, Vs, d, t);
      } else {
        const float* p = prob_row.read(probs + n * Vs, Vvalid);
#pragma omp simd
        for (int i = 0; i < Vvalid; i++) dz[i] += p[i] * d;
        if (t >= 0 && t < Vvalid) dz[t] -= d;
      }
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
  forward_rows<float, false>(losses, probs, logits, maxv, sums, nullptr, nullptr, 0.0f, N, Vvalid, Vs, 0);
}
void softmax_crossentropy_forward(float* losses, bf16* probs, const bf16* logits, const float* maxv, const float* sums,
                                  int64_t N, int Vvalid, int Vs) {
  forward_rows<bf16, false>(losses, probs, logits, maxv, sums, nullptr, nullptr, 0.0f, N, Vvalid, Vs, 0);
}
void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  softmax_crossentropy_backward_impl(dlogits, probs, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_backward(bf16* dlogits, const bf16* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  softmax_crossentropy_backward_impl(dlogits, probs, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_forward_backward(float* losses, float* dlogits, const float* logits, const float* maxv,
                                           const float* sums, const int* targets, const float* weights, float dloss,
                                           int64_t N, int Vvalid, int Vs, int vocab_begin) {
  forward_rows<float, true>(losses, dlogits, logits, maxv, sums, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_forward_backward(float* losses, bf16* dlogits, const bf16* logits, const float* maxv,
                                           const float* sums, const int* targets, const float* weights, float dloss,
                                           int64_t N, int Vvalid, int Vs, int vocab_begin) {
  forward_rows<bf16, true>(losses, dlogits, logits, maxv, sums, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}

}  // namespace axonn::kernels::cpu
