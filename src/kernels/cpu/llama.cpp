// kernels/cpu/llama.cpp — the Llama block's ops: RMSNorm, RoPE, SwiGLU, the repetition of KV heads.
#include "row_ops.hpp"

namespace axonn::kernels::cpu {

using namespace detail;  // NOLINT: the shared row helpers (row_ops.hpp)

// --- the Llama block's ops: rows in parallel, SIMD within a row ---------------------------------

namespace {
template <class E>
void rmsnorm_sumsq_impl(float* sumsq, const E* inp, int64_t N, int C) {
  // sumsq [N], inp [N,C]
#pragma omp parallel
  {
    RowView<E> in_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* x = in_row.read(inp + n * C, C);
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int i = 0; i < C; i++) s += x[i] * x[i];
      sumsq[n] = s;
    }
  }
}

template <class E>
void rmsnorm_forward_impl(E* out, float* rstd, const E* inp, const E* weight, int64_t N, int C, int C_total,
                          float eps) {
  // out [N,C], rstd [N] (in: sums of squares over C_total channels; out: 1/rms), inp [N,C], weight [C]
  RowView<E> weight_view(C);
  const float* w = weight_view.read(weight, C);
#pragma omp parallel
  {
    RowView<E> in_row(C), out_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float r = 1.0f / std::sqrt(rstd[n] / (float)C_total + eps);
      rstd[n] = r;
      const float* x = in_row.read(inp + n * C, C);
      float* o = out_row.write(out + n * C);
#pragma omp simd
      for (int i = 0; i < C; i++) o[i] = x[i] * r * w[i];
      out_row.commit(out + n * C, C);
    }
  }
}

template <class E>
void rmsnorm_backward_dot_impl(float* dot, const E* dout, const E* inp, const E* weight, int64_t N, int C) {
  // dot [N], dout [N,C], inp [N,C], weight [C]
  RowView<E> weight_view(C);
  const float* w = weight_view.read(weight, C);
#pragma omp parallel
  {
    RowView<E> dout_row(C), in_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* dy = dout_row.read(dout + n * C, C);
      const float* x = in_row.read(inp + n * C, C);
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int i = 0; i < C; i++) s += dy[i] * w[i] * x[i];
      dot[n] = s;
    }
  }
}

template <class E>
void rmsnorm_backward_impl(E* dinp, float* dweight, const E* dout, const E* inp, const E* weight, const float* rstd,
                           const float* dot, int64_t N, int C, int C_total) {
  // dinp [N,C], dweight [C], dout [N,C], inp [N,C], weight [C], rstd [N], dot [N] (complete); the
  // weight gradient as per-thread partials added in thread order
  RowView<E> weight_view(C);
  const float* w = weight_view.read(weight, C);
  int nthr = omp_get_max_threads();
  std::vector<float> partial((size_t)nthr * C, 0.0f);
#pragma omp parallel num_threads(nthr)
  {
    int tid = omp_get_thread_num();
    float* pw = partial.data() + (size_t)tid * C;
    RowView<E> dout_row(C), in_row(C), dinp_row(C);
    int64_t n0, n1;
    split_range(N, tid, omp_get_num_threads(), &n0, &n1);
    for (int64_t n = n0; n < n1; n++) {
      const float* dy = dout_row.read(dout + n * C, C);
      const float* x = in_row.read(inp + n * C, C);
      float* dx = dinp_row.update(dinp + n * C, C);
      const float r = rstd[n], k = r * r * dot[n] / (float)C_total;
#pragma omp simd
      for (int i = 0; i < C; i++) {
        pw[i] += dy[i] * x[i] * r;
        dx[i] += r * (dy[i] * w[i] - x[i] * k);
      }
      dinp_row.commit(dinp + n * C, C);
    }
  }
  for (int t = 0; t < nthr; t++) {
    const float* pw = partial.data() + (size_t)t * C;
    for (int i = 0; i < C; i++) dweight[i] += pw[i];
  }
}

// The rotate-half rotation of `heads` heads in each row, by +angle (sign 1) or -angle (sign -1).
template <class E>
void rope_rotate(E* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride, float sign) {
  const int half = HS / 2;
  const int64_t rotated = (int64_t)heads * HS;  // the first `heads` heads of each row
#pragma omp parallel
  {
    RowView<E> row(rotated);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < (int64_t)B * T; r++) {
      const float* c = cos + (r % T) * half;
      const float* s = sin + (r % T) * half;
      float* xr = row.update(x + r * stride, rotated);
      for (int h = 0; h < heads; h++) {
        float* v = xr + (int64_t)h * HS;
#pragma omp simd
        for (int i = 0; i < half; i++) {
          const float a = v[i], b = v[i + half], sn = sign * s[i];
          v[i] = a * c[i] - b * sn;
          v[i + half] = b * c[i] + a * sn;
        }
      }
      row.commit(x + r * stride, rotated);
    }
  }
}

template <class E>
void swiglu_forward_impl(E* out, const E* inp, int64_t N, int F) {
  // out [N,F], inp [N,2F] = gate | up
#pragma omp parallel
  {
    RowView<E> in_row(2 * F), out_row(F);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* g = in_row.read(inp + n * 2 * F, 2 * F);
      const float* u = g + F;
      float* o = out_row.write(out + n * F);
#pragma omp simd
      for (int i = 0; i < F; i++) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      out_row.commit(out + n * F, F);
    }
  }
}

template <class E>
void swiglu_backward_impl(E* dinp, const E* inp, const E* dout, int64_t N, int F) {
  // dinp [N,2F], inp [N,2F], dout [N,F]
#pragma omp parallel
  {
    RowView<E> in_row(2 * F), dout_row(F), dinp_row(2 * F);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* g = in_row.read(inp + n * 2 * F, 2 * F);
      const float* u = g + F;
      const float* d = dout_row.read(dout + n * F, F);
      float* dg = dinp_row.update(dinp + n * 2 * F, 2 * F);
      float* du = dg + F;
#pragma omp simd
      for (int i = 0; i < F; i++) {
        const float sig = 1.0f / (1.0f + std::exp(-g[i]));
        dg[i] += d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
        du[i] += d[i] * g[i] * sig;
      }
      dinp_row.commit(dinp + n * 2 * F, 2 * F);
    }
  }
}
}  // namespace

void rmsnorm_sumsq(float* sumsq, const float* inp, int64_t N, int C) { rmsnorm_sumsq_impl(sumsq, inp, N, C); }
void rmsnorm_sumsq(float* sumsq, const bf16* inp, int64_t N, int C) { rmsnorm_sumsq_impl(sumsq, inp, N, C); }
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int C, int C_total,
                     float eps) {
  rmsnorm_forward_impl(out, rstd, inp, weight, N, C, C_total, eps);
}
void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int64_t N, int C, int C_total,
                     float eps) {
  rmsnorm_forward_impl(out, rstd, inp, weight, N, C, C_total, eps);
}
void rmsnorm_backward_dot(float* dot, const float* dout, const float* inp, const float* weight, int64_t N, int C) {
  rmsnorm_backward_dot_impl(dot, dout, inp, weight, N, C);
}
void rmsnorm_backward_dot(float* dot, const bf16* dout, const bf16* inp, const bf16* weight, int64_t N, int C) {
  rmsnorm_backward_dot_impl(dot, dout, inp, weight, N, C);
}
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, const float* dot, int64_t N, int C, int C_total) {
  rmsnorm_backward_impl(dinp, dweight, dout, inp, weight, rstd, dot, N, C, C_total);
}
void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                      const float* rstd, const float* dot, int64_t N, int C, int C_total) {
  rmsnorm_backward_impl(dinp, dweight, dout, inp, weight, rstd, dot, N, C, C_total);
}
void rope_forward(float* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  rope_rotate(x, cos, sin, B, T, heads, HS, stride, 1.0f);
}
void rope_forward(bf16* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  rope_rotate(x, cos, sin, B, T, heads, HS, stride, 1.0f);
}
void rope_backward(float* dx, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  rope_rotate(dx, cos, sin, B, T, heads, HS, stride, -1.0f);
}
void rope_backward(bf16* dx, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  rope_rotate(dx, cos, sin, B, T, heads, HS, stride, -1.0f);
}
void swiglu_forward(float* out, const float* inp, int64_t N, int F) { swiglu_forward_impl(out, inp, N, F); }
void swiglu_forward(bf16* out, const bf16* inp, int64_t N, int F) { swiglu_forward_impl(out, inp, N, F); }
void swiglu_backward(float* dinp, const float* inp, const float* dout, int64_t N, int F) {
  swiglu_backward_impl(dinp, inp, dout, N, F);
}
void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N, int F) {
  swiglu_backward_impl(dinp, inp, dout, N, F);
}

namespace {
template <class E>
void repeat_kv_forward_impl(E* out, const E* inp, int64_t N, int NH, int NKV, int HS) {
  // out [N, 3 NH HS], inp [N, (NH + 2 NKV) HS]: whole heads copied
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS;
  const size_t head = sizeof(E) * static_cast<size_t>(HS);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const E* in = inp + n * (Q + 2 * K);
    E* o = out + n * 3 * Q;
    std::memcpy(o, in, sizeof(E) * static_cast<size_t>(Q));
    for (int h = 0; h < NH; h++) {
      std::memcpy(o + Q + h * HS, in + Q + (h / G) * HS, head);
      std::memcpy(o + 2 * Q + h * HS, in + Q + K + (h / G) * HS, head);
    }
  }
}

template <class E>
void repeat_kv_backward_impl(E* dinp, const E* dout, int64_t N, int NH, int NKV, int HS) {
  // dinp [N, (NH + 2 NKV) HS], dout [N, 3 NH HS]; the copies of a KV head added in head order (in fp32:
  // for bf16 each row is rounded once, after all of its copies)
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS;
#pragma omp parallel
  {
    RowView<E> dinp_row(Q + 2 * K), dout_row(3 * Q);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      float* d = dinp_row.update(dinp + n * (Q + 2 * K), Q + 2 * K);
      const float* o = dout_row.read(dout + n * 3 * Q, 3 * Q);
#pragma omp simd
      for (int i = 0; i < Q; i++) d[i] += o[i];
      for (int h = 0; h < NH; h++) {
        float* dk = d + Q + (h / G) * HS;
        float* dv = d + Q + K + (h / G) * HS;
        const float* ok = o + Q + h * HS;
        const float* ov = o + 2 * Q + h * HS;
#pragma omp simd
        for (int i = 0; i < HS; i++) {
          dk[i] += ok[i];
          dv[i] += ov[i];
        }
      }
      dinp_row.commit(dinp + n * (Q + 2 * K), Q + 2 * K);
    }
  }
}
}  // namespace

void repeat_kv_forward(float* out, const float* inp, int64_t N, int NH, int NKV, int HS) {
  repeat_kv_forward_impl(out, inp, N, NH, NKV, HS);
}
void repeat_kv_forward(bf16* out, const bf16* inp, int64_t N, int NH, int NKV, int HS) {
  repeat_kv_forward_impl(out, inp, N, NH, NKV, HS);
}
void repeat_kv_backward(float* dinp, const float* dout, int64_t N, int NH, int NKV, int HS) {
  repeat_kv_backward_impl(dinp, dout, N, NH, NKV, HS);
}
void repeat_kv_backward(bf16* dinp, const bf16* dout, int64_t N, int NH, int NKV, int HS) {
  repeat_kv_backward_impl(dinp, dout, N, NH, NKV, HS);
}

}  // namespace axonn::kernels::cpu
