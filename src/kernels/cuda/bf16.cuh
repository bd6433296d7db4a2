// kernels/cuda/bf16.cuh — device helpers of the bf16 kernels (private): the pack helpers of packs.cuh (exact
// widening, one rounding, 16-byte packs) in the bf16 kernels' namespace.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "common.cuh"
#include "packs.cuh"
#include "runtime_bf16.hpp"

namespace axonn::kernels::cuda_bf16::detail {

using kernels::cuda::detail::global_index;
using kernels::cuda::detail::global_stride;
using kernels::cuda::detail::grid_for;
using kernels::cuda::detail::kWarp;
using kernels::cuda::detail::stream;

// the pack helpers (packs.cuh), shared with the fp32 table's elementwise kernels
using kernels::cuda::detail::all_aligned16;
using kernels::cuda::detail::copy8;
using kernels::cuda::detail::fill_rows;
using kernels::cuda::detail::for_packs;
using kernels::cuda::detail::kPack;
using kernels::cuda::detail::launch_packs;
using kernels::cuda::detail::load8;
using kernels::cuda::detail::pack_kernel;
using kernels::cuda::detail::round_bf16;
using kernels::cuda::detail::rows_aligned16;
using kernels::cuda::detail::store8;
using kernels::cuda::detail::widen;

}  // namespace axonn::kernels::cuda_bf16::detail
