// kernels/cuda/kv_cache.cu — inference with a KV cache (OpTable::kv_cache_append, attention_cached_forward), for
// the fp32 table (cuda::) and the bf16 one (cuda_bf16::): the shape checks and launches of kv_cache.cuh's kernels.
#include <cmath>
#include <cstdint>

#include "axonn/kernels/ops.hpp"
#include "kv_cache.cuh"

namespace axonn::kernels::cuda {
namespace {

using kv_cache::attention_cached_kernel;
using kv_cache::kAppendThreads;
using kv_cache::kCachedAttentionThreads;
using kv_cache::kv_cache_append_kernel;

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
  kv_cache_append_kernel<E><<<detail::grid_for(elements, kAppendThreads), kAppendThreads, 0, detail::stream()>>>(
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
  const size_t bytes = kv_cache::attention_cached_smem(Tc, HS);
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
