// kernels/cuda/warp_mma.cuh — warp-level tensor-core primitives (private): mma.sync m16n8k16 with bf16 inputs
// and fp32 accumulators, and ldmatrix from shared memory, with the fragments held in registers (FlashAttention-2's
// way, where WMMA's fragments have an unspecified layout). The layouts are the PTX ISA's ("Matrix Fragments for
// mma.m16n8k16", "ldmatrix"): lane L, g = L / 4, t = L % 4,
//   A (16 x 16, row-major): r[0] = (g, 2t..2t+1), r[1] = (g+8, 2t..), r[2] = (g, 2t+8..), r[3] = (g+8, 2t+8..)
//   B (16 x 8, k x n):      r[0] = (k 2t..2t+1, n g), r[1] = (k 2t+8.., n g)
//   C (16 x 8, fp32):       v[0], v[1] = (g, 2t), (g, 2t+1); v[2], v[3] = (g+8, 2t), (g+8, 2t+1)
// (a 32-bit register holds two bf16, the lower column or k in its low half); the same, decoded by hand, as
// CUTLASS's CuTe states them (MMA_Traits<SM80_16x8x16_F32BF16BF16F32_TN>: A ((4,8),(2,2,2)):((32,1),(16,8,128)),
// B ((4,8),(2,2)):((16,1),(8,64)), C SM80_16x8_Row). C's layout is A's for two neighbouring C tiles, so a
// product's result becomes the next product's A operand without leaving registers (a_from_c).
//
// Built by nvcc for the GPU, and by a host compiler for tests with AXONN_SIMT_EMULATOR, where the includer
// provides the CUDA vocabulary and these primitives run as warp exchanges (tests/unit/cuda_emu/simt_emulator.hpp).
#pragma once

#include <cstdint>

#if !defined(AXONN_SIMT_EMULATOR)
#include <cuda_bf16.h>
#else
#include "axonn/core/dtype.hpp"  // f32_to_bf16: the host's rounding, for the emulated pack_bf16x2
#endif

#include "common.cuh"  // AXONN_DYNAMIC_SHARED

namespace axonn::kernels::cuda::mma {

struct FragA {  // 16 x 16 bf16
  uint32_t r[4];
};
struct FragB {  // 16 x 8 bf16
  uint32_t r[2];
};
struct FragC {  // 16 x 8 fp32
  float v[4];
};

__device__ __forceinline__ void zero(FragC& c) { c.v[0] = c.v[1] = c.v[2] = c.v[3] = 0.0f; }

// Two floats as bf16 (each rounded to nearest even), `lo` in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
#if !defined(AXONN_SIMT_EMULATOR)
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
#else
  return static_cast<uint32_t>(f32_to_bf16(lo)) | (static_cast<uint32_t>(f32_to_bf16(hi)) << 16);
#endif
}
// The two bf16 of a word as floats (exact).
__device__ __forceinline__ float low_f32(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float high_f32(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// d += a * b
__device__ __forceinline__ void mma_16816(FragC& d, const FragA& a, const FragB& b) {
#if !defined(AXONN_SIMT_EMULATOR)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d.v[0]), "+f"(d.v[1]), "+f"(d.v[2]), "+f"(d.v[3])
      : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
#else
  struct In {
    FragA a;
    FragB b;
    FragC c;
  };
  const In in{a, b, d};
  emu::warp_exchange(in, d, [](const In* const* lanes, FragC* const* out) {
    float A[16][16], B[16][8], Cm[16][8];
    for (int L = 0; L < emu::kWarpSize; L++) {
      const int g = L / 4, t = L % 4;
      const In& x = *lanes[L];
      const int ar[4] = {g, g + 8, g, g + 8}, ac[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
      for (int i = 0; i < 4; i++) {
        A[ar[i]][ac[i]] = low_f32(x.a.r[i]);
        A[ar[i]][ac[i] + 1] = high_f32(x.a.r[i]);
      }
      for (int i = 0; i < 2; i++) {
        B[2 * t + 8 * i][g] = low_f32(x.b.r[i]);
        B[2 * t + 8 * i + 1][g] = high_f32(x.b.r[i]);
      }
      Cm[g][2 * t] = x.c.v[0], Cm[g][2 * t + 1] = x.c.v[1];
      Cm[g + 8][2 * t] = x.c.v[2], Cm[g + 8][2 * t + 1] = x.c.v[3];
    }
    float Dm[16][8];
    for (int m = 0; m < 16; m++)
      for (int n = 0; n < 8; n++) {
        double s = Cm[m][n];  // bf16 products are exact; the sum as a wide accumulator would form it
        for (int k = 0; k < 16; k++) s += static_cast<double>(A[m][k]) * B[k][n];
        Dm[m][n] = static_cast<float>(s);
      }
    for (int L = 0; L < emu::kWarpSize; L++) {
      const int g = L / 4, t = L % 4;
      FragC& o = *out[L];
      o.v[0] = Dm[g][2 * t], o.v[1] = Dm[g][2 * t + 1], o.v[2] = Dm[g + 8][2 * t], o.v[3] = Dm[g + 8][2 * t + 1];
    }
  });
#endif
}

// ldmatrix .x4: lane L gives `row`, the address of row L % 8 of 8x8 matrix L / 8 (8 bf16, 16 bytes, 16-byte
// aligned, in shared memory); r[i] receives matrix i's (L/4, 2(L%4)) and (L/4, 2(L%4)+1). Transposed (.trans):
// matrix i's (2(L%4), L/4) and (2(L%4)+1, L/4), rows being the addresses given.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row) {
#if !defined(AXONN_SIMT_EMULATOR)
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
#else
  emu::expect_aligned16(row, "ldmatrix row");
  struct Out {
    uint32_t r[4];
  } got{};
  emu::warp_exchange(row, got, [](const uint16_t* const* const* rows, Out* const* out) {
    for (int L = 0; L < emu::kWarpSize; L++)
      for (int i = 0; i < 4; i++) {
        const int a = L / 4, b = 2 * (L % 4);
        const uint16_t* m = nullptr;  // element (row, col) of matrix i: (*rows[8 i + row])[col]
        uint32_t lo = 0, hi = 0;
        if (kTrans) {
          m = *rows[8 * i + b];
          lo = m[a];
          hi = (*rows[8 * i + b + 1])[a];
        } else {
          m = *rows[8 * i + a];
          lo = m[b];
          hi = m[b + 1];
        }
        out[L]->r[i] = lo | (hi << 16);
      }
  });
  for (int i = 0; i < 4; i++) r[i] = got.r[i];
#endif
}

// Asynchronous 16-byte copies from global to shared memory (cp.async, sm_80 and later): `zero_fill` writes 16
// zero bytes instead (reading nothing; `src` must still be a valid address). Copies are committed as a group;
// cp_async_wait<N>() returns when at most N of this thread's groups are still in flight. Other threads see the
// data after their own wait and a __syncthreads.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool zero_fill) {
#if !defined(AXONN_SIMT_EMULATOR)
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  const int bytes = zero_fill ? 0 : 16;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(bytes) : "memory");
#else
  emu::cp_async16(dst, src, zero_fill);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if !defined(AXONN_SIMT_EMULATOR)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  emu::cp_async_commit();
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if !defined(AXONN_SIMT_EMULATOR)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#else
  emu::cp_async_wait(N);
#endif
}

__device__ __forceinline__ int lane_index() { return static_cast<int>(threadIdx.x) % 32; }

// A from rows [row0, row0 + 16) and columns [k0, k0 + 16) of a shared bf16 tile with row pitch ld.
__device__ __forceinline__ void load_a(FragA& a, const uint16_t* tile, int ld, int row0, int k0) {
  const int L = lane_index();
  ldmatrix_x4<false>(a.r, tile + (row0 + L % 16) * ld + k0 + (L / 16) * 8);
}

// B for two neighbouring n blocks (n0.., n0 + 8..) over k [k0, k0 + 16) from a shared tile stored n-major
// (row n holds the k values: K's rows for S = Q K^T).
__device__ __forceinline__ void load_b_rows_n(FragB& b0, FragB& b1, const uint16_t* tile, int ld, int n0, int k0) {
  const int L = lane_index(), i = L / 8, j = L % 8;
  uint32_t r[4];
  ldmatrix_x4<false>(r, tile + (n0 + (i / 2) * 8 + j) * ld + k0 + (i % 2) * 8);
  b0.r[0] = r[0], b0.r[1] = r[1], b1.r[0] = r[2], b1.r[1] = r[3];
}

// The same from a tile stored k-major (row k holds the n values: V's rows for O = P V).
__device__ __forceinline__ void load_b_rows_k(FragB& b0, FragB& b1, const uint16_t* tile, int ld, int k0, int n0) {
  const int L = lane_index(), i = L / 8, j = L % 8;
  uint32_t r[4];
  ldmatrix_x4<true>(r, tile + (k0 + (i % 2) * 8 + j) * ld + n0 + (i / 2) * 8);
  b0.r[0] = r[0], b0.r[1] = r[1], b1.r[0] = r[2], b1.r[1] = r[3];
}

// The A operand (16 x 16, columns k0..k0+15) from two C tiles holding its columns k0.. and k0 + 8.., each value
// rounded to bf16 once.
__device__ __forceinline__ FragA a_from_c(const FragC& lo, const FragC& hi) {
  FragA a;
  a.r[0] = pack_bf16x2(lo.v[0], lo.v[1]);
  a.r[1] = pack_bf16x2(lo.v[2], lo.v[3]);
  a.r[2] = pack_bf16x2(hi.v[0], hi.v[1]);
  a.r[3] = pack_bf16x2(hi.v[2], hi.v[3]);
  return a;
}

}  // namespace axonn::kernels::cuda::mma
