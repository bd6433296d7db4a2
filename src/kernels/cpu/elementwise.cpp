// kernels/cpu/elementwise.cpp — GELU and the residual sums.
#include "row_ops.hpp"

namespace axonn::kernels::cpu {

using namespace detail;  // NOLINT: the shared row helpers (row_ops.hpp)

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

// GELU and its slope, the formulas of ops.hpp
inline float gelu_value(float x) {
  float cube = 0.044715f * x * x * x;
  return 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + cube)));
}
inline float gelu_slope(float x) {
  float cube = 0.044715f * x * x * x;
  float th = std::tanh(kGeluScale * (x + cube));
  float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

// An elementwise op whose math function gives other last bits in a vector lane than in scalar code
// (libmvec's tanhf against tanhf): `block(out, a, b, n)` is its fp32 loop over n elements. Each thread
// takes a range that starts at a multiple of 64 elements (of any vector width), so every element but the
// last N mod width of the array is in a full vector, whatever the storage type and the thread count. bf16
// storage widens blocks of 4096 elements into fp32 buffers, runs the same loop on them and rounds once:
// round(the fp32 op), bit for bit.
template <class E, class Block>
void elementwise(E* out, bool accumulate, const E* a, const E* b, int64_t N, Block block) {
  constexpr int64_t kUnit = 64, kBlock = 4096;
  const int64_t units = (N + kUnit - 1) / kUnit;
#pragma omp parallel
  {
    int64_t u0, u1;
    split_range(units, omp_get_thread_num(), omp_get_num_threads(), &u0, &u1);
    const int64_t begin = std::min(N, u0 * kUnit), end = std::min(N, u1 * kUnit);
    if constexpr (kIsF32<E>) {
      (void)accumulate;
      block(out + begin, a + begin, b ? b + begin : nullptr, end - begin);
    } else {
      std::vector<float> fo(kBlock), fa(kBlock), fb(b ? kBlock : 0);
      for (int64_t at = begin; at < end; at += kBlock) {
        const int64_t n = std::min(kBlock, end - at);
        for (int64_t i = 0; i < n; i++) fa[i] = bf16_to_f32(a[at + i]);
        for (int64_t i = 0; b && i < n; i++) fb[i] = bf16_to_f32(b[at + i]);
        for (int64_t i = 0; accumulate && i < n; i++) fo[i] = bf16_to_f32(out[at + i]);
        block(fo.data(), fa.data(), fb.data(), n);
#pragma omp simd
        for (int64_t i = 0; i < n; i++) out[at + i] = f32_to_bf16(fo[i]);
      }
    }
  }
}

template <class E>
void gelu_forward_impl(E* out, const E* inp, int64_t N) {
  elementwise(out, false, inp, static_cast<const E*>(nullptr), N, [](float* o, const float* x, const float*, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) o[i] = gelu_value(x[i]);
  });
}

template <class E>
void gelu_backward_impl(E* dinp, const E* inp, const E* dout, int64_t N) {
  elementwise(dinp, true, inp, dout, N, [](float* dx, const float* x, const float* dy, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) dx[i] += gelu_slope(x[i]) * dy[i];
  });
}

template <class E>
void residual_forward_impl(E* out, const E* a, const E* b, int64_t N) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < N; i++) st(out + i, ld(a[i]) + ld(b[i]));
}

template <class E>
void residual_backward_impl(E* da, E* db, const E* dout, int64_t N) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < N; i++) {
    const float d = ld(dout[i]);
    st(da + i, ld(da[i]) + d);
    st(db + i, ld(db[i]) + d);
  }
}
}  // namespace

void gelu_forward(float* out, const float* inp, int64_t N) { gelu_forward_impl(out, inp, N); }
void gelu_forward(bf16* out, const bf16* inp, int64_t N) { gelu_forward_impl(out, inp, N); }
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) { gelu_backward_impl(dinp, inp, dout, N); }
void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N) { gelu_backward_impl(dinp, inp, dout, N); }
void residual_forward(float* out, const float* a, const float* b, int64_t N) { residual_forward_impl(out, a, b, N); }
void residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t N) { residual_forward_impl(out, a, b, N); }
void residual_backward(float* da, float* db, const float* dout, int64_t N) { residual_backward_impl(da, db, dout, N); }
void residual_backward(bf16* da, bf16* db, const bf16* dout, int64_t N) { residual_backward_impl(da, db, dout, N); }

}  // namespace axonn::kernels::cpu
