// kernels/cuda/attention_bf16.cu — flash-style causal self-attention in bf16, forward and backward, never
// materialising the T x T scores (FlashAttention-2's split of the work): the CUDA-core implementation (fp32
// math), and the choice between it and the tensor-core one (attention_bf16_tc.cu, head sizes 64 and 128; see
// FlashAttention in kernels/cuda.hpp and AXONN_FLASH_ATTENTION below).
//
// CUDA cores. q, k, v are read straight out of qkv [B,T,3C] (row stride 3C, heads HS apart). Work split: a
// block takes kBr = 64 rows (queries, or keys in the dK/dV kernel) of one (b, h); kTPR = 4 adjacent threads
// share a row, each owning a quarter of the head dimensions in interleaved chunks of 4 (or 2) floats, read
// from shared memory with one 16- (or 8-) byte load per chunk (dim_of, read_row); partial dot products are
// completed with two xor-shuffles, which give the 4 threads bit-identical sums. The other side (keys, or
// queries) streams through shared memory in tiles of kBc = 32, widened to fp32; only the causal tiles are
// visited.
//   forward: online softmax in fp32 (running max m, running sum l, rescaled accumulator), writes
//            out = o / l (bf16) and lse = m + log l (fp32).
//   backward: D = rowsum(dout * out) -> scratch (both implementations); dQ kernel over query tiles:
//            p = exp(s - lse), ds = p (dout . v - D), dq = scale * sum ds k; dK/dV kernel over key tiles:
//            dv = sum p dout, dk = scale * sum ds q. Each gradient element is summed by one thread in a fixed
//            order and added to the old bf16 value in fp32, rounded once: deterministic, no atomics.
// Head sizes: any multiple of 8 up to 128 (a template on HS, so the per-thread arrays live in registers).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "attention_bf16.cuh"
#include "axonn/kernels/cuda.hpp"

namespace axonn::kernels::cuda_bf16 {
namespace {

using detail::FlashGeometry;
using detail::kWarp;
using detail::widen;
using kernels::cuda::detail::kFullMask;
using kernels::cuda::detail::warp_sum;

constexpr int kTPR = 4;               // threads per row
constexpr int kBr = 64;               // rows per block
constexpr int kBc = 32;               // tile of the streamed side
constexpr int kThreads = kBr * kTPR;  // 256
constexpr int kMaxHS = 128;

// Sum over the 4 threads of a row (lanes 4i .. 4i+3); all four get the same bits.
__device__ __forceinline__ float row_sum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  v += __shfl_xor_sync(kFullMask, v, 2);
  return v;
}

// Which head dimensions a thread owns: register slot j of thread `part` is dimension
// ((j / VW) * kTPR + part) * VW + j % VW, i.e. the 4 threads of a row take turns in chunks of VW floats
// (VW = 4 when HS % 16 == 0, else 2). A thread then reads its slots of a shared-memory row with 8- or 16-byte
// loads, and the 4 threads of a row read 4 adjacent chunks (no bank conflicts; the 8 rows of a warp read the
// same addresses, a broadcast).
template <int HS>
constexpr int kVW = HS % 16 == 0 ? 4 : 2;
template <int HS>
__device__ __forceinline__ int dim_of(int j, int part) {
  constexpr int VW = kVW<HS>;
  return ((j / VW) * kTPR + part) * VW + j % VW;
}
// x[j] = row[dim_of(j, part)] for the thread's HS / kTPR slots (row: a 16-byte aligned shared-memory row).
template <int HS>
__device__ __forceinline__ void read_row(float (&x)[HS / kTPR], const float* row, int part) {
  constexpr int VW = kVW<HS>;
#pragma unroll
  for (int ch = 0; ch < HS / kTPR / VW; ch++) {
    const float* p = row + (ch * kTPR + part) * VW;
    if constexpr (VW == 4) {
      const float4 v = *reinterpret_cast<const float4*>(p);
      x[ch * 4] = v.x, x[ch * 4 + 1] = v.y, x[ch * 4 + 2] = v.z, x[ch * 4 + 3] = v.w;
    } else {
      const float2 v = *reinterpret_cast<const float2*>(p);
      x[ch * 2] = v.x, x[ch * 2 + 1] = v.y;
    }
  }
}

// Copies rows [r0, r0 + kBc) of two bf16 matrices (row strides sx, sy; rows >= T read as 0) into fp32 tiles.
template <int HS>
__device__ __forceinline__ void load_tiles(float (*x)[HS], float (*y)[HS], const uint16_t* xs, int64_t sx,
                                           const uint16_t* ys, int64_t sy, int r0, int T) {
  for (int e = threadIdx.x; e < kBc * HS; e += kThreads) {
    const int c = e / HS, d = e % HS, r = r0 + c;
    x[c][d] = r < T ? widen(xs[r * sx + d]) : 0.0f;
    y[c][d] = r < T ? widen(ys[r * sy + d]) : 0.0f;
  }
}

template <int HS>
__global__ void __launch_bounds__(kThreads) flash_forward_kernel(uint16_t* out, float* lse, const uint16_t* qkv, int T,
                                                                 int C, int NH, float scale) {
  constexpr int DPT = HS / kTPR;
  __shared__ __align__(16) float Ks[kBc][HS];
  __shared__ __align__(16) float Vs[kBc][HS];
  const FlashGeometry g(static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), T, C, NH, HS);
  const int q0 = static_cast<int>(blockIdx.x) * kBr, part = threadIdx.x % kTPR;
  const int t = q0 + threadIdx.x / kTPR;
  const int tq = t < T ? t : T - 1;  // rows past T compute on the last query and write nothing
  const uint16_t* Q = qkv + g.qkv_base;
  float q[DPT], o[DPT];
#pragma unroll
  for (int j = 0; j < DPT; j++) {
    q[j] = widen(Q[tq * g.C3 + dim_of<HS>(j, part)]);
    o[j] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int t_last = (q0 + kBr < T ? q0 + kBr : T) - 1;
  for (int k0 = 0; k0 <= t_last; k0 += kBc) {
    __syncthreads();  // the previous tile is consumed
    load_tiles<HS>(Ks, Vs, Q + C, g.C3, Q + 2 * C, g.C3, k0, T);
    __syncthreads();
    float s[kBc];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kBc; c++) {
      float kr[DPT];
      read_row<HS>(kr, Ks[c], part);
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < DPT; j++) acc += q[j] * kr[j];
      acc = row_sum(acc);
      s[c] = k0 + c <= tq ? acc * scale : -INFINITY;  // causal mask (and keys past T, since tq < T)
      tile_max = fmaxf(tile_max, s[c]);
    }
    // Key 0 is in the first tile and visible to every row, so m_new is finite from the first tile on.
    const float m_new = fmaxf(m, tile_max);
    const float alpha = expf(m - m_new);  // 0 on the first tile (m = -inf)
    float psum = 0.0f;
#pragma unroll
    for (int c = 0; c < kBc; c++) {
      s[c] = expf(s[c] - m_new);  // masked: exp(-inf) = 0
      psum += s[c];
    }
    l = l * alpha + psum;
#pragma unroll
    for (int j = 0; j < DPT; j++) o[j] *= alpha;
#pragma unroll
    for (int c = 0; c < kBc; c++) {
      float vr[DPT];
      read_row<HS>(vr, Vs[c], part);
#pragma unroll
      for (int j = 0; j < DPT; j++) o[j] += s[c] * vr[j];
    }
    m = m_new;
  }
  if (t < T) {
    uint16_t* orow = out + g.out_base + static_cast<int64_t>(t) * C;
#pragma unroll
    for (int j = 0; j < DPT; j++) orow[dim_of<HS>(j, part)] = detail::round_bf16(o[j] / l);
    if (part == 0) lse[g.stat_base + t] = m + logf(l);
  }
}

// D[b,h,t] = sum_d dout * out (fp32 from the bf16 values): one warp per (b, t, h).
__global__ void flash_rowdot_kernel(float* D, const uint16_t* dout, const uint16_t* out, int64_t rows, int T, int NH,
                                    int HS) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (w >= rows) return;  // rows = B*T*NH; w = (b*T + t)*NH + h
  const int h = static_cast<int>(w % NH);
  const int64_t bt = w / NH;
  const int64_t b = bt / T, t = bt % T;
  const int64_t base = bt * NH * HS + static_cast<int64_t>(h) * HS;  // (b*T + t)*C + h*HS
  float s = 0.0f;
  for (int d = lane; d < HS; d += kWarp) s += widen(dout[base + d]) * widen(out[base + d]);
  s = warp_sum(s);
  if (lane == 0) D[(b * NH + h) * T + t] = s;
}

// dQ: a block per kBr queries of one (b, h), key tiles 0 .. last query.
template <int HS>
__global__ void __launch_bounds__(kThreads) flash_backward_dq_kernel(uint16_t* dqkv, const float* D,
                                                                     const uint16_t* dout, const uint16_t* qkv,
                                                                     const float* lse, int T, int C, int NH,
                                                                     float scale) {
  constexpr int DPT = HS / kTPR;
  __shared__ __align__(16) float Ks[kBc][HS];
  __shared__ __align__(16) float Vs[kBc][HS];
  const FlashGeometry g(static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), T, C, NH, HS);
  const int q0 = static_cast<int>(blockIdx.x) * kBr, part = threadIdx.x % kTPR;
  const int t = q0 + threadIdx.x / kTPR;
  const int tq = t < T ? t : T - 1;
  const uint16_t* Q = qkv + g.qkv_base;
  const uint16_t* dO = dout + g.out_base;
  float q[DPT], dy[DPT], dq[DPT];
#pragma unroll
  for (int j = 0; j < DPT; j++) {
    q[j] = widen(Q[tq * g.C3 + dim_of<HS>(j, part)]);
    dy[j] = widen(dO[static_cast<int64_t>(tq) * C + dim_of<HS>(j, part)]);
    dq[j] = 0.0f;
  }
  const float row_lse = lse[g.stat_base + tq], row_D = D[g.stat_base + tq];
  const int t_last = (q0 + kBr < T ? q0 + kBr : T) - 1;
  for (int k0 = 0; k0 <= t_last; k0 += kBc) {
    __syncthreads();
    load_tiles<HS>(Ks, Vs, Q + C, g.C3, Q + 2 * C, g.C3, k0, T);
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < kBc; c++) {
      float kr[DPT], vr[DPT];
      read_row<HS>(kr, Ks[c], part);
      read_row<HS>(vr, Vs[c], part);
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int j = 0; j < DPT; j++) {
        s += q[j] * kr[j];
        dp += dy[j] * vr[j];
      }
      s = row_sum(s);
      dp = row_sum(dp);
      const float p = k0 + c <= tq ? expf(s * scale - row_lse) : 0.0f;
      const float ds = p * (dp - row_D);
#pragma unroll
      for (int j = 0; j < DPT; j++) dq[j] += ds * kr[j];
    }
  }
  if (t < T) {
    uint16_t* dQ = dqkv + g.qkv_base + static_cast<int64_t>(t) * g.C3;
#pragma unroll
    for (int j = 0; j < DPT; j++) {
      const int d = dim_of<HS>(j, part);
      dQ[d] = detail::round_bf16(widen(dQ[d]) + dq[j] * scale);
    }
  }
}

// dK, dV: a block per kBr keys of one (b, h), query tiles from the block's first key to T.
template <int HS>
__global__ void __launch_bounds__(kThreads) flash_backward_dkv_kernel(uint16_t* dqkv, const float* D,
                                                                      const uint16_t* dout, const uint16_t* qkv,
                                                                      const float* lse, int T, int C, int NH,
                                                                      float scale) {
  constexpr int DPT = HS / kTPR;
  __shared__ __align__(16) float Qs[kBc][HS];
  __shared__ __align__(16) float dOs[kBc][HS];
  __shared__ float lse_s[kBc], D_s[kBc];
  const FlashGeometry g(static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), T, C, NH, HS);
  const int k0 = static_cast<int>(blockIdx.x) * kBr, part = threadIdx.x % kTPR;
  const int key = k0 + threadIdx.x / kTPR;
  const int kq = key < T ? key : T - 1;  // rows past T compute on the last key and write nothing
  const uint16_t* Q = qkv + g.qkv_base;
  const uint16_t* dO = dout + g.out_base;
  float k[DPT], v[DPT], dk[DPT], dv[DPT];
#pragma unroll
  for (int j = 0; j < DPT; j++) {
    k[j] = widen(Q[kq * g.C3 + C + dim_of<HS>(j, part)]);
    v[j] = widen(Q[kq * g.C3 + 2 * C + dim_of<HS>(j, part)]);
    dk[j] = 0.0f;
    dv[j] = 0.0f;
  }
  for (int t0 = k0; t0 < T; t0 += kBc) {  // k0 is a multiple of kBc: queries before it see none of these keys
    __syncthreads();
    load_tiles<HS>(Qs, dOs, Q, g.C3, dO, C, t0, T);
    for (int c = threadIdx.x; c < kBc; c += kThreads) {
      const int r = t0 + c;
      lse_s[c] = r < T ? lse[g.stat_base + r] : 0.0f;
      D_s[c] = r < T ? D[g.stat_base + r] : 0.0f;
    }
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < kBc; c++) {
      const int tq = t0 + c;
      float qr[DPT], dyr[DPT];
      read_row<HS>(qr, Qs[c], part);
      read_row<HS>(dyr, dOs[c], part);
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int j = 0; j < DPT; j++) {
        s += qr[j] * k[j];
        dp += dyr[j] * v[j];
      }
      s = row_sum(s);
      dp = row_sum(dp);
      const float p = (tq >= kq && tq < T) ? expf(s * scale - lse_s[c]) : 0.0f;
      const float ds = p * (dp - D_s[c]);
#pragma unroll
      for (int j = 0; j < DPT; j++) {
        dv[j] += p * dyr[j];
        dk[j] += ds * qr[j];
      }
    }
  }
  if (key < T) {
    uint16_t* row = dqkv + g.qkv_base + static_cast<int64_t>(key) * g.C3;
#pragma unroll
    for (int j = 0; j < DPT; j++) {
      const int d = dim_of<HS>(j, part);
      row[C + d] = detail::round_bf16(widen(row[C + d]) + dk[j] * scale);
      row[2 * C + d] = detail::round_bf16(widen(row[2 * C + d]) + dv[j]);
    }
  }
}

// Checks the shape and returns HS.
int head_size(int B, int C, int NH) {
  AXONN_CHECK_ARG(NH > 0 && C % NH == 0, "cuda bf16 attention: channels C = ", C,
                  " must be a multiple of the heads NH = ", NH);
  const int HS = C / NH;
  AXONN_CHECK_ARG(HS % 8 == 0 && HS >= 8 && HS <= kMaxHS, "cuda bf16 attention: head size C/NH = ", HS,
                  " is not supported by the flash kernel (a multiple of 8 up to ", kMaxHS,
                  "); choose n_embd and n_head to match");
  AXONN_CHECK_ARG(B <= 65535 && NH <= 65535, "cuda bf16 attention: B = ", B, " and NH = ", NH,
                  " must be at most 65535 (grid limits); use smaller micro-batches");
  return HS;
}

dim3 grid(int B, int T, int NH) { return dim3(static_cast<unsigned>((T + kBr - 1) / kBr), NH, B); }

// Calls f(std::integral_constant<int, HS>) for the runtime head size (a multiple of 8 up to 128).
template <typename F>
void with_head_size(int HS, F&& f) {
  switch (HS) {
#define AXONN_HS_CASE(n) \
  case n: return f(std::integral_constant<int, n>{});
    AXONN_HS_CASE(8) AXONN_HS_CASE(16) AXONN_HS_CASE(24) AXONN_HS_CASE(32) AXONN_HS_CASE(40) AXONN_HS_CASE(48)
    AXONN_HS_CASE(56) AXONN_HS_CASE(64) AXONN_HS_CASE(72) AXONN_HS_CASE(80) AXONN_HS_CASE(88) AXONN_HS_CASE(96)
    AXONN_HS_CASE(104) AXONN_HS_CASE(112) AXONN_HS_CASE(120) AXONN_HS_CASE(128)
#undef AXONN_HS_CASE
    default: break;
  }
  throw InvalidArgument("cuda bf16 attention: no kernel for head size " + std::to_string(HS));
}

// Which implementation a call asks for: kDefault reads AXONN_FLASH_ATTENTION (unset, empty or "auto": the
// default choice; "simt": the CUDA-core kernels; "mma": the register-resident tensor-core kernels). Read on
// every call, so a test can set it.
FlashAttention requested(FlashAttention asked) {
  if (asked != FlashAttention::kDefault) return asked;
  const char* v = std::getenv("AXONN_FLASH_ATTENTION");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return FlashAttention::kDefault;
  if (std::strcmp(v, "simt") == 0) return FlashAttention::kCudaCores;
  if (std::strcmp(v, "mma") == 0) return FlashAttention::kTensorCoresMma;
  throw InvalidArgument(std::string("AXONN_FLASH_ATTENTION=") + v +
                        ": expected simt (the CUDA-core flash attention), mma (tensor cores, register-resident "
                        "fragments) or auto (tensor cores where they apply, the default)");
}

// The shared memory the current device can give one block.
size_t block_smem_limit() {
  int device = 0, bytes = 0;
  AXONN_CUDA_CHECK(cudaGetDevice(&device));
  AXONN_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return static_cast<size_t>(bytes);
}

// The implementation that runs for head size HS on the current device with these bf16 buffers: either
// tensor-core implementation needs HS 64 or 128, its shared memory, and every buffer 16-byte aligned; asked
// for where it does not apply, an InvalidArgument that says which. kDefault: the WMMA tensor-core kernels
// where they apply, else the CUDA cores (the mma kernels are chosen only by name until measured on a GPU).
FlashAttention resolve(FlashAttention asked, int HS, std::initializer_list<const void*> buffers) {
  const FlashAttention want = requested(asked);
  if (want == FlashAttention::kCudaCores) return want;
  const bool mma = want == FlashAttention::kTensorCoresMma;
  const size_t need = mma ? detail::mma_attention_smem(HS) : detail::tc_attention_smem(HS);
  const bool fits = need > 0 && need <= block_smem_limit(), aligned = detail::all_aligned16(buffers);
  if (want != FlashAttention::kDefault) {
    const char* name = mma ? "cuda bf16 attention on tensor cores (mma)" : "cuda bf16 attention on tensor cores";
    AXONN_CHECK_ARG(need > 0, name, ": head size ", HS,
                    " is not supported (64 or 128; the CUDA-core kernels take any multiple of 8 up to 128)");
    AXONN_CHECK_ARG(fits, name, ": the device gives a block ", block_smem_limit(),
                    " bytes of shared memory, the kernels need ", need);
    AXONN_CHECK_ARG(aligned, name, ": every bf16 buffer must be 16-byte aligned");
    return want;
  }
  return fits && aligned ? FlashAttention::kTensorCores : FlashAttention::kCudaCores;
}

void forward_with(FlashAttention asked, bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  // out [B,T,C], lse [B,NH,T] fp32, qkv [B,T,3C]
  const int HS = head_size(B, C, NH);
  if (B == 0 || T == 0) return;
  const FlashAttention impl = resolve(asked, HS, {out, qkv});
  if (impl == FlashAttention::kTensorCores) {
    detail::tc_attention_forward(out, lse, qkv, B, T, C, NH);
    return;
  }
  if (impl == FlashAttention::kTensorCoresMma) {
    detail::mma_attention_forward(out, lse, qkv, B, T, C, NH);
    return;
  }
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  with_head_size(HS, [&](auto hs) {
    flash_forward_kernel<decltype(hs)::value>
        <<<grid(B, T, NH), kThreads, 0, detail::stream()>>>(out, lse, qkv, T, C, NH, scale);
    AXONN_CUDA_CHECK_LAUNCH();
  });
}

void backward_with(FlashAttention asked, bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv,
                   const bf16* out, const float* lse, int B, int T, int C, int NH) {
  // dqkv [B,T,3C] (added to), scratch [B,NH,T] fp32 (overwritten with D), dout [B,T,C], qkv [B,T,3C],
  // out [B,T,C] and lse [B,NH,T] from the forward
  const int HS = head_size(B, C, NH);
  if (B == 0 || T == 0) return;
  // `out` is read only by the row-dot kernel below (element by element): any alignment.
  const FlashAttention impl = resolve(asked, HS, {dqkv, dout, qkv});
  const int64_t rows = static_cast<int64_t>(B) * T * NH;
  constexpr int kWarpsPerBlock = 8;
  const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  AXONN_CHECK_ARG(blocks <= 0x7fffffffLL, "cuda bf16 attention: B*T*NH = ", rows, " rows exceed the grid");
  flash_rowdot_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarp, 0, detail::stream()>>>(
      scratch, dout, out, rows, T, NH, HS);
  AXONN_CUDA_CHECK_LAUNCH();
  if (impl == FlashAttention::kTensorCores) {
    detail::tc_attention_backward(dqkv, scratch, dout, qkv, lse, B, T, C, NH);
    return;
  }
  if (impl == FlashAttention::kTensorCoresMma) {
    detail::mma_attention_backward(dqkv, scratch, dout, qkv, lse, B, T, C, NH);
    return;
  }
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  with_head_size(HS, [&](auto hs) {
    constexpr int kHS = decltype(hs)::value;
    flash_backward_dq_kernel<kHS>
        <<<grid(B, T, NH), kThreads, 0, detail::stream()>>>(dqkv, scratch, dout, qkv, lse, T, C, NH, scale);
    AXONN_CUDA_CHECK_LAUNCH();
    flash_backward_dkv_kernel<kHS>
        <<<grid(B, T, NH), kThreads, 0, detail::stream()>>>(dqkv, scratch, dout, qkv, lse, T, C, NH, scale);
    AXONN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  forward_with(FlashAttention::kDefault, out, lse, qkv, B, T, C, NH);
}
void attention_forward_cuda_cores(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  forward_with(FlashAttention::kCudaCores, out, lse, qkv, B, T, C, NH);
}
void attention_forward_tensor_cores(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  forward_with(FlashAttention::kTensorCores, out, lse, qkv, B, T, C, NH);
}

void attention_forward_tensor_cores_mma(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  forward_with(FlashAttention::kTensorCoresMma, out, lse, qkv, B, T, C, NH);
}

void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                        const float* lse, int B, int T, int C, int NH) {
  backward_with(FlashAttention::kDefault, dqkv, scratch, dout, qkv, out, lse, B, T, C, NH);
}
void attention_backward_cuda_cores(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                                   const float* lse, int B, int T, int C, int NH) {
  backward_with(FlashAttention::kCudaCores, dqkv, scratch, dout, qkv, out, lse, B, T, C, NH);
}
void attention_backward_tensor_cores(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv,
                                     const bf16* out, const float* lse, int B, int T, int C, int NH) {
  backward_with(FlashAttention::kTensorCores, dqkv, scratch, dout, qkv, out, lse, B, T, C, NH);
}
void attention_backward_tensor_cores_mma(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv,
                                         const bf16* out, const float* lse, int B, int T, int C, int NH) {
  backward_with(FlashAttention::kTensorCoresMma, dqkv, scratch, dout, qkv, out, lse, B, T, C, NH);
}

}  // namespace axonn::kernels::cuda_bf16

namespace axonn::kernels {

FlashAttention cuda_flash_attention_for(int head_size) {
  return cuda_bf16::resolve(FlashAttention::kDefault, head_size, {});
}

}  // namespace axonn::kernels
