// kernels/cuda/kv_cache.cuh — the KV cache's kernels of inference (kv_cache.cu launches them): the append of a
// chunk's keys and values, and a chunk's attention over the cache, templated on the element type for both CUDA
// tables. A bf16 element is widened exactly as it is read, the sums run in fp32, and each bf16 output is rounded
// once, as ref_bf16 does around the fp32 oracle. Builds for the SIMT emulator as well (tests/unit/cuda_emu runs
// these kernels on the CPU against kernels::ref).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common.cuh"
#include "packs.cuh"

namespace axonn::kernels::cuda::kv_cache {

using detail::kWarp;
using detail::load_f32;
using detail::store_f32;
using detail::warp_sum;

constexpr int kAppendThreads = 256;
constexpr int kCachedAttentionThreads = 128;
// The attention kernel's dynamic shared memory: the scores (Tc) and the query (HS), in fp32.
inline size_t attention_cached_smem(int Tc, int HS) {
  return sizeof(float) * (static_cast<size_t>(Tc) + static_cast<size_t>(HS));
}

// kcache, vcache [B, Tc, K] at positions [pos, pos + n) <- the k and v of qkv's rows [B n, Q + 2K]: one
// element per thread of a grid-stride loop (copies: exact in either type).
template <class E>
__global__ void kv_cache_append_kernel(E* kcache, E* vcache, const E* qkv, int n, int pos, int Tc, int Q, int K,
                                       int64_t elements) {
  for (int64_t e = detail::global_index(); e < elements; e += detail::global_stride()) {
    const int64_t row = e / K, j = e % K, b = row / n, i = row % n;
    const E* src = qkv + row * (Q + 2 * K) + Q + j;
    const int64_t dst = (b * Tc + pos + i) * K + j;
    kcache[dst] = src[0];
    vcache[dst] = src[K];
  }
}

// One block per (b, h, i): query head h of row b*n + i over the cache's positions [0, pos + i] of KV head
// h / G. Its scores (one warp per position, the lanes over the head's channels), then the softmax over the
// block, then the weighted sum of the values (a thread per channel). Dynamic shared memory: the scores (Tc)
// and the query (HS), in fp32.
template <class E>
__global__ void attention_cached_kernel(E* out, const E* qkv, const E* kcache, const E* vcache, int n, int pos,
                                        int Tc, int NH, int G, int HS, float scale) {
  AXONN_DYNAMIC_SHARED(shared_bytes);
  float* scores = reinterpret_cast<float*>(shared_bytes);
  float* q = scores + Tc;
  __shared__ float reduce[kWarp];
  const int i = static_cast<int>(blockIdx.x % n), h = static_cast<int>((blockIdx.x / n) % NH);
  const int64_t b = blockIdx.x / (static_cast<int64_t>(n) * NH);
  const int Q = NH * HS, K = (NH / G) * HS, t = pos + i;
  const int64_t row = b * n + i;
  for (int j = threadIdx.x; j < HS; j += blockDim.x) q[j] = load_f32(qkv[row * (Q + 2 * K) + h * HS + j]);
  __syncthreads();
  const E* keys = kcache + b * Tc * K + (h / G) * HS;
  const E* values = vcache + b * Tc * K + (h / G) * HS;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  for (int t2 = warp; t2 <= t; t2 += warps) {
    float dot = 0.0f;
    for (int j = lane; j < HS; j += kWarp) dot += q[j] * load_f32(keys[static_cast<int64_t>(t2) * K + j]);
    dot = warp_sum(dot);
    if (lane == 0) scores[t2] = dot * scale;
  }
  __syncthreads();
  float m = -INFINITY;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) m = fmaxf(m, scores[t2]);
  m = detail::block_reduce(m, reduce, detail::MaxOp{}, -INFINITY);
  float sum = 0.0f;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
    const float e = expf(scores[t2] - m);
    scores[t2] = e;
    sum += e;
  }
  sum = detail::block_reduce(sum, reduce, detail::SumOp{}, 0.0f);  // syncs: every score is written
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < HS; j += blockDim.x) {
    float o = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) o += scores[t2] * load_f32(values[static_cast<int64_t>(t2) * K + j]);
    store_f32(&out[row * Q + h * HS + j], o * inv);
  }
}

}  // namespace axonn::kernels::cuda::kv_cache
