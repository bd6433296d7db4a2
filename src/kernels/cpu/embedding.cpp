// kernels/cpu/embedding.cpp — the token embedding over a vocabulary range and the position embedding.
#include "row_ops.hpp"

namespace axonn::kernels::cpu {

using namespace detail;  // NOLINT: the shared row helpers (row_ops.hpp)

void embedding_forward(float* out, const int* inp, const float* wte, int row_begin, int R, int64_t N, int C) {
  // out [N,C], inp [N], wte [R,C] holding vocabulary rows [row_begin, row_begin + R)
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    float* o = out + n * C;
    int r = inp[n] - row_begin;
    if (r >= 0 && r < R) {
      std::memcpy(o, wte + (int64_t)r * C, sizeof(float) * C);
    } else {
      std::memset(o, 0, sizeof(float) * C);
    }
  }
}

void embedding_backward(float* dwte, const float* dout, const int* inp, int row_begin, int R, int64_t N, int C) {
  // dwte [R,C], dout [N,C], inp [N]. Split by channel: no two threads touch the same gradient
  // element, whatever tokens repeat.
#pragma omp parallel
  {
    int64_t c0, c1;
    split_range(C, omp_get_thread_num(), omp_get_num_threads(), &c0, &c1);
    for (int64_t n = 0; n < N; n++) {
      int r = inp[n] - row_begin;
      if (r < 0 || r >= R) continue;
      const float* d = dout + n * C;
      float* dw = dwte + (int64_t)r * C;
#pragma omp simd
      for (int64_t i = c0; i < c1; i++) dw[i] += d[i];
    }
  }
}

namespace {
template <class E>
void position_forward_impl(E* out, const E* wpe, int B, int T, int C) {
  // out [B,T,C] (added to), wpe [maxT,C]
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < (int64_t)B * T; bt++) {
    E* o = out + bt * C;
    const E* p = wpe + (bt % T) * C;
#pragma omp simd
    for (int i = 0; i < C; i++) st(o + i, ld(o[i]) + ld(p[i]));
  }
}
}  // namespace

void position_forward(float* out, const float* wpe, int B, int T, int C) { position_forward_impl(out, wpe, B, T, C); }
void position_forward(bf16* out, const bf16* wpe, int B, int T, int C) { position_forward_impl(out, wpe, B, T, C); }

void position_backward(float* dwpe, const float* dout, int B, int T, int C) {
  // dwpe [maxT,C], dout [B,T,C]: each thread owns whole positions
#pragma omp parallel for schedule(static)
  for (int t = 0; t < T; t++) {
    float* dp = dwpe + (int64_t)t * C;
    for (int b = 0; b < B; b++) {
      const float* d = dout + ((int64_t)b * T + t) * C;
#pragma omp simd
      for (int i = 0; i < C; i++) dp[i] += d[i];
    }
  }
}

}  // namespace axonn::kernels::cpu
