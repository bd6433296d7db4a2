// kernels/cuda/gemm_tuning.hpp — the GEMM layout tuner on the GPU (private to axonn_kernels_cuda):
// the row-major sgemm over cuBLAS, the transpose kernel the variants need, and the call sites'
// entry point. The tuner itself is backend-neutral (kernels/gemm_tuner.hpp).
#pragma once

#include <cstdint>
#include <string_view>

#include "axonn/kernels/gemm_tuner.hpp"

namespace axonn::kernels::cuda::detail {

// The row-major GEMM of `call` (device pointers) with cublasSgemm on stream(): cuBLAS is
// column-major, so it computes C^T = op(B)^T op(A)^T, i.e. cublasSgemm(op_b, op_a, N, M, K, B, A),
// the row-major flags becoming cuBLAS's ops unchanged (spec axonn.md §6). Needs K > 0.
void sgemm_rowmajor(const GemmCall& call);

// dst[c, r] = src[r, c] + (accumulate ? beta * dst[c, r] : 0), src [rows, cols] (row stride
// ld_src), dst [cols, rows] (row stride ld_dst), on stream(). Without accumulate dst is not read.
void transpose(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols, int64_t ld_src,
               bool accumulate, float beta);

// The matmul's call sites ("fw", "bw_act", "bw_w"): through the tuner with the CUDA engine when
// --gemm-tuning is on, else sgemm_rowmajor() exactly as issued.
void tuned_sgemm(std::string_view site, const GemmCall& call);

}  // namespace axonn::kernels::cuda::detail
