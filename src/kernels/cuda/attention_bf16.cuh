// kernels/cuda/attention_bf16.cuh — what the bf16 flash attentions share (private): where a (batch, head) lives
// in qkv, out and the per-head row arrays (flash_geometry.cuh), and the tensor-core implementations' entry
// points (attention_bf16_tc.cu), which attention_bf16.cu selects (see kernels/cuda.hpp, FlashAttention).
#pragma once

#include <cstddef>
#include <cstdint>

#include "bf16.cuh"
#include "flash_geometry.cuh"

namespace axonn::kernels::cuda_bf16::detail {

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

// Tensor cores with register-resident fragments (mma.sync, FlashAttention-2's kernels: attention_bf16_mma.cuh,
// launched from attention_bf16_tc.cu): the same conditions; shared memory per block 45-55 KiB at HS = 64,
// 85-103 KiB at HS = 128 (mma_attention_smem: the largest of the three kernels'; 0 for other head sizes).
size_t mma_attention_smem(int HS);
void mma_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH);
void mma_attention_backward(bf16* dqkv, const float* D, const bf16* dout, const bf16* qkv, const float* lse, int B,
                            int T, int C, int NH);

}  // namespace axonn::kernels::cuda_bf16::detail
