// The Llama block's kernels (RMSNorm, RoPE, SwiGLU, the KV repetition of grouped-query attention):
// cpu against ref, ref's backward against finite differences of its forward (or, for the linear maps
// RoPE and repeat_kv, against the adjoint identity <A x, y> = <x, A^T y>), RMSNorm over two channel
// slices against whole rows, and RoPE against Hugging Face's rotate-half formula written out.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "axonn/kernels/ops.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
using axonn::test::allclose;
using axonn::test::randn;
using Vec = std::vector<float>;

namespace {

constexpr int B = 3, T = 5, C = 12;
constexpr int64_t N = B * T;

Vec finite_diff(Vec& x, const std::function<double()>& f, float h = 1e-2f) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    const float x0 = x[i];
    x[i] = x0 + h;
    const double fp = f();
    x[i] = x0 - h;
    const double fm = f();
    x[i] = x0;
    g[i] = static_cast<float>((fp - fm) / (2.0 * h));
  }
  return g;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); i++) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// RMSNorm forward through an Ops table, the statistics over the whole row.
void rmsnorm(const k::Ops& ops, Vec& out, Vec& rstd, const Vec& x, const Vec& w, int64_t n, int c, float eps) {
  ops.rmsnorm_sumsq(rstd.data(), x.data(), n, c);
  ops.rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, c, eps);
}

// cos, sin [T, HS/2] of angles t * f_i with a few frequencies.
void rope_tables(Vec& cos, Vec& sin, int hs) {
  const int half = hs / 2;
  cos.resize(static_cast<size_t>(T) * half);
  sin.resize(cos.size());
  for (int t = 0; t < T; t++)
    for (int i = 0; i < half; i++) {
      const double a = t * std::pow(10.0, -i);
      cos[static_cast<size_t>(t * half + i)] = static_cast<float>(std::cos(a));
      sin[static_cast<size_t>(t * half + i)] = static_cast<float>(std::sin(a));
    }
}

}  // namespace

TEST(RmsNorm, CpuMatchesRefAndTheFormula) {
  Vec x = randn(N * C, 1, 2.0f), w = randn(C, 2), dy = randn(N * C, 3);
  Vec o1(N * C), o2(N * C), r1(N), r2(N);
  rmsnorm(k::ops_for(k::Backend::kRef), o1, r1, x, w, N, C, 1e-5f);
  rmsnorm(k::ops_for(k::Backend::kCpu), o2, r2, x, w, N, C, 1e-5f);
  EXPECT_TRUE(allclose(o2, o1, 1e-5f, 1e-5f));
  EXPECT_TRUE(allclose(r2, r1, 1e-6f, 1e-6f));
  for (int64_t n = 0; n < N; n++) {  // y = x / sqrt(mean(x^2) + eps) * w, in double
    double ss = 0;
    for (int i = 0; i < C; i++) ss += static_cast<double>(x[n * C + i]) * x[n * C + i];
    const double r = 1.0 / std::sqrt(ss / C + 1e-5);
    EXPECT_NEAR(r1[n], r, 1e-5 * r);
    for (int i = 0; i < C; i++) EXPECT_NEAR(o1[n * C + i], x[n * C + i] * r * w[i], 1e-5);
  }
  Vec d1(N), d2(N), dx1(N * C, 0.1f), dx2 = dx1, dw1(C, 0.2f), dw2 = dw1;
  k::ref::rmsnorm_backward_dot(d1.data(), dy.data(), x.data(), w.data(), N, C);
  k::cpu::rmsnorm_backward_dot(d2.data(), dy.data(), x.data(), w.data(), N, C);
  EXPECT_TRUE(allclose(d2, d1, 1e-5f, 1e-5f));
  k::ref::rmsnorm_backward(dx1.data(), dw1.data(), dy.data(), x.data(), w.data(), r1.data(), d1.data(), N, C, C);
  k::cpu::rmsnorm_backward(dx2.data(), dw2.data(), dy.data(), x.data(), w.data(), r1.data(), d1.data(), N, C, C);
  EXPECT_TRUE(allclose(dx2, dx1, 1e-5f, 1e-4f));
  EXPECT_TRUE(allclose(dw2, dw1, 1e-5f, 1e-4f));
}

TEST(RmsNorm, RefBackwardMatchesFiniteDifferences) {
  const int n = 4, c = 6;
  Vec x = randn(n * c, 1), w = randn(c, 2), proj = randn(n * c, 4), out(n * c), rstd(n), d(n);
  const k::Ops& ops = k::ops_for(k::Backend::kRef);
  auto f = [&] {
    rmsnorm(ops, out, rstd, x, w, n, c, 1e-5f);
    return dot(out, proj);
  };
  f();
  Vec dx(n * c, 0), dw(c, 0);
  ops.rmsnorm_backward_dot(d.data(), proj.data(), x.data(), w.data(), n, c);
  ops.rmsnorm_backward(dx.data(), dw.data(), proj.data(), x.data(), w.data(), rstd.data(), d.data(), n, c, c);
  EXPECT_TRUE(allclose(dx, finite_diff(x, f, 1e-3f), 5e-3f, 1e-2f));
  EXPECT_TRUE(allclose(dw, finite_diff(w, f), 2e-3f, 1e-2f));
}

// Two "ranks" holding channels [0, 5) and [5, 12) of every row: their partial statistics summed (as
// the all-reduce over X sums them) give the whole rows' results.
TEST(RmsNorm, TwoChannelSlicesWithSummedStatisticsMatchWholeRows) {
  for (k::Backend be : {k::Backend::kRef, k::Backend::kCpu}) {
    const k::Ops& ops = k::ops_for(be);
    const int c0 = 5;
    Vec x = randn(N * C, 1, 2.0f), w = randn(C, 2), dy = randn(N * C, 3);
    Vec out(N * C), rstd(N), dot_all(N), dx(N * C, 0), dw(C, 0);
    rmsnorm(ops, out, rstd, x, w, N, C, 1e-5f);
    ops.rmsnorm_backward_dot(dot_all.data(), dy.data(), x.data(), w.data(), N, C);
    ops.rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), dot_all.data(), N, C, C);
    auto cols = [](const Vec& m, int lo, int hi) {
      Vec o;
      for (int64_t r = 0; r < N; r++) o.insert(o.end(), m.begin() + r * C + lo, m.begin() + r * C + hi);
      return o;
    };
    const int lo[2] = {0, c0}, hi[2] = {c0, C};
    Vec xs[2], dys[2], ss[2], dots[2];
    for (int r = 0; r < 2; r++) {
      xs[r] = cols(x, lo[r], hi[r]);
      dys[r] = cols(dy, lo[r], hi[r]);
      ss[r].resize(N);
      dots[r].resize(N);
      ops.rmsnorm_sumsq(ss[r].data(), xs[r].data(), N, hi[r] - lo[r]);
      ops.rmsnorm_backward_dot(dots[r].data(), dys[r].data(), xs[r].data(), w.data() + lo[r], N, hi[r] - lo[r]);
    }
    for (int r = 0; r < 2; r++) {
      const int cl = hi[r] - lo[r];
      Vec sum(N), dsum(N), o(N * cl), g(N * cl, 0), gw(cl, 0);
      for (int64_t n = 0; n < N; n++) {
        sum[n] = ss[0][n] + ss[1][n];
        dsum[n] = dots[0][n] + dots[1][n];
      }
      ops.rmsnorm_forward(o.data(), sum.data(), xs[r].data(), w.data() + lo[r], N, cl, C, 1e-5f);
      ops.rmsnorm_backward(g.data(), gw.data(), dys[r].data(), xs[r].data(), w.data() + lo[r], sum.data(), dsum.data(),
                           N, cl, C);
      EXPECT_TRUE(allclose(o, cols(out, lo[r], hi[r]), 1e-5f, 1e-5f)) << k::backend_name(be) << " rank " << r;
      EXPECT_TRUE(allclose(g, cols(dx, lo[r], hi[r]), 1e-5f, 1e-4f)) << k::backend_name(be) << " rank " << r;
      EXPECT_TRUE(allclose(gw, Vec(dw.begin() + lo[r], dw.begin() + hi[r]), 1e-5f, 1e-4f));
    }
  }
}

TEST(Rope, RotateHalfAsHuggingFaceWritesItAndItsInverse) {
  const int HS = 8, heads = 3, stride = 5 * HS;  // q (2 heads) and k (1 head) rotate; v (2 heads) does not
  Vec cos, sin;
  rope_tables(cos, sin, HS);
  for (k::Backend be : {k::Backend::kRef, k::Backend::kCpu}) {
    const k::Ops& ops = k::ops_for(be);
    Vec x = randn(N * stride, 1), y = x;
    ops.rope_forward(y.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
    // out = x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1], cos/sin repeated on both halves
    for (int64_t r = 0; r < N; r++)
      for (int h = 0; h < 5; h++)
        for (int i = 0; i < HS; i++) {
          const int64_t at = r * stride + h * HS + i;
          const int j = i % (HS / 2), t = static_cast<int>(r % T);
          const float c = cos[static_cast<size_t>(t * HS / 2 + j)], s = sin[static_cast<size_t>(t * HS / 2 + j)];
          const float rot = i < HS / 2 ? -x[static_cast<size_t>(at + HS / 2)] : x[static_cast<size_t>(at - HS / 2)];
          const float want = h < heads ? x[static_cast<size_t>(at)] * c + rot * s : x[static_cast<size_t>(at)];
          ASSERT_NEAR(y[static_cast<size_t>(at)], want, 1e-6) << k::backend_name(be) << " row " << r << " head " << h;
        }
    // the backward is the transpose: <R x, g> = <x, R^T g>, and R^T R = 1
    Vec g = randn(N * stride, 2), gt = g;
    ops.rope_backward(gt.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
    EXPECT_NEAR(dot(y, g), dot(x, gt), 1e-4);
    Vec back = y;
    ops.rope_backward(back.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
    EXPECT_TRUE(allclose(back, x, 1e-6f, 1e-5f));
  }
}

TEST(SwiGlu, CpuMatchesRefAndFiniteDifferences) {
  const int F = 7;
  Vec x = randn(N * 2 * F, 1, 2.0f), dy = randn(N * F, 2), o1(N * F), o2(N * F);
  k::ref::swiglu_forward(o1.data(), x.data(), N, F);
  k::cpu::swiglu_forward(o2.data(), x.data(), N, F);
  EXPECT_TRUE(allclose(o2, o1, 1e-6f, 1e-5f));
  const float g = x[3], u = x[F + 3];
  EXPECT_NEAR(o1[3], g / (1 + std::exp(-g)) * u, 1e-6);  // silu(gate) * up
  Vec d1(N * 2 * F, 0.5f), d2 = d1;
  k::ref::swiglu_backward(d1.data(), x.data(), dy.data(), N, F);
  k::cpu::swiglu_backward(d2.data(), x.data(), dy.data(), N, F);
  EXPECT_TRUE(allclose(d2, d1, 1e-6f, 1e-5f));
  Vec d(N * 2 * F, 0.0f), out(N * F);
  k::ref::swiglu_backward(d.data(), x.data(), dy.data(), N, F);
  auto f = [&] {
    k::ref::swiglu_forward(out.data(), x.data(), N, F);
    return dot(out, dy);
  };
  EXPECT_TRUE(allclose(d, finite_diff(x, f, 1e-3f), 2e-3f, 1e-2f));
}

TEST(RepeatKv, CopiesEachKvHeadForItsQueryHeadsAndFoldsTheGradientsBack) {
  const int NH = 6, NKV = 2, HS = 3, G = NH / NKV, in_w = (NH + 2 * NKV) * HS, out_w = 3 * NH * HS;
  Vec x = randn(N * in_w, 1);
  for (k::Backend be : {k::Backend::kRef, k::Backend::kCpu}) {
    const k::Ops& ops = k::ops_for(be);
    Vec y(N * out_w);
    ops.repeat_kv_forward(y.data(), x.data(), N, NH, NKV, HS);
    for (int64_t n = 0; n < N; n++)
      for (int h = 0; h < NH; h++)
        for (int i = 0; i < HS; i++) {
          const float* in = x.data() + n * in_w;
          const float* o = y.data() + n * out_w;
          ASSERT_EQ(o[h * HS + i], in[h * HS + i]);                                   // q as it is
          ASSERT_EQ(o[NH * HS + h * HS + i], in[NH * HS + (h / G) * HS + i]);          // k of KV head h / G
          ASSERT_EQ(o[2 * NH * HS + h * HS + i], in[(NH + NKV) * HS + (h / G) * HS + i]);  // v
        }
    // the backward is the adjoint (accumulating): <R x, g> = <x, R^T g>
    Vec g = randn(N * out_w, 2), gt(N * in_w, 0.0f);
    ops.repeat_kv_backward(gt.data(), g.data(), N, NH, NKV, HS);
    EXPECT_NEAR(dot(y, g), dot(x, gt), 1e-4) << k::backend_name(be);
  }
}
