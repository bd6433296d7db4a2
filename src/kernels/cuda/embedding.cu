// kernels/cuda/embedding.cu — token embedding over a vocabulary range, and position embedding.
#include "axonn/kernels/ops.hpp"
#include "common.cuh"

namespace axonn::kernels::cuda {
namespace {

using detail::global_index;
using detail::global_stride;

__global__ void embedding_forward_kernel(float* out, const int* inp, const float* wte, int row_begin, int R,
                                         int64_t N, int C) {
  for (int64_t i = global_index(); i < N * C; i += global_stride()) {
    const int64_t n = i / C;
    const int c = static_cast<int>(i % C);
    const int r = inp[n] - row_begin;
    out[i] = (r >= 0 && r < R) ? wte[static_cast<int64_t>(r) * C + c] : 0.0f;
  }
}

// Several tokens may share a row: atomics (so the order of the additions, and the last bits, vary
// from run to run).
__global__ void embedding_backward_kernel(float* dwte, const float* dout, const int* inp, int row_begin, int R,
                                          int64_t N, int C) {
  for (int64_t i = global_index(); i < N * C; i += global_stride()) {
    const int64_t n = i / C;
    const int c = static_cast<int>(i % C);
    const int r = inp[n] - row_begin;
    if (r >= 0 && r < R) atomicAdd(&dwte[static_cast<int64_t>(r) * C + c], dout[i]);
  }
}

__global__ void position_forward_kernel(float* out, const float* wpe, int64_t BT, int T, int C) {
  for (int64_t i = global_index(); i < BT * C; i += global_stride()) {
    const int64_t t = (i / C) % T;
    out[i] += wpe[t * C + i % C];
  }
}

// One thread per (t, c), summing over the batch in order: deterministic.
__global__ void position_backward_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  const int64_t TC = static_cast<int64_t>(T) * C;
  for (int64_t i = global_index(); i < TC; i += global_stride()) {
    float acc = 0.0f;
    for (int b = 0; b < B; b++) acc += dout[b * TC + i];
    dwpe[i] += acc;
  }
}

constexpr int kThreads = 256;

}  // namespace

void embedding_forward(float* out, const int* inp, const float* wte, int row_begin, int R, int64_t N, int C) {
  // out [N,C], inp [N], wte [R,C] holding vocabulary rows [row_begin, row_begin + R)
  if (N * C == 0) return;
  embedding_forward_kernel<<<detail::grid_for(N * C, kThreads), kThreads, 0, detail::stream()>>>(
      out, inp, wte, row_begin, R, N, C);
  AXONN_CUDA_CHECK_LAUNCH();
}

void embedding_backward(float* dwte, const float* dout, const int* inp, int row_begin, int R, int64_t N, int C) {
  // dwte [R,C], dout [N,C], inp [N]
  if (N * C == 0) return;
  embedding_backward_kernel<<<detail::grid_for(N * C, kThreads), kThreads, 0, detail::stream()>>>(
      dwte, dout, inp, row_begin, R, N, C);
  AXONN_CUDA_CHECK_LAUNCH();
}

void position_forward(float* out, const float* wpe, int B, int T, int C) {
  // out [B,T,C] (added to), wpe [maxT,C]
  const int64_t BT = static_cast<int64_t>(B) * T;
  if (BT * C == 0) return;
  position_forward_kernel<<<detail::grid_for(BT * C, kThreads), kThreads, 0, detail::stream()>>>(out, wpe, BT,
                                                                                                 T, C);
  AXONN_CUDA_CHECK_LAUNCH();
}

void position_backward(float* dwpe, const float* dout, int B, int T, int C) {
  // dwpe [maxT,C], dout [B,T,C]
  const int64_t TC = static_cast<int64_t>(T) * C;
  if (TC == 0) return;
  position_backward_kernel<<<detail::grid_for(TC, kThreads), kThreads, 0, detail::stream()>>>(dwpe, dout, B, T,
                                                                                              C);
  AXONN_CUDA_CHECK_LAUNCH();
}

}  // namespace axonn::kernels::cuda
