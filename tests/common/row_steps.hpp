// tests/common/row_steps.hpp — the model's steps of the ops whose row values a group completes between the
// kernels (LayerNorm's statistics over X, model/block.hpp; the cross-entropy's max and sums over X*Y,
// model/gpt.cpp), written once for the kernel tests of every table: ref, cpu and cuda, fp32 and bf16.
//
// `complete(values, n, max)` stands for the model's all-reduce over the group, in place on n fp32 values in
// the table's memory (host arrays, or device arrays for cuda): the maximum when `max`, else the sum. The
// default, WholeRows, is one rank holding whole rows: nothing to complete.
#pragma once

#include <cstdint>
#include <vector>

namespace axonn::test {

struct WholeRows {
  void operator()(float*, int64_t, bool) const {}
};

// LayerNorm forward over rows of C_total channels of which the table's buffers hold C.
template <class Table, class E, class Complete = WholeRows>
void layernorm_steps(const Table& t, E* out, float* mean, float* rstd, const E* x, const E* w, const E* b, int64_t N,
                     int C, int C_total, const Complete& complete = Complete{}) {
  t.layernorm_sum(mean, x, N, C);
  complete(mean, N, false);
  t.layernorm_centred_sumsq(rstd, mean, x, N, C, C_total);
  complete(rstd, N, false);
  t.layernorm_forward(out, mean, rstd, x, w, b, N, C, C_total);
}

// LayerNorm backward; `sums` [2N] fp32 in the table's memory.
template <class Table, class E, class Complete = WholeRows>
void layernorm_backward_steps(const Table& t, float* sums, E* dx, float* dw, float* db, const E* dy, const E* x,
                              const E* w, const float* mean, const float* rstd, int64_t N, int C, int C_total,
                              const Complete& complete = Complete{}) {
  t.layernorm_backward_sums(sums, dy, x, w, mean, rstd, N, C);
  complete(sums, 2 * N, false);
  t.layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, sums, N, C, C_total);
}

// The cross-entropy's row values over this table's Vs columns of each row (ids from vocab_begin, the first
// Vvalid real), each completed over the group: `row_values` [3N] fp32 in the table's memory: max | sum of exp |
// target logit.
template <class Table, class E, class Complete = WholeRows>
void crossentropy_row_values(const Table& t, float* row_values, const E* logits, const int* targets, int64_t N,
                             int Vvalid, int Vs, int vocab_begin, const Complete& complete = Complete{}) {
  float* maxv = row_values;
  float* sums = row_values + N;
  t.crossentropy_max(maxv, logits, N, Vvalid, Vs);
  complete(maxv, N, true);
  t.crossentropy_sums(sums, maxv, logits, targets, N, Vvalid, Vs, vocab_begin);
  complete(sums, 2 * N, false);
}

// The softmax + cross-entropy forward: the row values, then the probabilities and the losses.
template <class Table, class E, class Complete = WholeRows>
void crossentropy_steps(const Table& t, float* row_values, float* losses, E* probs, const E* logits,
                        const int* targets, int64_t N, int Vvalid, int Vs, int vocab_begin,
                        const Complete& complete = Complete{}) {
  crossentropy_row_values(t, row_values, logits, targets, N, Vvalid, Vs, vocab_begin, complete);
  t.softmax_crossentropy_forward(losses, probs, logits, row_values, row_values + N, N, Vvalid, Vs);
}

// A training chunk's: the row values, then the losses and the gradient in one pass.
template <class Table, class E, class Complete = WholeRows>
void crossentropy_gradient_steps(const Table& t, float* row_values, float* losses, E* dlogits, const E* logits,
                                 const int* targets, const float* weights, float dloss, int64_t N, int Vvalid, int Vs,
                                 int vocab_begin, const Complete& complete = Complete{}) {
  crossentropy_row_values(t, row_values, logits, targets, N, Vvalid, Vs, vocab_begin, complete);
  t.softmax_crossentropy_forward_backward(losses, dlogits, logits, row_values, row_values + N, targets, weights, dloss,
                                          N, Vvalid, Vs, vocab_begin);
}

// The same on host tables, with their scratch on the host: whole rows unless `complete` says otherwise.
template <class Table, class E, class Complete = WholeRows>
void layernorm_rows_backward(const Table& t, E* dx, float* dw, float* db, const E* dy, const E* x, const E* w,
                             const float* mean, const float* rstd, int64_t N, int C, int C_total,
                             const Complete& complete = Complete{}) {
  std::vector<float> sums(2 * static_cast<size_t>(N));
  layernorm_backward_steps(t, sums.data(), dx, dw, db, dy, x, w, mean, rstd, N, C, C_total, complete);
}
template <class Table, class E, class Complete = WholeRows>
void crossentropy_rows(const Table& t, float* losses, E* probs, const E* logits, const int* targets, int64_t N,
                       int Vvalid, int Vs, int vocab_begin = 0, const Complete& complete = Complete{}) {
  std::vector<float> row_values(3 * static_cast<size_t>(N));
  crossentropy_steps(t, row_values.data(), losses, probs, logits, targets, N, Vvalid, Vs, vocab_begin, complete);
}
template <class Table, class E, class Complete = WholeRows>
void crossentropy_rows_gradient(const Table& t, float* losses, E* dlogits, const E* logits, const int* targets,
                                const float* weights, float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin = 0,
                                const Complete& complete = Complete{}) {
  std::vector<float> row_values(3 * static_cast<size_t>(N));
  crossentropy_gradient_steps(t, row_values.data(), losses, dlogits, logits, targets, weights, dloss, N, Vvalid, Vs,
                              vocab_begin, complete);
}

}  // namespace axonn::test
