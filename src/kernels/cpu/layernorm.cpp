// kernels/cpu/layernorm.cpp — LayerNorm in steps, its row statistics completed by the caller over X.
#include "row_ops.hpp"

namespace axonn::kernels::cpu {

using namespace detail;  // NOLINT: the shared row helpers (row_ops.hpp)

namespace {
constexpr float kLayerNormEps = 1e-5f;
}  // namespace

namespace {
template <class E>
void layernorm_sum_impl(float* mean, const E* inp, int64_t N, int C) {
  // mean [N], inp [N,C]: this rank's row sums
#pragma omp parallel
  {
    RowView<E> in_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* x = in_row.read(inp + n * C, C);
      float m = 0.0f;
#pragma omp simd reduction(+ : m)
      for (int i = 0; i < C; i++) m += x[i];
      mean[n] = m;
    }
  }
}

template <class E>
void layernorm_centred_sumsq_impl(float* var, float* mean, const E* inp, int64_t N, int C, int C_total) {
  // var [N], mean [N] (the complete sums in, the means out), inp [N,C]
#pragma omp parallel
  {
    RowView<E> in_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* x = in_row.read(inp + n * C, C);
      float m = mean[n] / (float)C_total;
      mean[n] = m;
      float v = 0.0f;
#pragma omp simd reduction(+ : v)
      for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
      var[n] = v;
    }
  }
}

template <class E>
void layernorm_forward_impl(E* out, const float* mean, float* rstd, const E* inp, const E* weight, const E* bias,
                            int64_t N, int C, int C_total) {
  // out [N,C], mean [N], rstd [N] (the complete centred sums of squares in), inp [N,C], weight [C], bias [C]
  RowView<E> weight_view(C), bias_view(C);
  const float* w = weight_view.read(weight, C);
  const float* b = bias_view.read(bias, C);
#pragma omp parallel
  {
    RowView<E> in_row(C), out_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* x = in_row.read(inp + n * C, C);
      float m = mean[n], s = 1.0f / std::sqrt(rstd[n] / (float)C_total + kLayerNormEps);
      rstd[n] = s;
      float* o = out_row.write(out + n * C);
#pragma omp simd
      for (int i = 0; i < C; i++) o[i] = s * (x[i] - m) * w[i] + b[i];
      out_row.commit(out + n * C, C);
    }
  }
}

template <class E>
void layernorm_backward_sums_impl(float* sums, const E* dout, const E* inp, const E* weight, const float* mean,
                                  const float* rstd, int64_t N, int C) {
  // sums [2N]: [N] sum(dnorm) | [N] sum(dnorm * xhat) over this rank's channels
  RowView<E> weight_view(C);
  const float* w = weight_view.read(weight, C);
#pragma omp parallel
  {
    RowView<E> dout_row(C), in_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* dy = dout_row.read(dout + n * C, C);
      const float* x = in_row.read(inp + n * C, C);
      float m = mean[n], s = rstd[n];
      float s1 = 0.0f, s2 = 0.0f;
#pragma omp simd reduction(+ : s1, s2)
      for (int i = 0; i < C; i++) {
        float xhat = (x[i] - m) * s;
        float dnorm = w[i] * dy[i];
        s1 += dnorm;
        s2 += dnorm * xhat;
      }
      sums[n] = s1;
      sums[N + n] = s2;
    }
  }
}

template <class E>
void layernorm_backward_impl(E* dinp, float* dweight, float* dbias, const E* dout, const E* inp, const E* weight,
                             const float* mean, const float* rstd, const float* sums, int64_t N, int C, int C_total) {
  // dinp [N,C], dweight [C], dbias [C], dout [N,C], inp [N,C], weight [C], mean [N], rstd [N], sums [2N]
  // (complete); the weight and bias gradients as per-thread partials added in order
  RowView<E> weight_view(C);
  const float* w = weight_view.read(weight, C);
  int nthr = omp_get_max_threads();
  std::vector<float> partial((size_t)nthr * 2 * C, 0.0f);  // per thread: dweight | dbias
#pragma omp parallel num_threads(nthr)
  {
    int tid = omp_get_thread_num();
    float* pw = partial.data() + (size_t)tid * 2 * C;
    float* pb = pw + C;
    RowView<E> dout_row(C), in_row(C), dinp_row(C);
    int64_t n0, n1;
    split_range(N, tid, omp_get_num_threads(), &n0, &n1);
    for (int64_t n = n0; n < n1; n++) {
      const float* dy = dout_row.read(dout + n * C, C);
      const float* x = in_row.read(inp + n * C, C);
      float* dx = dinp_row.update(dinp + n * C, C);
      float m = mean[n], s = rstd[n];
      float dnorm_mean = sums[n] / (float)C_total, dnorm_norm_mean = sums[N + n] / (float)C_total;
#pragma omp simd
      for (int i = 0; i < C; i++) {
        float xhat = (x[i] - m) * s;
        float dnorm = w[i] * dy[i];
        pb[i] += dy[i];
        pw[i] += xhat * dy[i];
        dx[i] += (dnorm - dnorm_mean - xhat * dnorm_norm_mean) * s;
      }
      dinp_row.commit(dinp + n * C, C);
    }
  }
  for (int t = 0; t < nthr; t++) {
    const float* pw = partial.data() + (size_t)t * 2 * C;
    for (int i = 0; i < C; i++) {
      dweight[i] += pw[i];
      dbias[i] += pw[C + i];
    }
  }
}
}  // namespace

void layernorm_sum(float* mean, const float* inp, int64_t N, int C) { layernorm_sum_impl(mean, inp, N, C); }
void layernorm_sum(float* mean, const bf16* inp, int64_t N, int C) { layernorm_sum_impl(mean, inp, N, C); }
void layernorm_centred_sumsq(float* var, float* mean, const float* inp, int64_t N, int C, int C_total) {
  layernorm_centred_sumsq_impl(var, mean, inp, N, C, C_total);
}
void layernorm_centred_sumsq(float* var, float* mean, const bf16* inp, int64_t N, int C, int C_total) {
  layernorm_centred_sumsq_impl(var, mean, inp, N, C, C_total);
}
void layernorm_forward(float* out, const float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int C, int C_total) {
  layernorm_forward_impl(out, mean, rstd, inp, weight, bias, N, C, C_total);
}
void layernorm_forward(bf16* out, const float* mean, float* rstd, const bf16* inp, const bf16* weight,
                       const bf16* bias, int64_t N, int C, int C_total) {
  layernorm_forward_impl(out, mean, rstd, inp, weight, bias, N, C, C_total);
}
void layernorm_backward_sums(float* sums, const float* dout, const float* inp, const float* weight, const float* mean,
                             const float* rstd, int64_t N, int C) {
  layernorm_backward_sums_impl(sums, dout, inp, weight, mean, rstd, N, C);
}
void layernorm_backward_sums(float* sums, const bf16* dout, const bf16* inp, const bf16* weight, const float* mean,
                             const float* rstd, int64_t N, int C) {
  layernorm_backward_sums_impl(sums, dout, inp, weight, mean, rstd, N, C);
}
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const float* sums, int64_t N, int C,
                        int C_total) {
  layernorm_backward_impl(dinp, dweight, dbias, dout, inp, weight, mean, rstd, sums, N, C, C_total);
}
void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const bf16* weight, const float* mean, const float* rstd, const float* sums, int64_t N, int C,
                        int C_total) {
  layernorm_backward_impl(dinp, dweight, dbias, dout, inp, weight, mean, rstd, sums, N, C, C_total);
}

}  // namespace axonn::kernels::cpu
