// kernels/cuda/common.cuh — device-side helpers shared by the kernel files (private). Built by nvcc, and by a
// host compiler for the SIMT emulator's tests (AXONN_SIMT_EMULATOR: the includer provides the CUDA
// vocabulary, tests/unit/cuda_emu/simt_emulator.hpp, and nothing of the CUDA toolkit is included).
#pragma once

#include <cstdint>

#if !defined(AXONN_SIMT_EMULATOR)
#include <cuda_runtime.h>

#include "runtime.hpp"
#endif

// A 16-byte vector access (uint4, float4) needs a 16-byte aligned address, or the GPU faults; the SIMT
// emulator's host would not, so there the kernels check it (tests/unit/cuda_emu/simt_emulator.hpp).
#if defined(AXONN_SIMT_EMULATOR)
#define AXONN_EXPECT_ALIGNED16(p) ::axonn::emu::expect_aligned16(p, "load or store")
#else
#define AXONN_EXPECT_ALIGNED16(p) ((void)0)
#endif

// The block's dynamic shared memory as `unsigned char name[]`, 128-byte aligned (the emulator's: its block's).
#if defined(AXONN_SIMT_EMULATOR)
#define AXONN_DYNAMIC_SHARED(name) unsigned char* name = ::axonn::emu::dynamic_shared()
#else
#define AXONN_DYNAMIC_SHARED(name) extern __shared__ __align__(128) unsigned char name[]
#endif

namespace axonn::kernels::cuda::detail {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// Butterfly reductions: every lane ends with the result. All 32 lanes must take part.
__device__ inline float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ inline double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Whole-block reductions for blockDim.x a multiple of 32 (<= 1024): every thread gets the result.
// `shared` holds 32 values; the function syncs before returning, so it can be called again.
template <typename T, typename Op>
__device__ inline T block_reduce(T v, T* shared, Op op, T identity) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  for (int o = kWarp / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(kFullMask, v, o));
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T r = lane < warps ? shared[lane] : identity;
  for (int o = kWarp / 2; o > 0; o /= 2) r = op(r, __shfl_xor_sync(kFullMask, r, o));
  __syncthreads();  // shared may be reused by the caller's next reduction
  return r;
}
struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Blocks for a grid-stride loop over n elements: enough to fill the GPU, capped (the loop does the rest).
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  constexpr int64_t kMaxBlocks = 1 << 16;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks < kMaxBlocks ? blocks : kMaxBlocks));
}

// Global thread index and stride of a 1-D grid-stride loop, in 64 bits.
__device__ inline int64_t global_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t global_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace axonn::kernels::cuda::detail
