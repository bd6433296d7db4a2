// kernels/cuda/attention_bf16.cuh — what the two bf16 flash attentions share (private): where a (batch, head)
// lives in qkv, out and the per-head row arrays, and the tensor-core implementation's entry points
// (attention_bf16_tc.cu), which attention_bf16.cu selects (see kernels/cuda.hpp, FlashAttention).
#pragma once

#include <cstddef>
#include <cstdint>

#include "bf16.cuh"

namespace axonn::kernels::cuda_bf16::detail {

struct FlashGeometry {  // where (b, h) lives in qkv [B,T,3C] / out [B,T,C] and in the [B,NH,T] row arrays
  int64_t qkv_base, out_base, stat_base;
  int64_t C3;
  __device__ FlashGeometry(int b, int h, int T, int C, int NH, int HS)
      : qkv_base(static_cast<int64_t>(b) * T * 3 * C + static_cast<int64_t>(h) * HS),
        out_base(static_cast<int64_t>(b) * T * C + static_cast<int64_t>(h) * HS),
        stat_base((static_cast<int64_t>(b) * NH + h) * T),
        C3(3 * static_cast<int64_t>(C)) {}
};

// Tensor cores (bf16 WMMA, fp32 accumulators): head sizes 64 and 128, every bf16 buffer 16-byte aligned (the
// caller checks the pointers), and a device that gives a block tc_attention_smem(HS) bytes of shared memory.
// The largest of the three kernels' shared memory per block for HS (110 KiB forward, 121 KiB dK/dV at
// HS = 128); 0 when there is no tensor-core kernel for HS.
size_t tc_attention_smem(int HS);
// Same contract as attention_forward (shape already checked; B, T > 0).
void tc_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH);
// dQ, dK, dV added to dqkv, with D = rowsum(dout * out) already in `D` [B,NH,T].
void tc_attention_backward(bf16* dqkv, const float* D, const bf16* dout, const bf16* qkv, const float* lse, int B,
                           int T, int C, int NH);

}  // namespace axonn::kernels::cuda_bf16::detail
