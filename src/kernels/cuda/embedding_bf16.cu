// kernels/cuda/embedding_bf16.cu — token and position embeddings in bf16 (gradients fp32).
#include "bf16.cuh"

namespace axonn::kernels::cuda_bf16 {
namespace {

using detail::global_index;
using detail::global_stride;
using detail::kPack;

constexpr int kThreads = 256;

// out[n, c] = wte[inp[n] - row_begin, c] for tokens in the range, else 0. Packs of 8 never cross a row
// when C % 8 == 0 (checked by the caller for `vec`); the scalar path handles any C.
struct EmbeddingForward {
  uint16_t* out;
  const int* inp;
  const uint16_t* wte;
  int row_begin, R, C;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    if (vec) {
      const int64_t n = i / C;
      const int c = static_cast<int>(i % C);
      const int r = inp[n] - row_begin;
      uint4 u = make_uint4(0, 0, 0, 0);
      if (r >= 0 && r < R) u = *reinterpret_cast<const uint4*>(wte + static_cast<int64_t>(r) * C + c);
      *reinterpret_cast<uint4*>(out + i) = u;  // a copy: no rounding involved
      return;
    }
    for (int j = 0; j < cnt; j++) {
      const int64_t n = (i + j) / C;
      const int c = static_cast<int>((i + j) % C);
      const int r = inp[n] - row_begin;
      out[i + j] = (r >= 0 && r < R) ? wte[static_cast<int64_t>(r) * C + c] : uint16_t{0};
    }
  }
};

// dwte[r, c] += dout[n, c]: tokens repeat, so the scatter adds atomically (fp32).
__global__ void embedding_backward_kernel(float* dwte, const uint16_t* dout, const int* inp, int row_begin, int R,
                                          int64_t N, int C) {
  for (int64_t i = global_index(); i < N * C; i += global_stride()) {
    const int64_t n = i / C;
    const int r = inp[n] - row_begin;
    if (r >= 0 && r < R) atomicAdd(&dwte[static_cast<int64_t>(r) * C + i % C], detail::widen(dout[i]));
  }
}

// out[b, t, c] += wpe[t, c]: element i of out reads wpe[i % (T*C)] (a pack stays inside one b when
// T*C % 8 == 0, checked by the caller for `vec`).
struct PositionForward {
  uint16_t* out;
  const uint16_t* wpe;
  int64_t TC;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float x[kPack], w[kPack];
    detail::load8(x, out + i, cnt, vec);
    if (vec) {
      detail::load8(w, wpe + i % TC, cnt, true);
    } else {
#pragma unroll
      for (int j = 0; j < kPack; j++) w[j] = j < cnt ? detail::widen(wpe[(i + j) % TC]) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kPack; j++) x[j] += w[j];
    detail::store8(out + i, x, cnt, vec);
  }
};

// dwpe[t, c] += sum over b of dout[b, t, c], one thread per (t, c), b in order (deterministic).
__global__ void position_backward_kernel(float* dwpe, const uint16_t* dout, int B, int64_t TC) {
  for (int64_t i = global_index(); i < TC; i += global_stride()) {
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += detail::widen(dout[b * TC + i]);
    dwpe[i] += s;
  }
}

}  // namespace

void embedding_forward(bf16* out, const int* inp, const bf16* wte, int row_begin, int R, int64_t N, int C) {
  // out [N,C], inp [N], wte [R,C] (vocabulary rows [row_begin, row_begin + R))
  const bool vec = C % kPack == 0 && detail::all_aligned16({out, wte});
  detail::launch_packs(EmbeddingForward{out, inp, wte, row_begin, R, C}, N * C, vec);
}

void embedding_backward(float* dwte, const bf16* dout, const int* inp, int row_begin, int R, int64_t N, int C) {
  // dwte [R,C] fp32 (added to), dout [N,C], inp [N]
  if (N == 0 || C == 0) return;
  embedding_backward_kernel<<<detail::grid_for(N * C, kThreads), kThreads, 0, detail::stream()>>>(
      dwte, dout, inp, row_begin, R, N, C);
  AXONN_CUDA_CHECK_LAUNCH();
}

void position_forward(bf16* out, const bf16* wpe, int B, int T, int C) {
  // out [B,T,C] (added to), wpe [maxT,C]
  const int64_t TC = static_cast<int64_t>(T) * C;
  if (TC == 0) return;
  const bool vec = TC % kPack == 0 && detail::all_aligned16({out, wpe});
  detail::launch_packs(PositionForward{out, wpe, TC}, B * TC, vec);
}

void position_backward(float* dwpe, const bf16* dout, int B, int T, int C) {
  // dwpe [maxT,C] fp32 (added to), dout [B,T,C]
  const int64_t TC = static_cast<int64_t>(T) * C;
  if (TC == 0) return;
  position_backward_kernel<<<detail::grid_for(TC, kThreads), kThreads, 0, detail::stream()>>>(dwpe, dout, B, TC);
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace axonn::kernels::cuda_bf16
