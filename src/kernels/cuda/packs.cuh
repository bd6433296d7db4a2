// kernels/cuda/packs.cuh — device helpers of the elementwise kernels of both tables (private): packs of 8
// elements, moved with 16-byte loads and stores where every pointer is 16-byte aligned (one uint4 of bf16,
// two float4 of fp32), fp32 math in registers; a bf16 element is widened exactly and rounded once
// (round-to-nearest-even, as core/dtype.hpp's f32_to_bf16 for every finite value). Builds for the SIMT emulator
// as well (common.cuh), all but launch_packs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#if !defined(AXONN_SIMT_EMULATOR)
#include <cuda_bf16.h>
#endif

#include "common.cuh"

namespace axonn::kernels::cuda::detail {

// True when every pointer is 16-byte aligned: the packed (uint4) paths of the kernels.
inline bool all_aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

__device__ __forceinline__ float widen(uint16_t x) { return __uint_as_float(static_cast<unsigned>(x) << 16); }
__device__ __forceinline__ uint16_t round_bf16(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

// One element of either type as fp32 (fp32 as it is, bf16 widened exactly), and stored from fp32 (as it is, or
// rounded once): for the kernels that move single elements, templated on the element type.
__device__ __forceinline__ float load_f32(float x) { return x; }
__device__ __forceinline__ float load_f32(uint16_t x) { return widen(x); }
__device__ __forceinline__ void store_f32(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_f32(uint16_t* p, float v) { *p = round_bf16(v); }

// Eight consecutive elements (bf16: one 16-byte load or store; fp32: two) as floats. `vec` = the caller
// checked that the pointer is 16-byte aligned and all 8 elements exist; otherwise the first `cnt` are moved
// one by one (the rest read as 0).
constexpr int kPack = 8;
__device__ __forceinline__ void load8(float (&x)[kPack], const uint16_t* p, int cnt, bool vec) {
  if (vec) {
    AXONN_EXPECT_ALIGNED16(p);
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
__device__ __forceinline__ void load8(float (&x)[kPack], const float* p, int cnt, bool vec) {
  if (vec) {
    AXONN_EXPECT_ALIGNED16(p);
    const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  } else {
#pragma unroll
    for (int j = 0; j < kPack; j++) x[j] = j < cnt ? p[j] : 0.0f;
  }
}
__device__ __forceinline__ void store8(uint16_t* p, const float (&x)[kPack], int cnt, bool vec) {
  if (vec) {
    AXONN_EXPECT_ALIGNED16(p);
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
__device__ __forceinline__ void store8(float* p, const float (&x)[kPack], int cnt, bool vec) {
  if (vec) {
    AXONN_EXPECT_ALIGNED16(p);
    *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
    *reinterpret_cast<float4*>(p + 4) = make_float4(x[4], x[5], x[6], x[7]);
  } else {
#pragma unroll
    for (int j = 0; j < kPack; j++)
      if (j < cnt) p[j] = x[j];
  }
}
// Eight consecutive elements copied as they are (no widening or rounding), under the same terms.
template <typename E>
__device__ __forceinline__ void copy8(E* dst, const E* src, int cnt, bool vec) {
  if (vec) {
    AXONN_EXPECT_ALIGNED16(dst);
    AXONN_EXPECT_ALIGNED16(src);
    constexpr int kWords = kPack * sizeof(E) / sizeof(uint4);
#pragma unroll
    for (int w = 0; w < kWords; w++) reinterpret_cast<uint4*>(dst)[w] = reinterpret_cast<const uint4*>(src)[w];
  } else {
    for (int j = 0; j < cnt; j++) dst[j] = src[j];
  }
}

// The packs of 8 of elements [0, len) that `worker` takes when `workers` take turns (a warp's lanes over a row,
// a block's threads over a row): f(i, cnt, whole), i the pack's first element, cnt how many it has (the last
// may be short), whole: 16-byte loads and stores apply (`vec`, and the pack is full). A warp then moves 512
// bytes of a bf16 row per load, not the 64 of single elements.
template <typename F>
__device__ __forceinline__ void for_packs(int worker, int workers, int len, bool vec, F f) {
  for (int i = worker * kPack; i < len; i += workers * kPack) {
    const int cnt = len - i < kPack ? len - i : kPack;
    f(i, cnt, vec && cnt == kPack);
  }
}

// Every row of `len` elements of type E in these buffers (rows back to back from each pointer) starts 16-byte
// aligned: the `vec` of for_packs over such rows.
template <typename E>
inline bool rows_aligned16(int64_t len, std::initializer_list<const void*> buffers) {
  return (static_cast<size_t>(len) * sizeof(E)) % 16 == 0 && all_aligned16(buffers);
}

// Grid-stride loop over packs of 8 elements: op(i, cnt, vec) handles elements [i, i + cnt).
template <typename Op>
__global__ void pack_kernel(Op op, int64_t n, bool vec) {
  for (int64_t i = global_index() * kPack; i < n; i += global_stride() * kPack) {
    const int cnt = n - i < kPack ? static_cast<int>(n - i) : kPack;
    op(i, cnt, vec && cnt == kPack);
  }
}

// The blocks of a launch of one block per row: one for each of `rows` rows, up to 65536, which then take the rest
// of the rows in a grid-stride loop (the row fill, llama_rows.cuh's kernels).
inline unsigned row_grid(int64_t rows) {
  constexpr int64_t kMaxBlocks = int64_t{1} << 16;
  return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

// pack_kernel's launch for n elements (launch_packs): blocks of kPackThreads threads, a thread per pack of 8.
constexpr int kPackThreads = 256;
inline unsigned pack_grid(int64_t n) { return grid_for((n + kPack - 1) / kPack, kPackThreads); }

// out[n, c] = row[c] for n < N, c < len, or 0 without a row (a linear layer's bias as the C its product is added
// to). A block per row (a grid-stride loop over rows), its kRowFillThreads threads across the row in packs.
constexpr int kRowFillThreads = 128;
template <typename E>
__global__ void __launch_bounds__(kRowFillThreads)
    fill_rows_kernel(E* out, const E* row, int64_t N, int len, bool vec) {
  const float zeros[kPack] = {};
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    E* dst = out + n * len;
    for_packs(static_cast<int>(threadIdx.x), kRowFillThreads, len, vec, [&](int c, int cnt, bool whole) {
      if (row)
        copy8(dst + c, row + c, cnt, whole);
      else
        store8(dst + c, zeros, cnt, whole);
    });
  }
}

#if !defined(AXONN_SIMT_EMULATOR)
// out[n, :] = row (or 0 without one) for N rows of len: fill_rows_kernel, a block per row up to 65536 blocks
template <typename E>
void fill_rows(E* out, const E* row, int64_t N, int len) {
  if (N == 0 || len == 0) return;
  fill_rows_kernel<E><<<row_grid(N), kRowFillThreads, 0, stream()>>>(out, row, N, len,
                                                                     rows_aligned16<E>(len, {out, row}));
  AXONN_CUDA_CHECK_LAUNCH();
}

template <typename Op>
void launch_packs(const Op& op, int64_t n, bool vec) {
  if (n == 0) return;
  pack_kernel<<<pack_grid(n), kPackThreads, 0, stream()>>>(op, n, vec);
  AXONN_CUDA_CHECK_LAUNCH();
}
#endif

}  // namespace axonn::kernels::cuda::detail
