// kernels/cuda/crossentropy_rows.cuh — the softmax + cross-entropy kernels over a vocabulary slice
// (crossentropy.cu launches them), fp32 and bf16 from the same templates: one block per row (the vocabulary is
// long: 50k columns for GPT-2), its threads over the row in packs of 8 (packs.cuh: 16-byte loads and stores
// where the rows are aligned), a block reduction for the row's max and sum. Same formulas as kernels::ref,
// fp32 math throughout; a bf16 probability or gradient is rounded once. Builds for the SIMT emulator as well
// (tests/unit/cuda_emu runs these kernels on the CPU against kernels::ref).
#pragma once

#include <cmath>
#include <cstdint>

#include "axonn/core/error.hpp"
#include "columns.cuh"
#include "common.cuh"
#include "packs.cuh"

namespace axonn::kernels::cuda::crossentropy_rows {

using detail::block_reduce;
using detail::for_packs;
using detail::kPack;
using detail::kWarp;
using detail::load8;
using detail::load_f32;
using detail::store8;
using detail::store_f32;

constexpr unsigned kThreads = 512;

// The launch's blocks for N rows: one each.
inline unsigned row_blocks(int64_t N) {
  AXONN_CHECK_ARG(N <= 0x7fffffffLL, "cuda cross-entropy: ", N, " rows exceed the grid; use smaller micro-batches");
  return static_cast<unsigned>(N);
}

// Each kernel's threads take the packs of 8 of its row in turn (for_packs): one 16-byte load per pack where the
// rows are aligned, so a block has 8 KiB of a row in flight per round, where single elements gave it 1 KiB (by
// Little's law the memory's latency, not its bandwidth, then bounds these passes over B*T*V logits;
// docs/gpu.md).
// maxv[n] = max of this rank's valid logits of row n (-1e30 when it holds none, as kernels::ref)
template <typename E>
__global__ void row_max_kernel(float* maxv, const E* logits, int Vvalid, int Vs, bool vec) {
  __shared__ float shared[kWarp];
  const int64_t n = blockIdx.x;
  float m = -1e30f;
  const E* z = logits + n * Vs;
  for_packs(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), Vvalid, vec, [&](int i, int cnt, bool whole) {
    float x[kPack];
    load8(x, z + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++)
      if (j < cnt) m = fmaxf(m, x[j]);
  });
  m = block_reduce(m, shared, detail::MaxOp{}, -1e30f);
  if (threadIdx.x == 0) maxv[n] = m;
}

// With the complete row max: sums[n] = this rank's sum of exp(z - max), sums[N + n] = the target's logit
// where this rank holds it, else 0.
template <typename E>
__global__ void exp_sum_kernel(float* sums, const float* maxv, const E* logits, const int* targets, int64_t N,
                               int Vvalid, int Vs, int vocab_begin, bool vec) {
  __shared__ float shared[kWarp];
  const int64_t n = blockIdx.x;
  const E* z = logits + n * Vs;
  const float m = maxv[n];
  float s = 0.0f;
  for_packs(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), Vvalid, vec, [&](int i, int cnt, bool whole) {
    float x[kPack];
    load8(x, z + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++)
      if (j < cnt) s += expf(x[j] - m);
  });
  s = block_reduce(s, shared, detail::SumOp{}, 0.0f);
  if (threadIdx.x == 0) {
    const int t = targets[n] - vocab_begin;
    sums[n] = s;
    sums[N + n] = (t >= 0 && t < Vvalid) ? load_f32(z[t]) : 0.0f;
  }
}

// With the complete sums: p = exp(z - max) / sum (padding 0), loss = log(sum) + max - logit(target). probs
// may alias logits: every pack is read and then written by the same thread.
template <typename E>
__global__ void probs_loss_kernel(float* losses, E* probs, const E* logits, const float* maxv, const float* sums,
                                  int64_t N, int Vvalid, int Vs, bool vec) {
  const int64_t n = blockIdx.x;
  E* p = probs + n * Vs;
  const float m = maxv[n], s = sums[n];
  const E* z = logits + n * Vs;
  for_packs(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), Vs, vec, [&](int i, int cnt, bool whole) {
    float x[kPack];
    load8(x, z + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++) x[j] = i + j < Vvalid ? expf(x[j] - m) / s : 0.0f;
    store8(p + i, x, cnt, whole);
  });
  if (threadIdx.x == 0) losses[n] = logf(s) + m - sums[N + n];
}

// dlogits += (probs - onehot) * dloss * weights[n] over the valid columns (weights null: 1; in fp32, a bf16
// result rounded once); in place (dlogits == probs) it overwrites instead and zeroes the padding, as
// kernels::ref.
template <typename E>
__global__ void softmax_crossentropy_backward_kernel(E* dlogits, const E* probs, const int* targets,
                                                     const float* weights, float dloss, int Vvalid, int Vs,
                                                     int vocab_begin, bool vec) {
  const int64_t n = blockIdx.x;
  E* dz = dlogits + n * Vs;
  const E* p = probs + n * Vs;
  const int t = targets[n] - vocab_begin;
  const float d = weights ? dloss * weights[n] : dloss;
  if (dz == p) {
    for_packs(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), Vs, vec, [&](int i, int cnt, bool whole) {
      float x[kPack];
      load8(x, p + i, cnt, whole);
#pragma unroll
      for (int j = 0; j < kPack; j++) x[j] = i + j < Vvalid ? (x[j] - (i + j == t ? 1.0f : 0.0f)) * d : 0.0f;
      store8(dz + i, x, cnt, whole);
    });
  } else {
    const int thread = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
    for_packs(thread, threads, Vvalid, vec, [&](int i, int cnt, bool whole) {
      float x[kPack], g[kPack];
      load8(x, p + i, cnt, whole);
      load8(g, dz + i, cnt, whole);
#pragma unroll
      for (int j = 0; j < kPack; j++) g[j] += (x[j] - (i + j == t ? 1.0f : 0.0f)) * d;
      store8(dz + i, g, cnt, whole);
    });
  }
}

// The forward and the backward in place in one pass (ops.hpp's softmax_crossentropy_forward_backward): each
// pack's probabilities become its gradient in registers, never stored. A probability is rounded to E as
// probs_loss_kernel stores it and then read back as the backward kernel reads it, and the arithmetic is those
// kernels', so the gradient and the loss have the two steps' bits; the pass saves them a store and a load of the
// whole row (B*T*V elements). dlogits may alias logits: every pack is read and then written by the same thread.
template <typename E>
__global__ void probs_loss_gradient_kernel(float* losses, E* dlogits, const E* logits, const float* maxv,
                                           const float* sums, const int* targets, const float* weights, float dloss,
                                           int64_t N, int Vvalid, int Vs, int vocab_begin, bool vec) {
  const int64_t n = blockIdx.x;
  E* dz = dlogits + n * Vs;
  const E* z = logits + n * Vs;
  const float m = maxv[n], s = sums[n];
  const int t = targets[n] - vocab_begin;
  const float d = weights ? dloss * weights[n] : dloss;
  for_packs(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), Vs, vec, [&](int i, int cnt, bool whole) {
    float x[kPack];
    load8(x, z + i, cnt, whole);
#pragma unroll
    for (int j = 0; j < kPack; j++) {
      E stored;  // the probability as the forward stores it
      store_f32(&stored, i + j < Vvalid ? expf(x[j] - m) / s : 0.0f);
      x[j] = i + j < Vvalid ? (load_f32(stored) - (i + j == t ? 1.0f : 0.0f)) * d : 0.0f;
    }
    store8(dz + i, x, cnt, whole);
  });
  if (threadIdx.x == 0) losses[n] = logf(s) + m - sums[N + n];
}

}  // namespace axonn::kernels::cuda::crossentropy_rows
