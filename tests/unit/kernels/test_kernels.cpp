// Every fast CPU kernel against the naive `ref` one, on awkward shapes; every ref backward against
// finite differences of its forward.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/ops.hpp"
#include "row_steps.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
using axonn::test::allclose;
using axonn::test::crossentropy_rows;
using axonn::test::crossentropy_rows_gradient;
using axonn::test::layernorm_rows_backward;
using axonn::test::layernorm_steps;
using axonn::test::randint;
using axonn::test::randn;
using Vec = std::vector<float>;

namespace {

// Shapes that are multiples of nothing nice.
constexpr int B = 3, T = 7, C = 12, NH = 3, V = 37, Vp = 40, OC = 10;
constexpr int64_t N = B * T;

class GemmBackends : public ::testing::TestWithParam<k::GemmBackend> {
 protected:
  void SetUp() override { k::set_gemm_backend(GetParam()); }
  void TearDown() override { k::set_gemm_backend(k::GemmBackend::kOneDnn); }
};

// Central finite difference of a scalar function of x, at every element of x.
Vec finite_diff(Vec& x, const std::function<double()>& f, float h = 1e-2f) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    float x0 = x[i];
    x[i] = x0 + h;
    double fp = f();
    x[i] = x0 - h;
    double fm = f();
    x[i] = x0;
    g[i] = static_cast<float>((fp - fm) / (2.0 * h));
  }
  return g;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); i++) s += (double)a[i] * b[i];
  return s;
}

}  // namespace

// M = 1 as well: a product of one row runs as a matrix-vector product (OpenBLAS's sgemv, under either backend)
TEST(Gemm, BothBackendsMatchNaiveWithTransposesAndStrides) {
  const int Nn = 7, K = 9, lda = 11, ldb = 13, ldc = 8;
  for (int M : {5, 1})
  for (auto be : {k::GemmBackend::kOneDnn, k::GemmBackend::kOpenBlas})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        k::set_gemm_backend(be);
        Vec A = randn(20 * lda, 1), Bm = randn(20 * ldb, 2), Cm = randn(M * ldc, 3), ref = Cm;
        for (int i = 0; i < M; i++)
          for (int j = 0; j < Nn; j++) {
            double acc = 0;
            for (int p = 0; p < K; p++)
              acc += (double)(ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? Bm[j * ldb + p] : Bm[p * ldb + j]);
            ref[i * ldc + j] = (float)(0.5 * acc + 2.0 * Cm[i * ldc + j]);
          }
        k::sgemm(ta, tb, M, Nn, K, 0.5f, A.data(), lda, Bm.data(), ldb, 2.0f, Cm.data(), ldc);
        EXPECT_TRUE(allclose(Cm, ref, 1e-4f, 1e-4f)) << k::gemm_backend_name(be) << " M=" << M << " ta=" << ta
                                                      << " tb=" << tb;
      }
  k::set_gemm_backend(k::GemmBackend::kOneDnn);
}

// The few-row path (M <= 8: a decode step's linears, one row per sequence) for every row count, with K long
// enough for its vector loop and a tail, N not a multiple of the outputs it computes at once, fp32 and bf16
// inputs: against double sums, each row bitwise the same computed alone as in the batch (a sequence
// decodes the same alone and in a batch), and every kernel variant giving the batch's bits (the measured choice
// between them moves only the speed).
TEST(Gemm, FewRowsMatchDoubleSumsAndEachRowAloneEqualsItInTheBatch) {
  const int Nn = 11, K = 53, lda = 60, ldb = 61, ldc = 12;
  namespace ax = axonn;
  for (int M = 1; M <= 8; M++)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool bf16 : {false, true}) {
          Vec A = randn(60 * lda, 1), Bm = randn(60 * ldb, 2), Cm = randn(M * ldc, 3), ref = Cm;
          std::vector<uint16_t> A16(A.size()), B16(Bm.size());
          for (size_t i = 0; i < A.size(); i++) A16[i] = ax::f32_to_bf16(A[i]);
          for (size_t i = 0; i < Bm.size(); i++) B16[i] = ax::f32_to_bf16(Bm[i]);
          auto a_at = [&](int64_t i) { return bf16 ? ax::bf16_to_f32(A16[i]) : A[i]; };
          auto b_at = [&](int64_t i) { return bf16 ? ax::bf16_to_f32(B16[i]) : Bm[i]; };
          for (int i = 0; i < M; i++)
            for (int j = 0; j < Nn; j++) {
              double acc = 0;
              for (int p = 0; p < K; p++)
                acc += (double)a_at(ta ? p * lda + i : i * lda + p) * b_at(tb ? j * ldb + p : p * ldb + j);
              ref[i * ldc + j] = (float)(0.5 * acc + 2.0 * Cm[i * ldc + j]);
            }
          auto product = [&](int64_t rows, int64_t first_row, float* C) {
            const int64_t offset = ta ? first_row : first_row * lda;  // op(A)'s row first_row onward
            if (bf16)
              k::gemm_bf16(ta, tb, rows, Nn, K, 0.5f, A16.data() + offset, lda, B16.data(), ldb, 2.0f, C, ldc);
            else
              k::sgemm(ta, tb, rows, Nn, K, 0.5f, A.data() + offset, lda, Bm.data(), ldb, 2.0f, C, ldc);
          };
          Vec batch = Cm;
          product(M, 0, batch.data());
          const std::string what = "M=" + std::to_string(M) + " ta=" + std::to_string(ta) +
                                   " tb=" + std::to_string(tb) + (bf16 ? " bf16" : " fp32");
          EXPECT_TRUE(allclose(batch, ref, 1e-4f, 1e-4f)) << what;
          const std::vector<std::string> variants = k::few_rows_variant_names();
          for (int v = 0; v < static_cast<int>(variants.size()); v++) {
            k::set_few_rows_variant(v);
            Vec forced = Cm;
            product(M, 0, forced.data());
            EXPECT_EQ(forced, batch) << what << ", variant " << variants[static_cast<size_t>(v)];
          }
          k::set_few_rows_variant(-1);
          for (int i = 0; i < M; i++) {
            Vec alone(Cm.begin() + i * ldc, Cm.begin() + (i + 1) * ldc);
            product(1, i, alone.data());
            for (int j = 0; j < Nn; j++) EXPECT_EQ(alone[j], batch[i * ldc + j]) << what << " row " << i << " col " << j;
          }
        }
}

// A rate, positive and finite, whatever the load (a threshold on it would be a timed test: it failed when the
// machine was saturated and the test ran at low priority)
TEST(Gemm, MeasuredRateIsPositive) {
  const double gflops = k::measure_sgemm_gflops(128, 2);
  EXPECT_GT(gflops, 0.0);
  EXPECT_TRUE(std::isfinite(gflops));
}

TEST(Embedding, CpuMatchesRefAndHonoursTheRowRange) {
  Vec wte = randn(Vp * C, 1), wpe = randn(T * C, 2), dout = randn(N * C, 3);
  auto inp = randint(N, V, 4);
  inp[5] = inp[6] = inp[0];  // repeated tokens: the scatter must accumulate
  for (auto [begin, rows] : {std::pair{0, Vp}, std::pair{9, 11}}) {
    Vec o1(N * C), o2(N * C, 7.0f);
    k::ref::embedding_forward(o1.data(), inp.data(), wte.data() + begin * C, begin, rows, N, C);
    k::cpu::embedding_forward(o2.data(), inp.data(), wte.data() + begin * C, begin, rows, N, C);
    EXPECT_TRUE(allclose(o2, o1, 0, 0));
    for (int64_t n = 0; n < N; n++) {
      bool held = inp[n] >= begin && inp[n] < begin + rows;
      EXPECT_EQ(o1[n * C + 3], held ? wte[inp[n] * C + 3] : 0.0f);
    }
    Vec d1(rows * C, 0.5f), d2 = d1;
    k::ref::embedding_backward(d1.data(), dout.data(), inp.data(), begin, rows, N, C);
    k::cpu::embedding_backward(d2.data(), dout.data(), inp.data(), begin, rows, N, C);
    EXPECT_TRUE(allclose(d2, d1, 1e-6f, 1e-6f));
  }
  Vec p1 = randn(N * C, 5), p2 = p1, dp1(T * C, 0.25f), dp2 = dp1;
  k::ref::position_forward(p1.data(), wpe.data(), B, T, C);
  k::cpu::position_forward(p2.data(), wpe.data(), B, T, C);
  EXPECT_TRUE(allclose(p2, p1, 0, 0));
  k::ref::position_backward(dp1.data(), dout.data(), B, T, C);
  k::cpu::position_backward(dp2.data(), dout.data(), B, T, C);
  EXPECT_TRUE(allclose(dp2, dp1, 1e-6f, 1e-6f));
  EXPECT_FLOAT_EQ(dp1[2 * C + 1], 0.25f + dout[(0 * T + 2) * C + 1] + dout[(1 * T + 2) * C + 1] + dout[(2 * T + 2) * C + 1]);
}

namespace {
}  // namespace

TEST(LayerNorm, CpuMatchesRef) {
  const k::Ops& ref = k::ops_for(k::Backend::kRef);
  const k::Ops& cpu = k::ops_for(k::Backend::kCpu);
  Vec x = randn(N * C, 1), w = randn(C, 2), b = randn(C, 3), dy = randn(N * C, 4);
  Vec o1(N * C), o2(N * C), m1(N), m2(N), r1(N), r2(N);
  layernorm_steps(ref, o1.data(), m1.data(), r1.data(), x.data(), w.data(), b.data(), N, C, C);
  layernorm_steps(cpu, o2.data(), m2.data(), r2.data(), x.data(), w.data(), b.data(), N, C, C);
  EXPECT_TRUE(allclose(m2, m1, 1e-6f, 1e-6f));
  // the mean: a plain sum of the row over C (checked once against the formula, in double)
  for (int64_t n = 0; n < N; n++) {
    double sum = 0;
    for (int i = 0; i < C; i++) sum += x[n * C + i];
    EXPECT_NEAR(m1[n], sum / C, 1e-6) << "row " << n;
  }
  EXPECT_TRUE(allclose(o2, o1, 1e-5f, 1e-5f));
  EXPECT_TRUE(allclose(r2, r1, 1e-5f, 1e-5f));
  Vec dx1(N * C, 0.1f), dx2 = dx1, dw1(C, 0.2f), dw2 = dw1, db1(C, 0.3f), db2 = db1;
  layernorm_rows_backward(ref, dx1.data(), dw1.data(), db1.data(), dy.data(), x.data(), w.data(), m1.data(),
                          r1.data(), N, C, C);
  layernorm_rows_backward(cpu, dx2.data(), dw2.data(), db2.data(), dy.data(), x.data(), w.data(), m1.data(),
                          r1.data(), N, C, C);
  EXPECT_TRUE(allclose(dx2, dx1, 1e-4f, 1e-4f));
  EXPECT_TRUE(allclose(dw2, dw1, 1e-4f, 1e-4f));
  EXPECT_TRUE(allclose(db2, db1, 1e-4f, 1e-4f));
}

TEST(LayerNorm, RefBackwardMatchesFiniteDifferences) {
  const int n = 4, c = 6;
  Vec x = randn(n * c, 1), w = randn(c, 2), b = randn(c, 3), proj = randn(n * c, 4);
  Vec out(n * c), mean(n), rstd(n);
  const k::Ops& ref = k::ops_for(k::Backend::kRef);
  auto f = [&] {
    layernorm_steps(ref, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c, c);
    return dot(out, proj);
  };
  f();
  Vec dx(n * c, 0), dw(c, 0), db(c, 0);
  layernorm_rows_backward(ref, dx.data(), dw.data(), db.data(), proj.data(), x.data(), w.data(), mean.data(),
                          rstd.data(), n, c, c);
  EXPECT_TRUE(allclose(dx, finite_diff(x, f, 1e-3f), 5e-3f, 1e-2f));
  EXPECT_TRUE(allclose(dw, finite_diff(w, f), 2e-3f, 1e-2f));
  EXPECT_TRUE(allclose(db, finite_diff(b, f), 2e-3f, 1e-2f));
}

TEST_P(GemmBackends, MatmulCpuMatchesRef) {
  Vec x = randn(N * C, 1), w = randn(OC * C, 2), b = randn(OC, 3), dy = randn(N * OC, 4);
  Vec o1(N * OC), o2(N * OC);
  k::ref::matmul_forward(o1.data(), x.data(), w.data(), b.data(), N, C, OC);
  k::cpu::matmul_forward(o2.data(), x.data(), w.data(), b.data(), N, C, OC);
  EXPECT_TRUE(allclose(o2, o1, 1e-5f, 1e-5f));
  k::cpu::matmul_forward(o2.data(), x.data(), w.data(), nullptr, N, C, OC);
  k::ref::matmul_forward(o1.data(), x.data(), w.data(), nullptr, N, C, OC);
  EXPECT_TRUE(allclose(o2, o1, 1e-5f, 1e-5f));
  Vec dx1(N * C, 0.1f), dx2 = dx1, dw1(OC * C, 0.2f), dw2 = dw1, db1(OC, 0.3f), db2 = db1;
  k::ref::matmul_backward(dx1.data(), dw1.data(), db1.data(), dy.data(), x.data(), w.data(), N, C, OC);
  k::cpu::matmul_backward(dx2.data(), dw2.data(), db2.data(), dy.data(), x.data(), w.data(), N, C, OC);
  EXPECT_TRUE(allclose(dx2, dx1, 1e-5f, 1e-5f));
  EXPECT_TRUE(allclose(dw2, dw1, 1e-4f, 1e-5f));
  EXPECT_TRUE(allclose(db2, db1, 1e-5f, 1e-5f));
}

// The tensor-parallel linear computes dX and dW in two calls (a collective runs between them):
// the split must give exactly the bits of the combined call, in both implementations.
TEST_P(GemmBackends, MatmulBackwardSplitEqualsCombined) {
  Vec x = randn(N * C, 1), w = randn(OC * C, 2), dy = randn(N * OC, 4);
  for (auto* backward : {&k::ref::matmul_backward, &k::cpu::matmul_backward}) {
    Vec dx1(N * C, 0.1f), dx2 = dx1, dw1(OC * C, 0.2f), dw2 = dw1, db1(OC, 0.3f), db2 = db1;
    backward(dx1.data(), dw1.data(), db1.data(), dy.data(), x.data(), w.data(), N, C, OC);
    backward(dx2.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), N, C, OC);
    backward(nullptr, dw2.data(), db2.data(), dy.data(), x.data(), w.data(), N, C, OC);
    EXPECT_EQ(dx1, dx2);
    EXPECT_EQ(dw1, dw2);
    EXPECT_EQ(db1, db2);
  }
}

TEST(Matmul, RefBackwardMatchesFiniteDifferences) {
  const int n = 3, c = 4, oc = 5;
  Vec x = randn(n * c, 1), w = randn(oc * c, 2), b = randn(oc, 3), proj = randn(n * oc, 4), out(n * oc);
  auto f = [&] {
    k::ref::matmul_forward(out.data(), x.data(), w.data(), b.data(), n, c, oc);
    return dot(out, proj);
  };
  Vec dx(n * c, 0), dw(oc * c, 0), db(oc, 0);
  k::ref::matmul_backward(dx.data(), dw.data(), db.data(), proj.data(), x.data(), w.data(), n, c, oc);
  EXPECT_TRUE(allclose(dx, finite_diff(x, f), 1e-3f, 1e-3f));
  EXPECT_TRUE(allclose(dw, finite_diff(w, f), 1e-3f, 1e-3f));
  EXPECT_TRUE(allclose(db, finite_diff(b, f), 1e-3f, 1e-3f));
}

TEST_P(GemmBackends, AttentionCpuMatchesRef) {
  Vec qkv = randn(N * 3 * C, 1), dy = randn(N * C, 2);
  Vec o1(N * C), o2(N * C), a1(B * NH * T * T), a2(a1.size()), s1(a1.size()), s2(a1.size());
  k::ref::attention_forward(o1.data(), a1.data(), qkv.data(), B, T, C, NH);
  k::cpu::attention_forward(o2.data(), a2.data(), qkv.data(), B, T, C, NH);
  EXPECT_TRUE(allclose(o2, o1, 1e-5f, 1e-5f));
  EXPECT_TRUE(allclose(a2, a1, 1e-6f, 1e-5f));
  Vec d1(N * 3 * C, 0.1f), d2 = d1;
  k::ref::attention_backward(d1.data(), s1.data(), dy.data(), qkv.data(), nullptr, a1.data(), B, T, C, NH);
  k::cpu::attention_backward(d2.data(), s2.data(), dy.data(), qkv.data(), nullptr, a1.data(), B, T, C, NH);
  EXPECT_TRUE(allclose(d2, d1, 1e-5f, 1e-4f));
}

TEST(Attention, IsCausal) {
  // Changing the last position's q, k, v must not change any earlier output.
  Vec qkv = randn(N * 3 * C, 1), o1(N * C), o2(N * C), att(B * NH * T * T);
  k::cpu::attention_forward(o1.data(), att.data(), qkv.data(), B, T, C, NH);
  for (int i = 0; i < 3 * C; i++) qkv[(T - 1) * 3 * C + i] += 1.0f;  // batch 0, last position
  k::cpu::attention_forward(o2.data(), att.data(), qkv.data(), B, T, C, NH);
  EXPECT_TRUE(allclose(o2.data(), o1.data(), (T - 1) * C, 0, 0));
}

TEST(Attention, RefBackwardMatchesFiniteDifferences) {
  const int b = 1, t = 4, c = 6, nh = 2;
  Vec qkv = randn(b * t * 3 * c, 1), proj = randn(b * t * c, 2), out(b * t * c), att(b * nh * t * t),
      scratch(att.size());
  auto f = [&] {
    k::ref::attention_forward(out.data(), att.data(), qkv.data(), b, t, c, nh);
    return dot(out, proj);
  };
  f();
  Vec d(qkv.size(), 0);
  k::ref::attention_backward(d.data(), scratch.data(), proj.data(), qkv.data(), nullptr, att.data(), b, t, c, nh);
  EXPECT_TRUE(allclose(d, finite_diff(qkv, f, 1e-3f), 2e-3f, 1e-2f));
}

TEST(Gelu, CpuMatchesRefAndFiniteDifferences) {
  Vec x = randn(N * C, 1, 2.0f), dy = randn(N * C, 2), o1(N * C), o2(N * C);
  k::ref::gelu_forward(o1.data(), x.data(), N * C);
  k::cpu::gelu_forward(o2.data(), x.data(), N * C);
  EXPECT_TRUE(allclose(o2, o1, 1e-6f, 1e-5f));
  Vec d1(N * C, 0.1f), d2 = d1;
  k::ref::gelu_backward(d1.data(), x.data(), dy.data(), N * C);
  k::cpu::gelu_backward(d2.data(), x.data(), dy.data(), N * C);
  EXPECT_TRUE(allclose(d2, d1, 1e-5f, 1e-5f));
  // tanh-approximation values: gelu(1) = 0.841192, gelu(-1) = -0.158808
  float in[2] = {1.0f, -1.0f}, out[2];
  k::ref::gelu_forward(out, in, 2);
  EXPECT_NEAR(out[0], 0.841192f, 1e-5f);
  EXPECT_NEAR(out[1], -0.158808f, 1e-5f);
  Vec xs = randn(20, 3, 2.0f), proj = randn(20, 4), o(20);
  auto f = [&] {
    k::ref::gelu_forward(o.data(), xs.data(), 20);
    return dot(o, proj);
  };
  Vec d(20, 0);
  k::ref::gelu_backward(d.data(), xs.data(), proj.data(), 20);
  EXPECT_TRUE(allclose(d, finite_diff(xs, f, 1e-3f), 2e-3f, 1e-2f));
}

TEST(Residual, ForwardAndBackward) {
  Vec a = randn(N, 1), b = randn(N, 2), dy = randn(N, 3), o1(N), o2(N);
  k::ref::residual_forward(o1.data(), a.data(), b.data(), N);
  k::cpu::residual_forward(o2.data(), a.data(), b.data(), N);
  for (int i = 0; i < N; i++) ASSERT_EQ(o1[i], a[i] + b[i]);
  EXPECT_TRUE(allclose(o2, o1, 0, 0));
  Vec da1(N, 1.0f), db1(N, 2.0f), da2 = da1, db2 = db1;
  k::ref::residual_backward(da1.data(), db1.data(), dy.data(), N);
  k::cpu::residual_backward(da2.data(), db2.data(), dy.data(), N);
  EXPECT_TRUE(allclose(da2, da1, 0, 0));
  EXPECT_TRUE(allclose(db2, db1, 0, 0));
  EXPECT_FLOAT_EQ(da1[3], 1.0f + dy[3]);
}

TEST(SoftmaxCrossEntropy, CpuMatchesRefAndIgnoresPadding) {
  Vec z = randn(N * Vp, 1, 3.0f);
  for (int64_t n = 0; n < N; n++)
    for (int i = V; i < Vp; i++) z[n * Vp + i] = 100.0f;  // padded logits must not matter
  auto tg = randint(N, V, 2);
  Vec l1(N), l2(N), p1(N * Vp), p2(N * Vp);
  crossentropy_rows(k::ops_for(k::Backend::kRef), l1.data(), p1.data(), z.data(), tg.data(), N, V, Vp);
  crossentropy_rows(k::ops_for(k::Backend::kCpu), l2.data(), p2.data(), z.data(), tg.data(), N, V, Vp);
  EXPECT_TRUE(allclose(l2, l1, 1e-5f, 1e-5f));
  EXPECT_TRUE(allclose(p2, p1, 1e-7f, 1e-5f));
  for (int64_t n = 0; n < N; n++) {
    double s = 0;
    for (int i = 0; i < V; i++) s += p1[n * Vp + i];
    EXPECT_NEAR(s, 1.0, 1e-5);
    EXPECT_EQ(p1[n * Vp + V], 0.0f);
  }
  // backward, accumulating and in place
  Vec d1(N * Vp, 0.5f), d2 = d1;
  k::ref::softmax_crossentropy_backward(d1.data(), p1.data(), tg.data(), nullptr, 0.25f, N, V, Vp, 0);
  k::cpu::softmax_crossentropy_backward(d2.data(), p1.data(), tg.data(), nullptr, 0.25f, N, V, Vp, 0);
  EXPECT_TRUE(allclose(d2, d1, 1e-6f, 1e-6f));
  Vec q1 = p1, q2 = p1;
  k::ref::softmax_crossentropy_backward(q1.data(), q1.data(), tg.data(), nullptr, 0.25f, N, V, Vp, 0);
  k::cpu::softmax_crossentropy_backward(q2.data(), q2.data(), tg.data(), nullptr, 0.25f, N, V, Vp, 0);
  EXPECT_TRUE(allclose(q2, q1, 1e-7f, 1e-6f));
  EXPECT_EQ(q1[V], 0.0f);
}

TEST(SoftmaxCrossEntropy, RefBackwardMatchesFiniteDifferences) {
  const int n = 3, v = 5, vp = 8;
  Vec z = randn(n * vp, 1), l(n), p(n * vp);
  std::vector<int> tg = {1, 4, 0};
  auto f = [&] {
    crossentropy_rows(k::ops_for(k::Backend::kRef), l.data(), p.data(), z.data(), tg.data(), n, v, vp);
    return (l[0] + l[1] + l[2]) / 3.0;
  };
  f();
  Vec d(n * vp, 0);
  k::ref::softmax_crossentropy_backward(d.data(), p.data(), tg.data(), nullptr, 1.0f / 3, n, v, vp, 0);
  EXPECT_TRUE(allclose(d, finite_diff(z, f, 1e-3f), 1e-3f, 1e-2f));
}

// The Goldfish loss (model/goldfish.hpp): per-token weights 0 (dropped) / 1 (kept); the loss is the mean over
// the kept tokens, computed here in float64 from the probabilities, and its gradient the weighted backward's.
TEST(SoftmaxCrossEntropy, TokenWeightsMaskedMeanMatchesFloat64AndFiniteDifferences) {
  const int n = 6, v = 5, vp = 8;
  Vec z = randn(n * vp, 4), l(n), p(n * vp);
  std::vector<int> tg = {1, 4, 0, 2, 3, 1};
  const Vec w = {1, 0, 1, 1, 0, 1};  // tokens 1 and 4 dropped
  const double kept = 4;
  auto f = [&] {
    crossentropy_rows(k::ops_for(k::Backend::kRef), l.data(), p.data(), z.data(), tg.data(), n, v, vp);
    double s = 0;
    for (int i = 0; i < n; i++) s += w[i] * l[i];
    return s / kept;
  };
  const double masked = f();
  double direct = 0;  // -log softmax(target) in float64 over the kept rows
  for (int i = 0; i < n; i++) {
    if (w[i] == 0) continue;
    double sum = 0;
    for (int j = 0; j < v; j++) sum += std::exp(static_cast<double>(z[i * vp + j]));
    direct += std::log(sum) - z[i * vp + tg[i]];
  }
  EXPECT_NEAR(masked, direct / kept, 1e-5);
  Vec d(n * vp, 0);
  k::ref::softmax_crossentropy_backward(d.data(), p.data(), tg.data(), w.data(), static_cast<float>(1 / kept), n, v,
                                        vp, 0);
  EXPECT_TRUE(allclose(d, finite_diff(z, f, 1e-3f), 1e-3f, 1e-2f));
  for (int j = 0; j < vp; j++) EXPECT_EQ(d[1 * vp + j], 0.0f) << "a dropped token has no gradient";
  // cpu = ref, accumulating and in place (in place, a dropped row is overwritten with zeros)
  for (bool in_place : {false, true}) {
    Vec d1 = in_place ? p : Vec(n * vp, 0.5f), d2 = d1;
    const float* p1 = in_place ? d1.data() : p.data();
    const float* p2 = in_place ? d2.data() : p.data();
    k::ref::softmax_crossentropy_backward(d1.data(), p1, tg.data(), w.data(), 0.25f, n, v, vp, 0);
    k::cpu::softmax_crossentropy_backward(d2.data(), p2, tg.data(), w.data(), 0.25f, n, v, vp, 0);
    EXPECT_TRUE(allclose(d2, d1, 1e-7f, 1e-6f)) << (in_place ? "in place" : "accumulating");
    EXPECT_EQ(d1[4 * vp + 2], in_place ? 0.0f : 0.5f);
  }
}

TEST(AdamW, MatchesClosedFormAndRef) {
  // one step from zero moments: m_hat = g, v_hat = g^2, so p -= lr (g/(|g|+eps) + wd p)
  Vec p = {1.0f, -2.0f, 0.5f}, g = {0.1f, -0.3f, 0.0f}, m(3, 0), v(3, 0);
  Vec p2 = p, m2 = m, v2 = v;
  k::ref::adamw_update(p.data(), nullptr, m.data(), v.data(), g.data(), 3, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, 1);
  EXPECT_NEAR(p[0], 1.0f - 0.01f * (1.0f + 0.1f * 1.0f), 1e-6f);
  EXPECT_NEAR(p[1], -2.0f - 0.01f * (-1.0f + 0.1f * -2.0f), 1e-6f);
  EXPECT_NEAR(p[2], 0.5f - 0.01f * (0.0f + 0.1f * 0.5f), 1e-6f);
  k::cpu::adamw_update(p2.data(), nullptr, m2.data(), v2.data(), g.data(), 3, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, 1);
  EXPECT_TRUE(allclose(p2, p, 1e-7f, 1e-6f));
  // several steps with a gradient scale, on a long vector
  Vec P = randn(1001, 1), G = randn(1001, 2), M(1001, 0), Vv(1001, 0), P2 = P, M2 = M, V2 = Vv;
  for (int t = 1; t <= 5; t++) {
    k::ref::adamw_update(P.data(), nullptr, M.data(), Vv.data(), G.data(), 1001, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.5f, t);
    k::cpu::adamw_update(P2.data(), nullptr, M2.data(), V2.data(), G.data(), 1001, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.5f, t);
  }
  EXPECT_TRUE(allclose(P2, P, 1e-6f, 1e-5f));
  EXPECT_TRUE(allclose(V2, Vv, 1e-9f, 1e-5f));
}

TEST(SumSquares, CpuMatchesRef) {
  Vec x = randn(12345, 1), y = randn(100, 2);
  const float* tensors[3] = {x.data(), y.data(), y.data()};
  const int64_t sizes[3] = {12345, 100, 0};
  double cpu[3] = {-1, -1, -1}, ref[3] = {-1, -1, -1}, alone = -1;
  k::cpu::sum_squares(cpu, tensors, sizes, 3);
  k::ref::sum_squares(ref, tensors, sizes, 3);
  for (int i = 0; i < 3; i++) EXPECT_NEAR(cpu[i], ref[i], 1e-6) << "tensor " << i;
  EXPECT_EQ(cpu[2], 0.0);
  // a tensor's sum does not depend on the others in the call (the gradient norm's bits)
  k::cpu::sum_squares(&alone, tensors + 1, sizes + 1, 1);
  EXPECT_EQ(alone, cpu[1]);
}

TEST(Dispatch, TablesAndNames) {
  EXPECT_EQ(k::ops_for(k::Backend::kCpu).matmul_forward, &k::cpu::matmul_forward);
  EXPECT_EQ(k::ops_for(k::Backend::kRef).matmul_forward, &k::ref::matmul_forward);
  EXPECT_EQ(k::parse_backend("ref"), k::Backend::kRef);
  EXPECT_THROW(k::parse_backend("gpu"), axonn::InvalidArgument);
  EXPECT_THROW(k::parse_gemm_backend("mkl"), axonn::InvalidArgument);
}


// Two in-process "ranks" (threads) each holding a slice of every row; the group combines their partial
// results through a barrier, as the model's all-reduce over X (or X*Y) would.
namespace {
struct TwoRankGroup {
  std::barrier<> sync{2};
  std::vector<float> slot[2];
};
struct RankCtx {
  TwoRankGroup* shared;
  int rank;
};
// The group's all-reduce (row_steps.hpp's `complete`) for this rank.
void two_rank_all_reduce(RankCtx* c, float* values, int64_t n, bool max) {
  c->shared->slot[c->rank].assign(values, values + n);
  c->shared->sync.arrive_and_wait();
  const Vec& other = c->shared->slot[1 - c->rank];
  for (int64_t i = 0; i < n; i++) values[i] = max ? std::max(values[i], other[i]) : values[i] + other[i];
  c->shared->sync.arrive_and_wait();  // nobody refills a slot before both have read it
}
// Columns [c0, c1) of a row-major [rows, cols] matrix.
Vec columns(const Vec& m, int64_t rows, int cols, int c0, int c1) {
  Vec out;
  for (int64_t r = 0; r < rows; r++) out.insert(out.end(), m.begin() + r * cols + c0, m.begin() + r * cols + c1);
  return out;
}
}  // namespace

class ShardedRows : public ::testing::TestWithParam<k::Backend> {};

TEST_P(ShardedRows, LayerNormOverTwoChannelSlicesMatchesWholeRows) {
  const k::Ops& ops = k::ops_for(GetParam());
  const int c0 = 5;  // slices [0,5) and [5,12): unequal on purpose
  Vec x = randn(N * C, 1, 2.0f), w = randn(C, 2), b = randn(C, 3), dy = randn(N * C, 4);
  Vec out(N * C), mean(N), rstd(N), dx(N * C, 0), dw(C, 0), db(C, 0);
  layernorm_steps(ops, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, C);
  layernorm_rows_backward(ops, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                          rstd.data(), N, C, C);
  TwoRankGroup shared;
  Vec outs[2], dxs[2], dws[2], dbs[2];
  auto rank = [&](int r) {
    int lo = r == 0 ? 0 : c0, hi = r == 0 ? c0 : C, Cl = hi - lo;
    RankCtx ctx{&shared, r};
    auto complete = [&](float* v, int64_t n, bool max) { two_rank_all_reduce(&ctx, v, n, max); };
    Vec xs = columns(x, N, C, lo, hi), dys = columns(dy, N, C, lo, hi), m(N), s(N);
    outs[r].resize(N * Cl);
    dxs[r].assign(N * Cl, 0);
    dws[r].assign(Cl, 0);
    dbs[r].assign(Cl, 0);
    // the model's steps (model/block.hpp): each row statistic completed over the two ranks between them
    layernorm_steps(ops, outs[r].data(), m.data(), s.data(), xs.data(), w.data() + lo, b.data() + lo, N, Cl, C,
                    complete);
    layernorm_rows_backward(ops, dxs[r].data(), dws[r].data(), dbs[r].data(), dys.data(), xs.data(), w.data() + lo,
                            m.data(), s.data(), N, Cl, C, complete);
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  for (int r = 0; r < 2; r++) {
    int lo = r == 0 ? 0 : c0, hi = r == 0 ? c0 : C;
    EXPECT_TRUE(allclose(outs[r], columns(out, N, C, lo, hi), 1e-5f, 1e-5f)) << "rank " << r;
    EXPECT_TRUE(allclose(dxs[r], columns(dx, N, C, lo, hi), 1e-5f, 1e-4f)) << "rank " << r;
    EXPECT_TRUE(allclose(dws[r], Vec(dw.begin() + lo, dw.begin() + hi), 1e-5f, 1e-4f));
    EXPECT_TRUE(allclose(dbs[r], Vec(db.begin() + lo, db.begin() + hi), 1e-5f, 1e-4f));
  }
}

TEST_P(ShardedRows, CrossEntropyOverTwoVocabularySlicesMatchesWholeRows) {
  const k::Ops& ops = k::ops_for(GetParam());
  const int v0 = 16;  // slice 0: ids [0,16) all valid; slice 1: [16,40), valid up to V = 37
  Vec z = randn(N * Vp, 1, 3.0f);
  auto tg = randint(N, V, 2);
  tg[0] = 3;
  tg[1] = 30;  // targets on both sides
  Vec w(N, 1.0f);  // per-token weights (the Goldfish mask): some tokens dropped
  w[1] = 0.0f;
  w[N - 2] = 0.0f;
  Vec loss(N), p(N * Vp);
  crossentropy_rows(ops, loss.data(), p.data(), z.data(), tg.data(), N, V, Vp);
  Vec dz = p;
  ops.softmax_crossentropy_backward(dz.data(), dz.data(), tg.data(), w.data(), 0.5f, N, V, Vp, 0);
  TwoRankGroup shared;
  Vec losses[2], probs[2], grads[2], one_pass_losses[2], one_pass_grads[2];
  auto rank = [&](int r) {
    int lo = r == 0 ? 0 : v0, hi = r == 0 ? v0 : Vp, Vs = hi - lo, valid = std::min(V, hi) - lo;
    RankCtx ctx{&shared, r};
    auto complete = [&](float* v, int64_t n, bool max) { two_rank_all_reduce(&ctx, v, n, max); };
    Vec zs = columns(z, N, Vp, lo, hi);
    losses[r].resize(N);
    probs[r].resize(N * Vs);
    // the model's steps (model/gpt.cpp): the row max and sums completed over the two ranks
    crossentropy_rows(ops, losses[r].data(), probs[r].data(), zs.data(), tg.data(), N, valid, Vs, lo, complete);
    grads[r] = probs[r];
    ops.softmax_crossentropy_backward(grads[r].data(), grads[r].data(), tg.data(), w.data(), 0.5f, N, valid, Vs, lo);
    // a training forward's: the losses and the gradient in one pass, in place over the logits
    one_pass_losses[r].resize(N);
    one_pass_grads[r] = zs;
    crossentropy_rows_gradient(ops, one_pass_losses[r].data(), one_pass_grads[r].data(), one_pass_grads[r].data(),
                               tg.data(), w.data(), 0.5f, N, valid, Vs, lo, complete);
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  for (int r = 0; r < 2; r++) {
    int lo = r == 0 ? 0 : v0, hi = r == 0 ? v0 : Vp;
    EXPECT_TRUE(allclose(losses[r], loss, 1e-5f, 1e-5f)) << "rank " << r;
    EXPECT_TRUE(allclose(probs[r], columns(p, N, Vp, lo, hi), 1e-7f, 1e-5f)) << "rank " << r;
    EXPECT_TRUE(allclose(grads[r], columns(dz, N, Vp, lo, hi), 1e-7f, 1e-5f)) << "rank " << r;
    EXPECT_EQ(one_pass_losses[r], losses[r]) << "rank " << r << ": one pass against the two steps";
    EXPECT_EQ(one_pass_grads[r], grads[r]) << "rank " << r << ": one pass against the two steps";
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ShardedRows, ::testing::Values(k::Backend::kRef, k::Backend::kCpu),
                         [](const auto& info) { return std::string(k::backend_name(info.param)); });

INSTANTIATE_TEST_SUITE_P(Kernels, GemmBackends, ::testing::Values(k::GemmBackend::kOneDnn, k::GemmBackend::kOpenBlas),
                         [](const auto& info) { return std::string(k::gemm_backend_name(info.param)); });
