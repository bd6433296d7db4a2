// kernels/cuda/llama_rows.cuh — the Llama block's elementwise kernels by rows (llama.cu launches them): SwiGLU
// forward and backward and rotate-half RoPE, fp32 and bf16 from the same templates. A block takes a row at a time
// (a grid-stride loop over the rows), its threads the row's packs of 8 (packs.cuh: 16-byte loads and stores where
// the rows are aligned). Where a thread took one element of the whole tensor, it split its flat index into row
// and column with 64-bit divisions per element and moved 2 or 4 bytes per load; here the row comes from the
// block and the column from the thread. Same formulas as kernels::ref, fp32 math; a bf16 output is rounded once,
// an accumulated one summed in fp32 with its old value first. Builds for the SIMT emulator as well
// (tests/unit/cuda_emu runs these kernels on the CPU against kernels::ref).
#pragma once

#include <cstdint>

#include "common.cuh"
#include "packs.cuh"

namespace axonn::kernels::cuda::llama_rows {

using detail::kPack;
using detail::load8;
using detail::store8;

// A block per row (detail::row_grid's launch) of kThreads threads.
constexpr int kThreads = 128;

// out[n, i] = silu(gate) * up over the rows n of inp [N, 2F] = gate | up. vec: rows_aligned16<E>(F, {out, inp})
// (then the up half of a row, F elements in, is aligned too).
template <typename E>
__global__ void __launch_bounds__(kThreads) swiglu_forward_kernel(E* out, const E* inp, int64_t N, int F, bool vec) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const E* gate = inp + n * 2 * F;
    const E* up = gate + F;
    E* o = out + n * F;
    detail::for_packs(static_cast<int>(threadIdx.x), kThreads, F, vec, [&](int i, int cnt, bool whole) {
      float g[kPack], u[kPack];
      load8(g, gate + i, cnt, whole);
      load8(u, up + i, cnt, whole);
#pragma unroll
      for (int j = 0; j < kPack; j++) g[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
      store8(o + i, g, cnt, whole);
    });
  }
}

// dinp [N, 2F] += the gradients of gate and up, from dout [N, F]. vec: rows_aligned16<E>(F, {dinp, inp, dout}).
template <typename E>
__global__ void __launch_bounds__(kThreads)
    swiglu_backward_kernel(E* dinp, const E* inp, const E* dout, int64_t N, int F, bool vec) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const E* gate = inp + n * 2 * F;
    const E* up = gate + F;
    const E* d = dout + n * F;
    E* dgate = dinp + n * 2 * F;
    E* dup = dgate + F;
    detail::for_packs(static_cast<int>(threadIdx.x), kThreads, F, vec, [&](int i, int cnt, bool whole) {
      float g[kPack], u[kPack], dy[kPack], dg[kPack], du[kPack];
      load8(g, gate + i, cnt, whole);
      load8(u, up + i, cnt, whole);
      load8(dy, d + i, cnt, whole);
      load8(dg, dgate + i, cnt, whole);
      load8(du, dup + i, cnt, whole);
#pragma unroll
      for (int j = 0; j < kPack; j++) {
        const float sig = 1.0f / (1.0f + expf(-g[j]));
        dg[j] = dg[j] + dy[j] * u[j] * sig * (1.0f + g[j] * (1.0f - sig));
        du[j] = du[j] + dy[j] * g[j] * sig;
      }
      store8(dgate + i, dg, cnt, whole);
      store8(dup + i, du, cnt, whole);
    });
  }
}

// RoPE in place over `rows` rows of x (row r at x + r * stride, position r % T): the first `heads` heads of HS
// channels, pair (i, i + HS/2) of each by the angle of (t, i): (a, b) <- (a c - b s, b c + a s), s = sign * sin
// (sign -1 rotates back). A row's threads take (head, pack of 8 of the first half) in turn. vec: rope_aligned.
template <typename E>
__global__ void __launch_bounds__(kThreads) rope_kernel(E* x, const float* cos, const float* sin, int64_t rows, int T,
                                                        int heads, int HS, int stride, float sign, bool vec) {
  const int half = HS / 2;
  const int packs = (half + kPack - 1) / kPack;  // per head
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int t = static_cast<int>(r % T);
    E* row = x + r * stride;
    const float* c_row = cos + static_cast<int64_t>(t) * half;
    const float* s_row = sin + static_cast<int64_t>(t) * half;
    for (int k = static_cast<int>(threadIdx.x); k < heads * packs; k += kThreads) {
      const int h = k / packs, i = (k - h * packs) * kPack;
      const int cnt = half - i < kPack ? half - i : kPack;
      E* v = row + h * HS;
      float a[kPack], b[kPack], c[kPack], s[kPack];
      load8(a, v + i, cnt, vec);
      load8(b, v + half + i, cnt, vec);
      load8(c, c_row + i, cnt, vec);
      load8(s, s_row + i, cnt, vec);
#pragma unroll
      for (int j = 0; j < kPack; j++) {
        const float sj = sign * s[j], aj = a[j], bj = b[j];
        a[j] = aj * c[j] - bj * sj;
        b[j] = bj * c[j] + aj * sj;
      }
      store8(v + i, a, cnt, vec);
      store8(v + half + i, b, cnt, vec);
    }
  }
}

// rope_kernel's 16-byte packs apply: the half head is whole packs (HS/2 % 8 == 0) and x, cos, sin and the row
// stride are 16-byte aligned.
template <typename E>
inline bool rope_aligned(const E* x, const float* cos, const float* sin, int HS, int stride) {
  return (HS / 2) % kPack == 0 && (static_cast<size_t>(stride) * sizeof(E)) % 16 == 0 &&
         detail::all_aligned16({x, cos, sin});
}

}  // namespace axonn::kernels::cuda::llama_rows
