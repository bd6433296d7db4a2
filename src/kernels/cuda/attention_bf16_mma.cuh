// kernels/cuda/attention_bf16_mma.cuh — the bf16 flash attention on tensor cores with register-resident
// fragments (mma.sync m16n8k16, warp_mma.cuh): FlashAttention-2's kernels, forward and backward, head sizes 64
// and 128. Same contract, work split, tiles (64 rows a block, a warp per 16 rows, 64-row tiles streamed) and
// determinism (every gradient element summed in a fixed order by one warp, no atomics) as the WMMA kernels
// of attention_bf16_tc.cu; what changes is where the tiles live between products. There a warp stores each
// score tile to shared memory and two lanes per row do the softmax; here the scores stay in the mma
// accumulators, each lane masks and exponentiates its own 32 of them (a row's 4 lanes meet by two shuffles for
// the row max and sum), and the probabilities become the next product's A operand in registers (a_from_c).
// The streamed tiles are double-buffered (cp.async into the other stage while this one is used), and in the
// diagonal tile a warp skips the fragments the causal mask hides from all its rows.
//   forward: S = Q K^T, online softmax in the exp2 domain (s * scale * log2 e; running max m, running sum l
//            of the fp32 exponentials, each lane its own columns, the row's 4 partial sums added at the end),
//            O = alpha O + bf16(P) V in fp32 registers; out = O / l rounded once, lse = m ln 2 + ln l.
//   backward (D = rowsum(dout * out) already computed): dQ kernel per 64 queries over the key tiles up to
//            its last query: S, dP = dO V^T, P = exp2(s scale log2 e - lse log2 e), dS = P (dP - D),
//            dQ += bf16(dS) K; dK/dV kernel per 64 keys over the query tiles from its first key:
//            S^T = K Q^T, dP^T = V dO^T, dV += bf16(P^T) dO, dK += bf16(dS^T) Q. Results added to the old
//            bf16 values in fp32, rounded once.
// Precision: as the WMMA kernels (P and dS rounded to bf16 before their second product; the bound of
// tests/cuda/kernels/test_cuda_bf16.cpp).
//
// Device code only (templates); attention_bf16_tc.cu launches them. Builds for the SIMT emulator as well
// (tests/unit/cuda_emu), which runs these kernels on the CPU against the oracle.
#pragma once

#include <cmath>
#include <cstdint>

#include "flash_geometry.cuh"
#include "warp_mma.cuh"

namespace axonn::kernels::cuda_bf16::mma_attention {

using kernels::cuda::mma::a_from_c;
using kernels::cuda::mma::FragA;
using kernels::cuda::mma::FragB;
using kernels::cuda::mma::FragC;
using kernels::cuda::mma::load_a;
using kernels::cuda::mma::load_b_rows_k;
using kernels::cuda::mma::load_b_rows_n;
using kernels::cuda::mma::mma_16816;

constexpr int kRows = 64;                 // rows a block owns (queries, or keys in dK/dV) = rows of a streamed tile
constexpr int kWarpRows = 16;             // rows a warp owns
constexpr int kWarps = kRows / kWarpRows;
constexpr int kThreads = kWarps * 32;     // 128
constexpr int kKeyFrags = kRows / 8;      // C fragments across a tile's 64 columns
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int HS>
struct Layout {
  static constexpr int kLd = HS + 8;        // bf16 row pitch in shared memory: 16-byte rows 4 banks apart
  static constexpr int kOutFrags = HS / 8;  // C fragments across a warp's HS output columns
  static constexpr size_t kTile = static_cast<size_t>(kRows) * kLd * sizeof(uint16_t);
  // The streamed tiles are double-buffered (two stages): the next one is copied (cp.async) while this one is
  // used. Forward: Q, then K and V of each stage. Backward: the block's two tiles, the streamed two of each
  // stage, and (dK/dV) the streamed query tile's lse * log2 e and D of each stage.
  static constexpr size_t kForward = 5 * kTile;
  static constexpr size_t kBackward = 6 * kTile + 2 * 2 * kRows * sizeof(float);
  static_assert(kTile % 128 == 0);
};

// Tile i of the block's shared memory.
template <int HS>
__device__ __forceinline__ uint16_t* tile(unsigned char* smem, int i) {
  return reinterpret_cast<uint16_t*>(smem + static_cast<size_t>(i) * Layout<HS>::kTile);
}

// Where a lane's values sit: its warp's first row in the block's tile (row0), and its place in the mma
// fragments: row g (v[0], v[1]) and g + 8 (v[2], v[3]) of the warp's 16, columns 8j + 2t and 8j + 2t + 1.
struct LanePlace {
  int g, t, row0;
  __device__ LanePlace()
      : g(kernels::cuda::mma::lane_index() / 4),
        t(kernels::cuda::mma::lane_index() % 4),
        row0(static_cast<int>(threadIdx.x) / 32 * kWarpRows) {}
  // The lane's row r (0 or 1) of a block whose first row is `first` (a query, or a key in dK/dV).
  __device__ int row(int first, int r) const { return first + row0 + g + 8 * r; }
};

// Rows [r0, r0 + kRows) of a bf16 matrix (row stride `stride` elements; a row's HS values contiguous and
// 16-byte aligned) into the shared tile dst [kRows][kLd] by asynchronous 16-byte copies (the caller commits
// and waits); rows at or past T become zeros, so the products over them stay finite. Called by all threads.
template <int HS>
__device__ __forceinline__ void load_rows_async(uint16_t* dst, const uint16_t* src, int64_t stride, int r0, int T) {
  constexpr int kChunks = HS / 8;
  for (int e = static_cast<int>(threadIdx.x); e < kRows * kChunks; e += kThreads) {
    const int r = e / kChunks, c = e % kChunks;
    const bool inside = r0 + r < T;
    kernels::cuda::mma::cp_async16(dst + r * Layout<HS>::kLd + c * 8, inside ? src + (r0 + r) * stride + c * 8 : src,
                                   !inside);
  }
}

// s = rows [row0, row0 + 16) of tile a times tile b^T (kRows x kRows over HS), into 8 C fragments: s[j] holds
// columns 8j .. 8j + 7 (rows of b). Only the fragments [j0, j1) are computed (both even; the others are zero):
// the diagonal tile's columns that the causal mask hides from all 16 rows are skipped.
template <int HS>
__device__ __forceinline__ void warp_abt(FragC (&s)[kKeyFrags], const uint16_t* a, int row0, const uint16_t* b, int j0,
                                         int j1) {
  constexpr int ld = Layout<HS>::kLd;
#pragma unroll
  for (int j = 0; j < kKeyFrags; j++) kernels::cuda::mma::zero(s[j]);
#pragma unroll
  for (int k = 0; k < HS; k += 16) {
    FragA fa;
    load_a(fa, a, ld, row0, k);
#pragma unroll
    for (int j = 0; j < kKeyFrags; j += 2) {
      if (j < j0 || j >= j1) continue;  // j stays a constant (unrolled): the fragments stay in registers
      FragB b0, b1;
      load_b_rows_n(b0, b1, b, ld, j * 8, k);
      mma_16816(s[j], fa, b0);
      mma_16816(s[j + 1], fa, b1);
    }
  }
}

// acc += p v: p a warp's 16 x kRows values in C fragments (rounded to bf16 here, once), v a shared tile
// [kRows][HS]; acc[j] holds output columns 8j .. 8j + 7. Only p's fragments [j0, j1) are used (the others
// are zero). The terms of each element in the same order on every call.
template <int HS>
__device__ __forceinline__ void warp_pv(FragC (&acc)[Layout<HS>::kOutFrags], const FragC (&p)[kKeyFrags],
                                        const uint16_t* v, int j0, int j1) {
  constexpr int ld = Layout<HS>::kLd;
#pragma unroll
  for (int k = 0; k < kRows; k += 16) {
    if (k / 8 < j0 || k / 8 >= j1) continue;
    const FragA fa = a_from_c(p[k / 8], p[k / 8 + 1]);
#pragma unroll
    for (int j = 0; j < Layout<HS>::kOutFrags; j += 2) {
      FragB b0, b1;
      load_b_rows_k(b0, b1, v, ld, k, j * 8);
      mma_16816(acc[j], fa, b0);
      mma_16816(acc[j + 1], fa, b1);
    }
  }
}

// dst row `row` (bf16, contiguous HS values) += scale * the lane's half-row r (0: row g, 1: row g + 8) of acc:
// columns 8j + 2t, 8j + 2t + 1 as one 32-bit word each, the sum formed in fp32 and rounded once.
template <int HS>
__device__ __forceinline__ void add_row(uint16_t* dst, const FragC (&acc)[Layout<HS>::kOutFrags], int r, float scale) {
  const int t = LanePlace().t;
#pragma unroll
  for (int j = 0; j < Layout<HS>::kOutFrags; j++) {
    uint32_t* w = reinterpret_cast<uint32_t*>(dst + 8 * j + 2 * t);
    const uint32_t old = *w;
    *w = kernels::cuda::mma::pack_bf16x2(kernels::cuda::mma::low_f32(old) + scale * acc[j].v[2 * r],
                                         kernels::cuda::mma::high_f32(old) + scale * acc[j].v[2 * r + 1]);
  }
}

// The max (or sum) of a row's values over its 4 lanes (lanes 4g .. 4g + 3 hold row g's columns); every lane
// of the 4 gets the same bits.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Before using stage i of a stream of n tiles: start copying tile i + 1 into the other stage (issue(i + 1),
// which issues and commits its copies), wait for tile i's, and let every thread see them. After using it, the
// caller syncs again before the stage is refilled (at i + 1, with tile i + 2).
template <typename Issue>
__device__ __forceinline__ void next_stage(int i, int n, Issue issue) {
  if (i + 1 < n) {
    issue(i + 1);
    kernels::cuda::mma::cp_async_wait<1>();
  } else {
    kernels::cuda::mma::cp_async_wait<0>();
  }
  __syncthreads();
}

// Forward: a block per kRows queries of one (b, h) = (blockIdx.z, blockIdx.y), the longest rows first.
template <int HS>
__global__ void __launch_bounds__(kThreads) forward_kernel(uint16_t* out, float* lse, const uint16_t* qkv, int T,
                                                           int C, int NH, float scale_log2) {
  using L = Layout<HS>;
  AXONN_DYNAMIC_SHARED(smem);
  uint16_t* Qs = tile<HS>(smem, 0);  // then K and V of stage 0 (tiles 1, 2) and of stage 1 (3, 4)
  const detail::FlashGeometry geo(static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), T, C, NH, HS);
  const int q0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kRows;
  const LanePlace lane;
  const int t = lane.t, row0 = lane.row0;
  const int query[2] = {lane.row(q0, 0), lane.row(q0, 1)};
  const uint16_t* Q = qkv + geo.qkv_base;
  auto issue = [&](int i) {  // key tile i into stage i % 2
    load_rows_async<HS>(tile<HS>(smem, 1 + 2 * (i % 2)), Q + C, geo.C3, i * kRows, T);
    load_rows_async<HS>(tile<HS>(smem, 2 + 2 * (i % 2)), Q + 2 * C, geo.C3, i * kRows, T);
    kernels::cuda::mma::cp_async_commit();
  };
  load_rows_async<HS>(Qs, Q, geo.C3, q0, T);
  issue(0);  // one group: Q and the first key tile
  FragC o[L::kOutFrags];
#pragma unroll
  for (int j = 0; j < L::kOutFrags; j++) kernels::cuda::mma::zero(o[j]);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this lane's columns only, until the end
  const int k_end = q0 + kRows < T ? q0 + kRows : T;        // keys [0, k_end): up to the block's last query
  const int n_tiles = (k_end + kRows - 1) / kRows;
  for (int i = 0; i < n_tiles; i++) {
    const int k0 = i * kRows;
    next_stage(i, n_tiles, issue);
    // in the diagonal tile (k0 = q0) the warp's rows see its columns up to row0 + 15 only
    const int j_end = k0 == q0 ? (row0 + kWarpRows) / 8 : kKeyFrags;
    FragC s[kKeyFrags];
    warp_abt<HS>(s, Qs, row0, tile<HS>(smem, 1 + 2 * (i % 2)), 0, j_end);
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeyFrags; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int key = k0 + 8 * j + 2 * t + (e & 1), r = e / 2;
        // the causal mask (keys past T too, since key > query there for every row that is written)
        const float x = key <= query[r] ? s[j].v[e] * scale_log2 : -INFINITY;
        s[j].v[e] = x;
        tile_max[r] = fmaxf(tile_max[r], x);
      }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      // key 0 is in the first tile and visible to every row, so m_new is finite from the first tile on
      const float m_new = fmaxf(m[r], quad_max(tile_max[r]));
      alpha[r] = exp2f(m[r] - m_new);  // 0 on the first tile (m = -inf)
      m[r] = m_new;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int j = 0; j < kKeyFrags; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float p = exp2f(s[j].v[e] - m[e / 2]);  // masked: exp2(-inf) = 0
        s[j].v[e] = p;
        l[e / 2] += p;
      }
#pragma unroll
    for (int j = 0; j < L::kOutFrags; j++) {
      o[j].v[0] *= alpha[0], o[j].v[1] *= alpha[0];
      o[j].v[2] *= alpha[1], o[j].v[3] *= alpha[1];
    }
    warp_pv<HS>(o, s, tile<HS>(smem, 2 + 2 * (i % 2)), 0, j_end);
    __syncthreads();  // this stage is refilled next (tile i + 2)
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const float row_l = quad_sum(l[r]);
    if (query[r] >= T) continue;
    uint16_t* dst = out + geo.out_base + static_cast<int64_t>(query[r]) * C;
#pragma unroll
    for (int j = 0; j < L::kOutFrags; j++)
      *reinterpret_cast<uint32_t*>(dst + 8 * j + 2 * t) =
          kernels::cuda::mma::pack_bf16x2(o[j].v[2 * r] / row_l, o[j].v[2 * r + 1] / row_l);
    if (t == 0) lse[geo.stat_base + query[r]] = m[r] * kLn2 + logf(row_l);
  }
}

// dQ: a block per kRows queries of one (b, h), key tiles 0 .. its last query, the longest rows first.
template <int HS>
__global__ void __launch_bounds__(kThreads) backward_dq_kernel(uint16_t* dqkv, const float* D, const uint16_t* dout,
                                                               const uint16_t* qkv, const float* lse, int T, int C,
                                                               int NH, float scale, float scale_log2) {
  using L = Layout<HS>;
  AXONN_DYNAMIC_SHARED(smem);
  uint16_t* Qs = tile<HS>(smem, 0);
  uint16_t* dOs = tile<HS>(smem, 1);  // then K and V of stage 0 (tiles 2, 3) and of stage 1 (4, 5)
  const detail::FlashGeometry geo(static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), T, C, NH, HS);
  const int q0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kRows;
  const LanePlace lane;
  const int t = lane.t, row0 = lane.row0;
  const int query[2] = {lane.row(q0, 0), lane.row(q0, 1)};
  float lse2[2], row_D[2];  // rows past T: p = 0, a zero dQ row, not written
#pragma unroll
  for (int r = 0; r < 2; r++) {
    lse2[r] = query[r] < T ? lse[geo.stat_base + query[r]] * kLog2e : 0.0f;
    row_D[r] = query[r] < T ? D[geo.stat_base + query[r]] : 0.0f;
  }
  const uint16_t* Q = qkv + geo.qkv_base;
  auto issue = [&](int i) {  // key tile i into stage i % 2
    load_rows_async<HS>(tile<HS>(smem, 2 + 2 * (i % 2)), Q + C, geo.C3, i * kRows, T);
    load_rows_async<HS>(tile<HS>(smem, 3 + 2 * (i % 2)), Q + 2 * C, geo.C3, i * kRows, T);
    kernels::cuda::mma::cp_async_commit();
  };
  load_rows_async<HS>(Qs, Q, geo.C3, q0, T);
  load_rows_async<HS>(dOs, dout + geo.out_base, C, q0, T);
  issue(0);
  FragC dq[L::kOutFrags];
#pragma unroll
  for (int j = 0; j < L::kOutFrags; j++) kernels::cuda::mma::zero(dq[j]);
  const int k_end = q0 + kRows < T ? q0 + kRows : T;
  const int n_tiles = (k_end + kRows - 1) / kRows;
  for (int i = 0; i < n_tiles; i++) {
    const int k0 = i * kRows;
    next_stage(i, n_tiles, issue);
    const uint16_t* Ks = tile<HS>(smem, 2 + 2 * (i % 2));
    const int j_end = k0 == q0 ? (row0 + kWarpRows) / 8 : kKeyFrags;  // as the forward
    FragC s[kKeyFrags], dp[kKeyFrags];
    warp_abt<HS>(s, Qs, row0, Ks, 0, j_end);
    warp_abt<HS>(dp, dOs, row0, tile<HS>(smem, 3 + 2 * (i % 2)), 0, j_end);
#pragma unroll
    for (int j = 0; j < kKeyFrags; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int key = k0 + 8 * j + 2 * t + (e & 1), r = e / 2;
        const float p = query[r] < T && key <= query[r] ? exp2f(s[j].v[e] * scale_log2 - lse2[r]) : 0.0f;
        s[j].v[e] = p * (dp[j].v[e] - row_D[r]);  // dS
      }
    warp_pv<HS>(dq, s, Ks, 0, j_end);
    __syncthreads();  // this stage is refilled next
  }
#pragma unroll
  for (int r = 0; r < 2; r++)
    if (query[r] < T) add_row<HS>(dqkv + geo.qkv_base + static_cast<int64_t>(query[r]) * geo.C3, dq, r, scale);
}

// dK, dV: a block per kRows keys of one (b, h), query tiles from the block's first key to T.
template <int HS>
__global__ void __launch_bounds__(kThreads) backward_dkv_kernel(uint16_t* dqkv, const float* D, const uint16_t* dout,
                                                                const uint16_t* qkv, const float* lse, int T, int C,
                                                                int NH, float scale, float scale_log2) {
  using L = Layout<HS>;
  AXONN_DYNAMIC_SHARED(smem);
  uint16_t* Ks = tile<HS>(smem, 0);
  uint16_t* Vs = tile<HS>(smem, 1);  // then Q and dO of stage 0 (tiles 2, 3) and of stage 1 (4, 5)
  // the streamed query tile's lse * log2 e and D: [stage][2][kRows]
  float* row_stats = reinterpret_cast<float*>(smem + 6 * L::kTile);
  const detail::FlashGeometry geo(static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), T, C, NH, HS);
  const int k0 = static_cast<int>(blockIdx.x) * kRows;
  const LanePlace lane;
  const int t = lane.t, row0 = lane.row0;
  const int key[2] = {lane.row(k0, 0), lane.row(k0, 1)};  // keys past T: p = 0 (every query < T <= key)
  const uint16_t* Q = qkv + geo.qkv_base;
  const uint16_t* dO = dout + geo.out_base;
  auto issue = [&](int i) {  // query tile i (from k0) into stage i % 2; its lse and D by plain stores
    const int t0 = k0 + i * kRows;
    load_rows_async<HS>(tile<HS>(smem, 2 + 2 * (i % 2)), Q, geo.C3, t0, T);
    load_rows_async<HS>(tile<HS>(smem, 3 + 2 * (i % 2)), dO, C, t0, T);
    kernels::cuda::mma::cp_async_commit();
    float* stats = row_stats + (i % 2) * 2 * kRows;
    for (int c = static_cast<int>(threadIdx.x); c < kRows; c += kThreads) {
      stats[c] = t0 + c < T ? lse[geo.stat_base + t0 + c] * kLog2e : 0.0f;
      stats[kRows + c] = t0 + c < T ? D[geo.stat_base + t0 + c] : 0.0f;
    }
  };
  load_rows_async<HS>(Ks, Q + C, geo.C3, k0, T);
  load_rows_async<HS>(Vs, Q + 2 * C, geo.C3, k0, T);
  issue(0);
  FragC dk[L::kOutFrags], dv[L::kOutFrags];
#pragma unroll
  for (int j = 0; j < L::kOutFrags; j++) {
    kernels::cuda::mma::zero(dk[j]);
    kernels::cuda::mma::zero(dv[j]);
  }
  // k0 is a multiple of kRows: earlier queries see none of these keys
  const int n_tiles = (T - k0 + kRows - 1) / kRows;
  for (int i = 0; i < n_tiles; i++) {
    const int t0 = k0 + i * kRows;
    next_stage(i, n_tiles, issue);
    const uint16_t* Qs = tile<HS>(smem, 2 + 2 * (i % 2));
    const uint16_t* dOs = tile<HS>(smem, 3 + 2 * (i % 2));
    const float* lse2_s = row_stats + (i % 2) * 2 * kRows;
    const float* D_s = lse2_s + kRows;
    // in the diagonal tile (t0 = k0) the queries before the warp's first key see none of its keys
    const int j_begin = t0 == k0 ? row0 / 8 : 0;
    FragC s[kKeyFrags], dp[kKeyFrags];
    warp_abt<HS>(s, Ks, row0, Qs, j_begin, kKeyFrags);    // S^T: the warp's 16 keys x the tile's queries
    warp_abt<HS>(dp, Vs, row0, dOs, j_begin, kKeyFrags);  // dP^T = V dO^T
#pragma unroll
    for (int j = 0; j < kKeyFrags; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int col = 8 * j + 2 * t + (e & 1), query = t0 + col;
        const float p =
            query >= key[e / 2] && query < T ? exp2f(s[j].v[e] * scale_log2 - lse2_s[col]) : 0.0f;
        s[j].v[e] = p;
        dp[j].v[e] = p * (dp[j].v[e] - D_s[col]);  // dS^T
      }
    warp_pv<HS>(dv, s, dOs, j_begin, kKeyFrags);  // dV += P^T dO
    warp_pv<HS>(dk, dp, Qs, j_begin, kKeyFrags);  // dK += dS^T Q
    __syncthreads();  // this stage is refilled next
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    if (key[r] >= T) continue;
    uint16_t* row = dqkv + geo.qkv_base + static_cast<int64_t>(key[r]) * geo.C3;
    add_row<HS>(row + C, dk, r, scale);
    add_row<HS>(row + 2 * C, dv, r, 1.0f);
  }
}

// The launch grid of all three kernels: (tiles of kRows rows, heads, batch rows).
inline dim3 grid_of(int B, int T, int NH) {
  return dim3(static_cast<unsigned>((T + kRows - 1) / kRows), static_cast<unsigned>(NH), static_cast<unsigned>(B));
}

}  // namespace axonn::kernels::cuda_bf16::mma_attention
