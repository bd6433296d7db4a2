// kernels/cuda/attention_bf16_tc.cu — the bf16 flash attention on tensor cores (nvcuda::wmma: bf16 16x16x16
// fragments, fp32 accumulators), forward and backward, head sizes 64 and 128; and the launches of the
// register-resident mma.sync kernels of attention_bf16_mma.cuh (FlashAttention::kTensorCoresMma). Same
// contract, same work split (FlashAttention-2's) and the same determinism as the CUDA-core kernels of
// attention_bf16.cu, which remain the fallback for every other case (attention_bf16.cu chooses).
//
// Tiles. A block of 4 warps takes kTile = 64 rows (queries; keys in the dK/dV kernel) of one (b, h); warp w
// owns rows 16w .. 16w+15. The other side streams through shared memory in tiles of kTile rows. Operands sit
// in shared memory as bf16 rows padded to HS + 8 elements; every product is a WMMA over them with fp32
// accumulators. The elementwise steps (mask, softmax, dS) never touch a fragment's elements, whose layout
// is unspecified: a warp stores its 16 x 64 fp32 score tile (and dP tile) to shared memory, two lanes per
// row work on it there (32 columns each), and write the bf16 probabilities (or dS) the next WMMA reads.
//   forward: S = Q K^T -> online softmax per row in fp32 (running max m, running sum l of the fp32
//            exponentials, as the CUDA-core kernel) -> P = bf16(exp(s - m)) -> O = alpha O + P V, O kept in
//            fp32 in shared memory (the lanes rescale a row, then the warp loads it into accumulators, adds
//            P V, stores it back). out = O / l, rounded once; lse = m + log l.
//   backward, with D = rowsum(dout * out) already in scratch:
//            dQ kernel, a block per 64 queries over the key tiles 0 .. its last query: S, dP = dO V^T,
//            P = exp(s - lse) and dS = P (dP - D) in fp32, dQ += bf16(dS) K;
//            dK/dV kernel, a block per 64 keys over the query tiles from its first key to T: S^T = K Q^T,
//            dP^T = V dO^T, dV += bf16(P)^T dO, dK += bf16(dS)^T Q.
//            The accumulators stay in registers over the whole loop; each gradient element is summed in a
//            fixed order by one warp (no atomics): deterministic. At the end a warp stages its 16 rows in
//            shared memory and the lanes add them to the old bf16 values in fp32, rounded once.
// Precision: Q, K, V, dO are bf16 already, so S and dP are exact products summed in fp32. The one rounding
// the CUDA-core kernel does not have is P (and dS) to bf16 before the second product: at most 2^-8 relative
// per term, so out, dQ, dK and dV stay within 2^-8 * (the sum of the terms' magnitudes) of the fp32 result
// (the bound tests/cuda/kernels/test_cuda_bf16.cpp checks). lse and D are as exact as the CUDA-core kernel's.
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "attention_bf16.cuh"
#include "attention_bf16_mma.cuh"

namespace axonn::kernels::cuda_bf16::detail {
namespace {

namespace wmma = nvcuda::wmma;
using kernels::cuda::detail::kFullMask;
using bfloat = __nv_bfloat16;

constexpr int kTile = 64;                 // rows per block = rows of a streamed tile
constexpr int kFrag = 16;                 // the WMMA shape: m = n = k = 16
constexpr int kWarps = kTile / kFrag;     // a warp per 16 rows
constexpr int kThreads = kWarps * kWarp;  // 128
constexpr int kHalf = kTile / 2;          // columns of a score row per lane
constexpr int kLdS = kTile + 4;           // fp32 score rows (S, dP), padded
constexpr int kLdP = kTile + 8;           // bf16 probability rows (P, dS), padded

using FragA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, bfloat, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, bfloat, wmma::row_major>;
using FragBt = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, bfloat, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;

// Shared-memory shapes for head size HS. Every region is a multiple of 128 bytes and they are laid out one
// after another from a 128-byte aligned base, so each starts 128-byte aligned (WMMA pointers need 32 bytes,
// the 16-byte copies 16); a warp's first row (16 rows in) keeps that, since 16 * row pitch is a multiple of 32.
template <int HS>
struct Tc {
  static constexpr int kLdH = HS + 8;       // bf16 operand rows (Q, K, V, dO): 16-byte rows, 4 banks apart
  static constexpr int kLdO = HS + 4;       // fp32 rows of O, and of the staged gradients
  static constexpr int kCols = HS / kFrag;  // output fragments of a warp (16 x HS)
  static constexpr size_t kOperand = size_t{kTile} * kLdH * sizeof(bfloat);  // [kTile][kLdH] bf16
  static constexpr size_t kScores = size_t{kTile} * kLdS * sizeof(float);    // [kTile][kLdS] fp32
  static constexpr size_t kProbs = size_t{kTile} * kLdP * sizeof(bfloat);    // [kTile][kLdP] bf16
  static constexpr size_t kOut = size_t{kTile} * kLdO * sizeof(float);       // [kTile][kLdO] fp32
  static constexpr size_t kRowStats = 2 * size_t{kTile} * sizeof(float);     // lse and D of a query tile
  // forward: Q K V | S | O | P.  dQ: Q dO K V | S dP | dS.  dK/dV: K V Q dO | S dP | dS P | lse D.
  static constexpr size_t kForward = 3 * kOperand + kScores + kOut + kProbs;
  static constexpr size_t kBackwardQ = 4 * kOperand + 2 * kScores + kProbs;
  static constexpr size_t kBackwardKV = 4 * kOperand + 2 * kScores + 2 * kProbs + kRowStats;
  static constexpr size_t kMost = std::max({kForward, kBackwardQ, kBackwardKV});
  static_assert(kOperand % 128 == 0 && kScores % 128 == 0 && kProbs % 128 == 0 && kOut % 128 == 0);
  // The backward kernels stage their [kTile][kLdO] fp32 results in S and dP (contiguous) once the loop is over.
  static_assert(2 * kScores >= kOut);
};

// The backward kernels' shared memory, one region after another: four operand tiles (the block's own two,
// then the two streamed), two fp32 score tiles (S, dP), two bf16 probability tiles (dS, P), and the streamed
// rows' lse and D. The dQ kernel uses the regions up to dS (kBackwardQ bytes), the dK/dV kernel all of them.
template <int HS>
struct BackwardSmem {
  using L = Tc<HS>;
  unsigned char* base;
  __device__ bfloat* operand(int i) const { return reinterpret_cast<bfloat*>(base + i * L::kOperand); }
  __device__ float* scores(int i) const { return reinterpret_cast<float*>(base + 4 * L::kOperand + i * L::kScores); }
  __device__ bfloat* probs(int i) const {
    return reinterpret_cast<bfloat*>(base + 4 * L::kOperand + 2 * L::kScores + i * L::kProbs);
  }
  __device__ float* row_stats() const {
    return reinterpret_cast<float*>(base + 4 * L::kOperand + 2 * L::kScores + 2 * L::kProbs);
  }
};

// Elementwise steps: lane l of warp w works on block row 16w + l/2 (its `row`) and on half l%2 of the
// columns of that row's score tile (kHalf of them) or of its HS outputs (HS/2).
struct Lane {
  int warp, row, half;
  __device__ Lane()
      : warp(static_cast<int>(threadIdx.x) / kWarp),
        row(warp * kFrag + (static_cast<int>(threadIdx.x) % kWarp) / 2),
        half(static_cast<int>(threadIdx.x) % 2) {}
};

// Rows [r0, r0 + kTile) of a bf16 matrix (row stride `stride` elements, a row's HS values contiguous and
// 16-byte aligned) into the shared tile dst [kTile][kLdH], 16 bytes at a time; rows at or past T become zeros,
// so the products of masked rows stay finite. Called by all threads of the block.
template <int HS>
__device__ __forceinline__ void load_tile(bfloat* dst, const uint16_t* src, int64_t stride, int r0, int T) {
  constexpr int kChunks = HS / 8;  // 16-byte chunks per row
  for (int e = static_cast<int>(threadIdx.x); e < kTile * kChunks; e += kThreads) {
    const int r = e / kChunks, c = e % kChunks;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (r0 + r < T) v = *reinterpret_cast<const uint4*>(src + (r0 + r) * stride + c * 8);
    *reinterpret_cast<uint4*>(dst + r * Tc<HS>::kLdH + c * 8) = v;
  }
}

// s[16][kTile] (fp32, row pitch kLdS) = a[16][HS] * b[kTile][HS]^T: a warp's 16 rows against the kTile rows
// of a tile (scores, or dP). a and b are shared bf16 tiles with row pitch kLdH.
template <int HS>
__device__ __forceinline__ void warp_scores(float* s, const bfloat* a, const bfloat* b) {
  constexpr int ld = Tc<HS>::kLdH;
#pragma unroll 1
  for (int n = 0; n < kTile / kFrag; n++) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < HS / kFrag; k++) {
      FragA fa;
      FragBt fb;  // element (k', n') = b[n*16 + n'][k*16 + k']: rows n*16.. of b, read column-major = b^T
      wmma::load_matrix_sync(fa, a + k * kFrag, ld);
      wmma::load_matrix_sync(fb, b + n * kFrag * ld + k * kFrag, ld);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(s + n * kFrag, acc, kLdS, wmma::mem_row_major);
  }
}

// acc[j] += p[16][kTile] * v[kTile][HS] (column block j of HS/16): p a warp's rows of a shared bf16
// probability tile (row pitch kLdP: P or dS), v a shared operand tile (row pitch kLdH). The kTile terms of
// every element are added in the same order on every call.
template <int HS>
__device__ __forceinline__ void warp_accumulate(FragC (&acc)[Tc<HS>::kCols], const bfloat* p, const bfloat* v) {
  constexpr int ld = Tc<HS>::kLdH;
#pragma unroll
  for (int k = 0; k < kTile / kFrag; k++) {
    FragA fa;
    wmma::load_matrix_sync(fa, p + k * kFrag, kLdP);
#pragma unroll
    for (int j = 0; j < Tc<HS>::kCols; j++) {
      FragB fb;  // element (k', n') = v[k*16 + k'][j*16 + n']
      wmma::load_matrix_sync(fb, v + k * kFrag * ld + j * kFrag, ld);
      wmma::mma_sync(acc[j], fa, fb, acc[j]);
    }
  }
}

// dst row (r0 + row) += scale * acc for the warp's 16 rows (bf16 rows of pitch `stride`; the sum formed in
// fp32 from the old value and rounded once; rows at or past T are not written). The fragments go through the
// warp's rows of `stage` ([kTile][kLdO] fp32); then each lane adds half a row, 16 bytes at a time.
template <int HS>
__device__ __forceinline__ void add_to_rows(uint16_t* dst, int64_t stride, const FragC (&acc)[Tc<HS>::kCols],
                                            float* stage, float scale, int r0, int T) {
  constexpr int ld = Tc<HS>::kLdO;
  const Lane lane;
#pragma unroll
  for (int j = 0; j < Tc<HS>::kCols; j++)
    wmma::store_matrix_sync(stage + lane.warp * kFrag * ld + j * kFrag, acc[j], ld, wmma::mem_row_major);
  __syncwarp();
  const int t = r0 + lane.row;
  if (t < T) {
    const float* src = stage + lane.row * ld + lane.half * (HS / 2);
    uint16_t* d = dst + t * stride + lane.half * (HS / 2);
#pragma unroll
    for (int i = 0; i < HS / 2; i += kPack) {
      float x[kPack];
      load8(x, d + i, kPack, true);
#pragma unroll
      for (int e = 0; e < kPack; e++) x[e] += src[i + e] * scale;
      store8(d + i, x, kPack, true);
    }
  }
  __syncwarp();  // the stage may be written again
}

// Forward: a block per kTile queries of one (b, h) = (blockIdx.z, blockIdx.y), the longest rows first.
template <int HS>
__global__ void __launch_bounds__(kThreads) tc_forward_kernel(uint16_t* out, float* lse, const uint16_t* qkv, int T,
                                                              int C, int NH, float scale) {
  using L = Tc<HS>;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  bfloat* Qs = reinterpret_cast<bfloat*>(tc_smem);
  bfloat* Ks = reinterpret_cast<bfloat*>(tc_smem + L::kOperand);
  bfloat* Vs = reinterpret_cast<bfloat*>(tc_smem + 2 * L::kOperand);
  float* Ss = reinterpret_cast<float*>(tc_smem + 3 * L::kOperand);
  float* Os = reinterpret_cast<float*>(tc_smem + 3 * L::kOperand + L::kScores);
  bfloat* Ps = reinterpret_cast<bfloat*>(tc_smem + 3 * L::kOperand + L::kScores + L::kOut);
  const FlashGeometry g(static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), T, C, NH, HS);
  const int q0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kTile;
  const Lane lane;
  const int t = q0 + lane.row;  // this lane's query; rows past T compute (finite values) and write nothing
  const uint16_t* Q = qkv + g.qkv_base;
  load_tile<HS>(Qs, Q, g.C3, q0, T);
  for (int e = static_cast<int>(threadIdx.x); e < kTile * L::kLdO; e += kThreads) Os[e] = 0.0f;
  const int w0 = lane.warp * kFrag;  // the warp's first row
  const float* s_row = Ss + lane.row * kLdS + lane.half * kHalf;
  bfloat* p_row = Ps + lane.row * kLdP + lane.half * kHalf;
  float* o_row = Os + lane.row * L::kLdO + lane.half * (HS / 2);
  float m = -INFINITY, l = 0.0f;  // the row's running max and sum (the two lanes of a row hold the same bits)
  const int k_end = min(q0 + kTile, T);  // keys [0, k_end): up to the block's last query
  for (int k0 = 0; k0 < k_end; k0 += kTile) {
    __syncthreads();  // the previous tiles are consumed (first time: Q and the zeroed O are in place)
    load_tile<HS>(Ks, Q + C, g.C3, k0, T);
    load_tile<HS>(Vs, Q + 2 * C, g.C3, k0, T);
    __syncthreads();
    warp_scores<HS>(Ss + w0 * kLdS, Qs + w0 * L::kLdH, Ks);
    __syncwarp();
    float s[kHalf];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kHalf; c++) {
      const int key = k0 + lane.half * kHalf + c;
      s[c] = key <= t ? s_row[c] * scale : -INFINITY;  // causal mask (and keys past T, since key > t there)
      tile_max = fmaxf(tile_max, s[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));  // the row's other half
    // Key 0 is in the first tile and visible to every row, so m_new is finite from the first tile on.
    const float m_new = fmaxf(m, tile_max);
    const float alpha = expf(m - m_new);  // 0 on the first tile (m = -inf)
    float psum = 0.0f;
#pragma unroll
    for (int c = 0; c < kHalf; c++) {
      const float p = expf(s[c] - m_new);  // masked: exp(-inf) = 0
      psum += p;
      p_row[c] = __float2bfloat16_rn(p);
    }
    psum += __shfl_xor_sync(kFullMask, psum, 1);  // a + b on one lane, b + a on the other: the same bits
    l = l * alpha + psum;
    m = m_new;
#pragma unroll 8
    for (int d = 0; d < HS / 2; d++) o_row[d] *= alpha;
    __syncwarp();
    FragC o[L::kCols];
#pragma unroll
    for (int j = 0; j < L::kCols; j++)
      wmma::load_matrix_sync(o[j], Os + w0 * L::kLdO + j * kFrag, L::kLdO, wmma::mem_row_major);
    warp_accumulate<HS>(o, Ps + w0 * kLdP, Vs);
    __syncwarp();  // every lane has read its part of O before any lane overwrites it
#pragma unroll
    for (int j = 0; j < L::kCols; j++)
      wmma::store_matrix_sync(Os + w0 * L::kLdO + j * kFrag, o[j], L::kLdO, wmma::mem_row_major);
    __syncwarp();
  }
  if (t < T) {
    uint16_t* dst = out + g.out_base + static_cast<int64_t>(t) * C + lane.half * (HS / 2);
#pragma unroll
    for (int i = 0; i < HS / 2; i += kPack) {
      float x[kPack];
#pragma unroll
      for (int e = 0; e < kPack; e++) x[e] = o_row[i + e] / l;
      store8(dst + i, x, kPack, true);
    }
    if (lane.half == 0) lse[g.stat_base + t] = m + logf(l);
  }
}

// dQ: a block per kTile queries of one (b, h), key tiles 0 .. its last query, the longest rows first.
template <int HS>
__global__ void __launch_bounds__(kThreads) tc_backward_dq_kernel(uint16_t* dqkv, const float* D,
                                                                  const uint16_t* dout, const uint16_t* qkv,
                                                                  const float* lse, int T, int C, int NH,
                                                                  float scale) {
  using L = Tc<HS>;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  const BackwardSmem<HS> sm{tc_smem};
  bfloat *Qs = sm.operand(0), *dOs = sm.operand(1), *Ks = sm.operand(2), *Vs = sm.operand(3), *dSs = sm.probs(0);
  float *Ss = sm.scores(0), *dPs = sm.scores(1);
  const FlashGeometry g(static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), T, C, NH, HS);
  const int q0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kTile;
  const Lane lane;
  const int t = q0 + lane.row;
  const bool valid = t < T;  // rows past T get p = 0: a zero dQ row, not written
  const uint16_t* Q = qkv + g.qkv_base;
  load_tile<HS>(Qs, Q, g.C3, q0, T);
  load_tile<HS>(dOs, dout + g.out_base, C, q0, T);
  const float row_lse = valid ? lse[g.stat_base + t] : 0.0f, row_D = valid ? D[g.stat_base + t] : 0.0f;
  const int w0 = lane.warp * kFrag;
  const float* s_row = Ss + lane.row * kLdS + lane.half * kHalf;
  const float* dp_row = dPs + lane.row * kLdS + lane.half * kHalf;
  bfloat* ds_row = dSs + lane.row * kLdP + lane.half * kHalf;
  FragC dq[L::kCols];
#pragma unroll
  for (int j = 0; j < L::kCols; j++) wmma::fill_fragment(dq[j], 0.0f);
  const int k_end = min(q0 + kTile, T);
  for (int k0 = 0; k0 < k_end; k0 += kTile) {
    __syncthreads();
    load_tile<HS>(Ks, Q + C, g.C3, k0, T);
    load_tile<HS>(Vs, Q + 2 * C, g.C3, k0, T);
    __syncthreads();
    warp_scores<HS>(Ss + w0 * kLdS, Qs + w0 * L::kLdH, Ks);
    warp_scores<HS>(dPs + w0 * kLdS, dOs + w0 * L::kLdH, Vs);
    __syncwarp();
#pragma unroll
    for (int c = 0; c < kHalf; c++) {
      const int key = k0 + lane.half * kHalf + c;
      const float p = valid && key <= t ? expf(s_row[c] * scale - row_lse) : 0.0f;
      ds_row[c] = __float2bfloat16_rn(p * (dp_row[c] - row_D));
    }
    __syncwarp();
    warp_accumulate<HS>(dq, dSs + w0 * kLdP, Ks);
  }
  __syncthreads();  // every warp is done with S and dP: they become the staging area
  add_to_rows<HS>(dqkv + g.qkv_base, g.C3, dq, Ss, scale, q0, T);
}

// dK, dV: a block per kTile keys of one (b, h), query tiles from the block's first key to T.
template <int HS>
__global__ void __launch_bounds__(kThreads) tc_backward_dkv_kernel(uint16_t* dqkv, const float* D,
                                                                   const uint16_t* dout, const uint16_t* qkv,
                                                                   const float* lse, int T, int C, int NH,
                                                                   float scale) {
  using L = Tc<HS>;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  const BackwardSmem<HS> sm{tc_smem};
  bfloat *Ks = sm.operand(0), *Vs = sm.operand(1), *Qs = sm.operand(2), *dOs = sm.operand(3);
  bfloat *dSs = sm.probs(0), *Ps = sm.probs(1);
  float *Ss = sm.scores(0), *dPs = sm.scores(1), *lse_s = sm.row_stats(), *D_s = lse_s + kTile;
  const FlashGeometry g(static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), T, C, NH, HS);
  const int k0 = static_cast<int>(blockIdx.x) * kTile;
  const Lane lane;
  const int key = k0 + lane.row;  // keys past T: p = 0 (every query < T <= key), a zero row, not written
  const uint16_t* Q = qkv + g.qkv_base;
  const uint16_t* dO = dout + g.out_base;
  load_tile<HS>(Ks, Q + C, g.C3, k0, T);
  load_tile<HS>(Vs, Q + 2 * C, g.C3, k0, T);
  const int w0 = lane.warp * kFrag;
  const float* s_row = Ss + lane.row * kLdS + lane.half * kHalf;
  const float* dp_row = dPs + lane.row * kLdS + lane.half * kHalf;
  bfloat* p_row = Ps + lane.row * kLdP + lane.half * kHalf;
  bfloat* ds_row = dSs + lane.row * kLdP + lane.half * kHalf;
  FragC dk[L::kCols], dv[L::kCols];
#pragma unroll
  for (int j = 0; j < L::kCols; j++) {
    wmma::fill_fragment(dk[j], 0.0f);
    wmma::fill_fragment(dv[j], 0.0f);
  }
  for (int t0 = k0; t0 < T; t0 += kTile) {  // k0 is a multiple of kTile: queries before it see none of these keys
    __syncthreads();
    load_tile<HS>(Qs, Q, g.C3, t0, T);
    load_tile<HS>(dOs, dO, C, t0, T);
    for (int c = static_cast<int>(threadIdx.x); c < kTile; c += kThreads) {
      const int tq = t0 + c;
      lse_s[c] = tq < T ? lse[g.stat_base + tq] : 0.0f;
      D_s[c] = tq < T ? D[g.stat_base + tq] : 0.0f;
    }
    __syncthreads();
    warp_scores<HS>(Ss + w0 * kLdS, Ks + w0 * L::kLdH, Qs);    // S^T: the warp's 16 keys x the tile's queries
    warp_scores<HS>(dPs + w0 * kLdS, Vs + w0 * L::kLdH, dOs);  // dP^T = V dO^T
    __syncwarp();
#pragma unroll
    for (int c = 0; c < kHalf; c++) {
      const int col = lane.half * kHalf + c, tq = t0 + col;
      const float p = tq >= key && tq < T ? expf(s_row[c] * scale - lse_s[col]) : 0.0f;
      p_row[c] = __float2bfloat16_rn(p);
      ds_row[c] = __float2bfloat16_rn(p * (dp_row[c] - D_s[col]));
    }
    __syncwarp();
    warp_accumulate<HS>(dv, Ps + w0 * kLdP, dOs);
    warp_accumulate<HS>(dk, dSs + w0 * kLdP, Qs);
  }
  __syncthreads();  // every warp is done with S and dP: they become the staging area
  add_to_rows<HS>(dqkv + g.qkv_base + C, g.C3, dk, Ss, scale, k0, T);
  add_to_rows<HS>(dqkv + g.qkv_base + 2 * C, g.C3, dv, Ss, 1.0f, k0, T);
}

dim3 tc_grid(int B, int T, int NH) { return dim3(static_cast<unsigned>((T + kTile - 1) / kTile), NH, B); }

// Raises the kernel's dynamic shared-memory limit to `smem` (above the default 48 KiB; per device, so on
// every launch) and launches it on the kernels' stream.
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), size_t smem, dim3 grid, Args... args) {
  AXONN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<grid, kThreads, smem, stream()>>>(args...);
  AXONN_CUDA_CHECK_LAUNCH();
}

// Calls f(std::integral_constant<int, HS>) for HS = 64 or 128.
template <typename F>
void with_tc_head_size(int HS, F&& f) {
  if (HS == 64) return f(std::integral_constant<int, 64>{});
  if (HS == 128) return f(std::integral_constant<int, 128>{});
  throw InvalidArgument("cuda bf16 attention: no tensor-core kernel for head size " + std::to_string(HS) +
                        " (64 or 128)");
}

static_assert(mma_attention::kThreads == kThreads, "launch() starts blocks of kThreads");

// The mma kernels' shared memory for HS: forward 3 tiles, backward 4 tiles and two row arrays.
template <int HS>
constexpr size_t mma_smem() {
  using L = mma_attention::Layout<HS>;
  return L::kForward > L::kBackward ? L::kForward : L::kBackward;
}

}  // namespace

size_t mma_attention_smem(int HS) { return HS == 64 ? mma_smem<64>() : HS == 128 ? mma_smem<128>() : 0; }

void mma_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  const int HS = C / NH;
  const float scale_log2 = 1.0f / sqrtf(static_cast<float>(HS)) * mma_attention::kLog2e;
  with_tc_head_size(HS, [&](auto hs) {
    constexpr int kHS = decltype(hs)::value;
    using L = mma_attention::Layout<kHS>;
    launch(mma_attention::forward_kernel<kHS>, L::kForward, mma_attention::grid_of(B, T, NH), out, lse, qkv, T, C,
           NH, scale_log2);
  });
}

void mma_attention_backward(bf16* dqkv, const float* D, const bf16* dout, const bf16* qkv, const float* lse, int B,
                            int T, int C, int NH) {
  const int HS = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(HS)), scale_log2 = scale * mma_attention::kLog2e;
  with_tc_head_size(HS, [&](auto hs) {
    constexpr int kHS = decltype(hs)::value;
    using L = mma_attention::Layout<kHS>;
    const dim3 grid = mma_attention::grid_of(B, T, NH);
    launch(mma_attention::backward_dq_kernel<kHS>, L::kBackward, grid, dqkv, D, dout, qkv, lse, T, C, NH, scale,
           scale_log2);
    launch(mma_attention::backward_dkv_kernel<kHS>, L::kBackward, grid, dqkv, D, dout, qkv, lse, T, C, NH, scale,
           scale_log2);
  });
}

size_t tc_attention_smem(int HS) { return HS == 64 ? Tc<64>::kMost : HS == 128 ? Tc<128>::kMost : 0; }

void tc_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  const int HS = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));  // as the CUDA-core kernel
  with_tc_head_size(HS, [&](auto hs) {
    constexpr int kHS = decltype(hs)::value;
    launch(tc_forward_kernel<kHS>, Tc<kHS>::kForward, tc_grid(B, T, NH), out, lse, qkv, T, C, NH, scale);
  });
}

void tc_attention_backward(bf16* dqkv, const float* D, const bf16* dout, const bf16* qkv, const float* lse, int B,
                           int T, int C, int NH) {
  const int HS = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  with_tc_head_size(HS, [&](auto hs) {
    constexpr int kHS = decltype(hs)::value;
    launch(tc_backward_dq_kernel<kHS>, Tc<kHS>::kBackwardQ, tc_grid(B, T, NH), dqkv, D, dout, qkv, lse, T, C, NH,
           scale);
    launch(tc_backward_dkv_kernel<kHS>, Tc<kHS>::kBackwardKV, tc_grid(B, T, NH), dqkv, D, dout, qkv, lse, T, C, NH,
           scale);
  });
}

}  // namespace axonn::kernels::cuda_bf16::detail
