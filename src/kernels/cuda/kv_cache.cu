// kernels/cuda/kv_cache.cu — inference with a KV cache (OpTable::kv_cache_append, attention_cached_forward), for
// the fp32 table (cuda::) and the bf16 one (cuda_bf16::): one kernel of each, templated on the element type. A
// bf16 element is widened exactly as it is read, the sums run in fp32, and each bf16 output is rounded once, as
// ref_bf16 does around the fp32 oracle.
#include <cmath>
#include <cstdint>

#include "axonn/kernels/ops.hpp"
#include "common.cuh"
#include "packs.cuh"
#include "runtime_bf16.hpp"

namespace axonn::kernels::cuda {
namespace {

using detail::kWarp;
using detail::warp_sum;

__device__ __forceinline__ float load_f32(float x) { return x; }
__device__ __forceinline__ float load_f32(uint16_t x) { return detail::widen(x); }
__device__ __forceinline__ void store_from_f32(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_from_f32(uint16_t* p, float v) { *p = detail::round_bf16(v); }

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

constexpr int kCachedAttentionThreads = 128;

// One block per (b, h, i): query head h of row b*n + i over the cache's positions [0, pos + i] of KV head
// h / G. Its scores (one warp per position, the lanes over the head's channels), then the softmax over the
// block, then the weighted sum of the values (a thread per channel). Dynamic shared memory: the scores (Tc)
// and the query (HS), in fp32.
template <class E>
__global__ void attention_cached_kernel(E* out, const E* qkv, const E* kcache, const E* vcache, int n, int pos,
                                        int Tc, int NH, int G, int HS, float scale) {
  extern __shared__ float shared[];
  float* scores = shared;
  float* q = shared + Tc;
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
    store_from_f32(&out[row * Q + h * HS + j], o * inv);
  }
}

void check_cache_shape(int B, int n, int pos, int Tc, int NH, int NKV, int HS) {
  AXONN_CHECK_ARG(B >= 0 && n >= 0 && pos >= 0 && HS > 0, "cuda KV cache: bad sizes B=", B, " n=", n, " pos=", pos,
                  " HS=", HS);
  AXONN_CHECK_ARG(pos + n <= Tc, "cuda KV cache: positions [", pos, ", ", pos + n, ") exceed the cache's ", Tc);
  AXONN_CHECK_ARG(NKV > 0 && NH % NKV == 0, "cuda KV cache: query heads ", NH, " are not a multiple of KV heads ",
                  NKV);
}

template <class E>
void append(E* kcache, E* vcache, const E* qkv, int B, int n, int pos, int Tc, int NH, int NKV, int HS) {
  check_cache_shape(B, n, pos, Tc, NH, NKV, HS);
  const int64_t elements = static_cast<int64_t>(B) * n * NKV * HS;
  if (elements == 0) return;
  constexpr int kThreads = 256;
  kv_cache_append_kernel<E><<<detail::grid_for(elements, kThreads), kThreads, 0, detail::stream()>>>(
      kcache, vcache, qkv, n, pos, Tc, NH * HS, NKV * HS, elements);
  AXONN_CUDA_CHECK_LAUNCH();
}

template <class E>
void attend(E* out, const E* qkv, const E* kcache, const E* vcache, int B, int n, int pos, int Tc, int NH, int NKV,
            int HS) {
  check_cache_shape(B, n, pos, Tc, NH, NKV, HS);
  const int64_t blocks = static_cast<int64_t>(B) * NH * n;
  if (blocks == 0) return;
  AXONN_CHECK_ARG(blocks < (int64_t{1} << 31), "cuda KV cache: ", blocks, " (sequence, head, position) triples "
                  "exceed a launch's blocks");
  const size_t bytes = sizeof(float) * (static_cast<size_t>(Tc) + static_cast<size_t>(HS));
  // beyond the default 48 KiB of dynamic shared memory a kernel must ask for more (a cache of 12k positions);
  // one grant per element type, as each is its own kernel
  static size_t granted = 48 * 1024;
  if (bytes > granted) {
    AXONN_CUDA_CHECK(cudaFuncSetAttribute(attention_cached_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
    granted = bytes;
  }
  attention_cached_kernel<E><<<static_cast<unsigned>(blocks), kCachedAttentionThreads, bytes, detail::stream()>>>(
      out, qkv, kcache, vcache, n, pos, Tc, NH, NH / NKV, HS, 1.0f / std::sqrt(static_cast<float>(HS)));
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void kv_cache_append(float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int Tc, int NH, int NKV,
                     int HS) {
  append(kcache, vcache, qkv, B, n, pos, Tc, NH, NKV, HS);
}

void attention_cached_forward(float* out, const float* qkv, const float* kcache, const float* vcache, int B, int n,
                              int pos, int Tc, int NH, int NKV, int HS) {
  attend(out, qkv, kcache, vcache, B, n, pos, Tc, NH, NKV, HS);
}

}  // namespace axonn::kernels::cuda

namespace axonn::kernels::cuda_bf16 {

void kv_cache_append(bf16* kcache, bf16* vcache, const bf16* qkv, int B, int n, int pos, int Tc, int NH, int NKV,
                     int HS) {
  cuda::append(kcache, vcache, qkv, B, n, pos, Tc, NH, NKV, HS);
}

void attention_cached_forward(bf16* out, const bf16* qkv, const bf16* kcache, const bf16* vcache, int B, int n,
                              int pos, int Tc, int NH, int NKV, int HS) {
  cuda::attend(out, qkv, kcache, vcache, B, n, pos, Tc, NH, NKV, HS);
}

}  // namespace axonn::kernels::cuda_bf16
