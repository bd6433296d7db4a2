// kernels/cuda/flash_geometry.cuh — where a (batch, head) lives for the flash attentions (private): in qkv
// [B,T,3C], out [B,T,C] and the per-head row arrays [B,NH,T] (lse, D). Includes nothing of CUDA, so the mma
// kernels also build for the SIMT emulator's tests (warp_mma.cuh).
#pragma once

#include <cstdint>

namespace axonn::kernels::cuda_bf16::detail {

struct FlashGeometry {
  int64_t qkv_base, out_base, stat_base;
  int64_t C3;
  __device__ FlashGeometry(int b, int h, int T, int C, int NH, int HS)
      : qkv_base(static_cast<int64_t>(b) * T * 3 * C + static_cast<int64_t>(h) * HS),
        out_base(static_cast<int64_t>(b) * T * C + static_cast<int64_t>(h) * HS),
        stat_base((static_cast<int64_t>(b) * NH + h) * T),
        C3(3 * static_cast<int64_t>(C)) {}
};

}  // namespace axonn::kernels::cuda_bf16::detail
