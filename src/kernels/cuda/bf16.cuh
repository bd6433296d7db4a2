// kernels/cuda/bf16.cuh — device helpers of the bf16 kernels (private): exact widening, one rounding
// (round-to-nearest-even, as core/dtype.hpp's f32_to_bf16 for every finite value), 16-byte packs.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "common.cuh"
#include "runtime_bf16.hpp"

namespace axonn::kernels::cuda_bf16::detail {

using kernels::cuda::detail::global_index;
using kernels::cuda::detail::global_stride;
using kernels::cuda::detail::grid_for;
using kernels::cuda::detail::kWarp;
using kernels::cuda::detail::stream;

__device__ __forceinline__ float widen(uint16_t x) { return __uint_as_float(static_cast<unsigned>(x) << 16); }
__device__ __forceinline__ uint16_t round_bf16(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

// Eight consecutive bf16 values (one 16-byte load or store) as floats. `vec` = the caller checked that
// the pointer is 16-byte aligned and all 8 elements exist; otherwise the first `cnt` are moved one by one
// (the rest read as 0).
constexpr int kPack = 8;
__device__ __forceinline__ void load8(float (&x)[kPack], const uint16_t* p, int cnt, bool vec) {
  if (vec) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      x[2 * j] = __uint_as_float(w[j] << 16);
      x[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kPack; j++) x[j] = j < cnt ? widen(p[j]) : 0.0f;
  }
}
__device__ __forceinline__ void store8(uint16_t* p, const float (&x)[kPack], int cnt, bool vec) {
  if (vec) {
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
      w[j] = static_cast<uint32_t>(round_bf16(x[2 * j])) | (static_cast<uint32_t>(round_bf16(x[2 * j + 1])) << 16);
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
#pragma unroll
    for (int j = 0; j < kPack; j++)
      if (j < cnt) p[j] = round_bf16(x[j]);
  }
}

// Grid-stride loop over packs of 8 elements: op(i, cnt, vec) handles elements [i, i + cnt).
template <typename Op>
__global__ void pack_kernel(Op op, int64_t n, bool vec) {
  for (int64_t i = global_index() * kPack; i < n; i += global_stride() * kPack) {
    const int cnt = n - i < kPack ? static_cast<int>(n - i) : kPack;
    op(i, cnt, vec && cnt == kPack);
  }
}
template <typename Op>
void launch_packs(const Op& op, int64_t n, bool vec) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  pack_kernel<<<grid_for((n + kPack - 1) / kPack, kThreads), kThreads, 0, stream()>>>(op, n,
                                                                                                           vec);
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace axonn::kernels::cuda_bf16::detail
