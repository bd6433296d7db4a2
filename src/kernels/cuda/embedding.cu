// kernels/cuda/embedding.cu — token embedding over a vocabulary range, and position embedding, for both tables
// from the same templates over the storage type (parameter gradients fp32 in both).
#include "axonn/kernels/ops.hpp"
#include "columns.cuh"
#include "packs.cuh"

namespace axonn::kernels::cuda {
namespace {

using detail::global_index;
using detail::global_stride;
using detail::kPack;
using detail::load_f32;

constexpr int kThreads = 256;

// out[n, c] = wte[inp[n] - row_begin, c] for tokens in the range, else 0: a copy, no rounding. Packs of 8
// never cross a row when C % 8 == 0 (checked by the caller for `vec`); the scalar path handles any C.
template <typename E>
struct EmbeddingForward {
  E* out;
  const int* inp;
  const E* wte;
  int row_begin, R, C;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    if (vec) {
      const int r = inp[i / C] - row_begin;
      if (r >= 0 && r < R) {
        detail::copy8(out + i, wte + static_cast<int64_t>(r) * C + i % C, kPack, true);
      } else {
        const float zeros[kPack] = {};
        detail::store8(out + i, zeros, kPack, true);
      }
      return;
    }
    for (int j = 0; j < cnt; j++) {
      const int r = inp[(i + j) / C] - row_begin;
      out[i + j] = (r >= 0 && r < R) ? wte[static_cast<int64_t>(r) * C + (i + j) % C] : E{0};
    }
  }
};

// dwte[r, c] += dout[n, c]: tokens repeat, so the scatter adds atomically in fp32 (the order of the additions,
// and so the last bits, vary from run to run).
template <typename E>
__global__ void embedding_backward_kernel(float* dwte, const E* dout, const int* inp, int row_begin, int R,
                                          int64_t N, int C) {
  for (int64_t i = global_index(); i < N * C; i += global_stride()) {
    const int r = inp[i / C] - row_begin;
    if (r >= 0 && r < R) atomicAdd(&dwte[static_cast<int64_t>(r) * C + i % C], load_f32(dout[i]));
  }
}

// out[b, t, c] += wpe[t, c]: element i of out reads wpe[i % (T*C)] (a pack stays inside one b when
// T*C % 8 == 0, checked by the caller for `vec`).
template <typename E>
struct PositionForward {
  E* out;
  const E* wpe;
  int64_t TC;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float x[kPack], w[kPack];
    detail::load8(x, out + i, cnt, vec);
    if (vec) {
      detail::load8(w, wpe + i % TC, cnt, true);
    } else {
#pragma unroll
      for (int j = 0; j < kPack; j++) w[j] = j < cnt ? load_f32(wpe[(i + j) % TC]) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kPack; j++) x[j] += w[j];
    detail::store8(out + i, x, cnt, vec);
  }
};

// dwpe[t, c] += sum over b of dout[b, t, c], one thread per (t, c), b in order (deterministic).
template <typename E>
__global__ void position_backward_kernel(float* dwpe, const E* dout, int B, int64_t TC) {
  for (int64_t i = global_index(); i < TC; i += global_stride()) {
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += load_f32(dout[b * TC + i]);
    dwpe[i] += s;
  }
}

// --- launches, one set for each element type -------------------------------------------------

template <typename E>
void embedding_forward_of(E* out, const int* inp, const E* wte, int row_begin, int R, int64_t N, int C) {
  // out [N,C], inp [N], wte [R,C] holding vocabulary rows [row_begin, row_begin + R)
  const bool vec = C % kPack == 0 && detail::all_aligned16({out, wte});
  detail::launch_packs(EmbeddingForward<E>{out, inp, wte, row_begin, R, C}, N * C, vec);
}
template <typename E>
void embedding_backward_of(float* dwte, const E* dout, const int* inp, int row_begin, int R, int64_t N, int C) {
  // dwte [R,C] fp32 (added to), dout [N,C], inp [N]
  if (N * C == 0) return;
  embedding_backward_kernel<E><<<detail::grid_for(N * C, kThreads), kThreads, 0, detail::stream()>>>(
      dwte, dout, inp, row_begin, R, N, C);
  AXONN_CUDA_CHECK_LAUNCH();
}
template <typename E>
void position_forward_of(E* out, const E* wpe, int B, int T, int C) {
  // out [B,T,C] (added to), wpe [maxT,C]
  const int64_t TC = static_cast<int64_t>(T) * C;
  if (TC == 0) return;
  const bool vec = TC % kPack == 0 && detail::all_aligned16({out, wpe});
  detail::launch_packs(PositionForward<E>{out, wpe, TC}, B * TC, vec);
}
template <typename E>
void position_backward_of(float* dwpe, const E* dout, int B, int T, int C) {
  // dwpe [maxT,C] fp32 (added to), dout [B,T,C]
  const int64_t TC = static_cast<int64_t>(T) * C;
  if (TC == 0) return;
  position_backward_kernel<E><<<detail::grid_for(TC, kThreads), kThreads, 0, detail::stream()>>>(dwpe, dout, B, TC);
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void embedding_forward(float* out, const int* inp, const float* wte, int row_begin, int R, int64_t N, int C) {
  embedding_forward_of(out, inp, wte, row_begin, R, N, C);
}
void embedding_backward(float* dwte, const float* dout, const int* inp, int row_begin, int R, int64_t N, int C) {
  embedding_backward_of(dwte, dout, inp, row_begin, R, N, C);
}
void position_forward(float* out, const float* wpe, int B, int T, int C) { position_forward_of(out, wpe, B, T, C); }
void position_backward(float* dwpe, const float* dout, int B, int T, int C) {
  position_backward_of(dwpe, dout, B, T, C);
}

}  // namespace axonn::kernels::cuda

// bf16 (kernels/ops_bf16.hpp)
namespace axonn::kernels::cuda_bf16 {

void embedding_forward(bf16* out, const int* inp, const bf16* wte, int row_begin, int R, int64_t N, int C) {
  cuda::embedding_forward_of(out, inp, wte, row_begin, R, N, C);
}
void embedding_backward(float* dwte, const bf16* dout, const int* inp, int row_begin, int R, int64_t N, int C) {
  cuda::embedding_backward_of(dwte, dout, inp, row_begin, R, N, C);
}
void position_forward(bf16* out, const bf16* wpe, int B, int T, int C) {
  cuda::position_forward_of(out, wpe, B, T, C);
}
void position_backward(float* dwpe, const bf16* dout, int B, int T, int C) {
  cuda::position_backward_of(dwpe, dout, B, T, C);
}

}  // namespace axonn::kernels::cuda_bf16
