// The bf16 CPU tables, kernels::ref_bf16_ops() (the oracle) and kernels::cpu_bf16_ops() (mixed-precision
// training on the CPU): every op against the fp32 op of the same backend (`ref`, `cpu`) on the widened inputs,
// the attention's log-sum-exp against a direct double sum, the attention backward (rebuilt from lse)
// against ref and against finite differences, and the rounding (round-to-nearest-even, once per output).
//
// Tolerances: an op that rounds its fp32 result once must give EXACTLY f32_to_bf16(ref result) (checked
// bit for bit; the error bound that implies is 2^-8 relative, half a bf16 ulp). Where the bf16 op computes
// differently from ref (attention backward: probabilities rebuilt as exp(s - lse) instead of kept), the
// bound is one bf16 ulp, 2^-7 relative, plus 1e-4 absolute for sums that cancel. cpu_bf16's attention also
// rounds its probabilities and score gradients to bf16 as GEMM operands: 2^-8 of the magnitudes of their
// terms more (within_operand_rounding).
// cpu_bf16's matmuls run bf16 GEMMs (oneDNN's AMX / AVX512-BF16 kernels, or the widened fallback), which
// sum the same exact products in another order: they are held to the fp32 summation bound, 2 (K + 2) 2^-24
// times the sum of the magnitudes of the terms, plus one bf16 ulp for a bf16 output (Gemm16 tests below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"
#include "row_steps.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
using axonn::bf16_to_f32;
using axonn::f32_to_bf16;
using axonn::test::allclose;
using axonn::test::crossentropy_rows;
using axonn::test::crossentropy_steps;
using axonn::test::crossentropy_rows_gradient;
using axonn::test::layernorm_rows_backward;
using axonn::test::layernorm_steps;
using axonn::test::randint;
using axonn::test::rand_bf;
using axonn::test::randn;
using axonn::test::to_bf;
using axonn::test::widen;
using k::bf16;
using Vec = std::vector<float>;
using Bf = std::vector<bf16>;

namespace {

constexpr float kUlp = 1.0f / 128.0f;  // 2^-7: one bf16 ulp, relative


// got[i] must be the round-to-nearest-even of ref[i], bit for bit.
::testing::AssertionResult rounded_once(const Bf& got, const Vec& ref) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << ref.size();
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); i++)
    if (got[i] != f32_to_bf16(ref[i]) && bad++ == 0) first = i;
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements are not round(ref); first ["
                                       << first << "] " << bf16_to_f32(got[first]) << " vs ref " << ref[first];
}

// The error bound of an fp32 sum of K + 2 terms (K exact products, a bias or an old value) in any order,
// against another order: twice gamma_{K+2} ~ (K + 2) 2^-24, relative to the sum of the terms' magnitudes.
double fp32_sum_bound(int64_t K, double magnitude) { return 2.0 * static_cast<double>(K + 2) * 0x1p-24 * magnitude; }

// got[i] (fp32) within the fp32 summation bound of ref[i], given mag[i] = the sum of |terms| of element i.
::testing::AssertionResult fp32_sum_close(const Vec& got, const Vec& ref, const std::vector<double>& mag, int64_t K) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); i++)
    if (std::fabs(static_cast<double>(got[i]) - ref[i]) > fp32_sum_bound(K, mag[i]) && bad++ == 0) first = i;
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " beyond the fp32 sum bound; first [" << first
                                       << "] " << got[first] << " vs " << ref[first] << " (bound "
                                       << fp32_sum_bound(K, mag[first]) << ")";
}

// got[i] (bf16) within one bf16 ulp of ref[i] plus the fp32 summation bound: two roundings of sums of the
// same terms taken in different orders.
::testing::AssertionResult bf16_sum_close(const Bf& got, const Vec& ref, const std::vector<double>& mag, int64_t K) {
  size_t bad = 0, first = 0;
  double tol_first = 0;
  for (size_t i = 0; i < got.size(); i++) {
    const double g = bf16_to_f32(got[i]);
    const double tol =
        kUlp * std::max(std::fabs(g), std::fabs(static_cast<double>(ref[i]))) + fp32_sum_bound(K, mag[i]);
    if (std::fabs(g - ref[i]) > tol && bad++ == 0) {
      first = i;
      tol_first = tol;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " beyond one bf16 ulp; first [" << first
                                       << "] " << bf16_to_f32(got[first]) << " vs " << ref[first] << " (tolerance "
                                       << tol_first << ")";
}

// The magnitudes of the terms of each output of a matmul (fp32 inputs x [N,C], w [OC,C], dy [N,OC]; the
// bias and the old values of the accumulated outputs count as one more term each).
struct MatmulMagnitudes {
  std::vector<double> out, dinp, dweight, dbias;
  MatmulMagnitudes(const Vec& x, const Vec& w, const Vec* bias, const Vec& dy, const Vec& dinp0, const Vec& dweight0,
                   const Vec& dbias0, int64_t N, int C, int OC)
      : out(N * OC), dinp(N * C), dweight(OC * C), dbias(OC) {
    for (int64_t n = 0; n < N; n++)
      for (int o = 0; o < OC; o++) {
        double m = bias ? std::fabs((*bias)[o]) : 0.0;
        for (int c = 0; c < C; c++) m += std::fabs(static_cast<double>(x[n * C + c]) * w[o * C + c]);
        out[n * OC + o] = m;
      }
    for (size_t i = 0; i < dinp.size(); i++) dinp[i] = std::fabs(dinp0[i]);
    for (size_t i = 0; i < dweight.size(); i++) dweight[i] = std::fabs(dweight0[i]);
    for (int o = 0; o < OC; o++) dbias[o] = std::fabs(dbias0[o]);
    for (int64_t n = 0; n < N; n++)
      for (int o = 0; o < OC; o++) {
        const double d = std::fabs(dy[n * OC + o]);
        dbias[o] += d;
        for (int c = 0; c < C; c++) {
          dinp[n * C + c] += d * std::fabs(w[o * C + c]);
          dweight[o * C + c] += d * std::fabs(x[n * C + c]);
        }
      }
  }
};

// The backend under test: each test runs for ref (ref_bf16 against ref) and cpu (cpu_bf16 against cpu).
k::Backend g_backend = k::Backend::kRef;
const k::OpsBf16& ops() { return k::ops_bf16_for(g_backend); }
const k::Ops& fp32() { return k::ops_for(g_backend); }

class Bf16Table : public ::testing::TestWithParam<k::Backend> {
 protected:
  void SetUp() override { g_backend = GetParam(); }
};
std::string backend_label(const ::testing::TestParamInfo<k::Backend>& info) {
  return std::string(k::backend_name(info.param));
}

}  // namespace

TEST(Rounding, RoundToNearestEven) {
  // Bits of 1 + 2^-8: exactly half a bf16 ulp above 1 (mantissa ...0): the tie goes to the even 1.0.
  auto from_bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000u)), 0x3f80u);  // tie, even below
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000u)), 0x3f82u);  // tie, odd below: up to even
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001u)), 0x3f81u);  // just above the tie: up
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80u);  // just below: down
  EXPECT_EQ(f32_to_bf16(from_bits(0xbf818000u)), 0xbf82u);  // sign symmetric
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80u);  // the largest float rounds to infinity
  // The cast op is the same rounding, and widening is exact.
  Vec x = {from_bits(0x3f808000u), from_bits(0x3f818000u), -3.0f, 1e-30f};
  Bf b(x.size());
  ops().cast_from_f32(b.data(), x.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(rounded_once(b, x));
  Vec back(x.size());
  ops().cast_to_f32(back.data(), b.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(back, widen(b));
}

TEST_P(Bf16Table, ElementwiseRoundOnceAndAccumulateInFp32) {
  const int64_t N = 1000;
  Bf a = rand_bf(N, 1), b = rand_bf(N, 2), dy = rand_bf(N, 3), d0 = rand_bf(N, 4), d1 = rand_bf(N, 5);
  Vec fa = widen(a), fb = widen(b), fdy = widen(dy);

  Bf out(N);
  Vec ref(N);
  ops().residual_forward(out.data(), a.data(), b.data(), N);
  fp32().residual_forward(ref.data(), fa.data(), fb.data(), N);
  EXPECT_TRUE(rounded_once(out, ref)) << "residual_forward";

  ops().gelu_forward(out.data(), a.data(), N);
  fp32().gelu_forward(ref.data(), fa.data(), N);
  EXPECT_TRUE(rounded_once(out, ref)) << "gelu_forward";

  // Accumulating outputs: the old bf16 value widened, the new term added in fp32, one rounding.
  Bf dinp = d0;
  Vec fdinp = widen(d0);
  ops().gelu_backward(dinp.data(), a.data(), dy.data(), N);
  fp32().gelu_backward(fdinp.data(), fa.data(), fdy.data(), N);
  EXPECT_TRUE(rounded_once(dinp, fdinp)) << "gelu_backward";

  Bf da = d0, db = d1;
  Vec fda = widen(d0), fdb = widen(d1);
  ops().residual_backward(da.data(), db.data(), dy.data(), N);
  fp32().residual_backward(fda.data(), fdb.data(), fdy.data(), N);
  EXPECT_TRUE(rounded_once(da, fda)) << "residual_backward da";
  EXPECT_TRUE(rounded_once(db, fdb)) << "residual_backward db";
}

TEST_P(Bf16Table, EmbeddingAndPosition) {
  const int B = 3, T = 7, C = 12, V = 37;
  const int64_t N = B * T;
  Bf wte = rand_bf(V * C, 1), wpe = rand_bf(T * C, 2), dy = rand_bf(N * C, 3);
  auto inp = randint(N, V, 4);
  inp[1] = inp[2] = inp[0];
  for (auto [begin, rows] : {std::pair{0, V}, std::pair{9, 11}}) {
    Bf w(wte.begin() + begin * C, wte.begin() + (begin + rows) * C), out(N * C, f32_to_bf16(7.0f));
    Vec fw = widen(w), ref(N * C);
    ops().embedding_forward(out.data(), inp.data(), w.data(), begin, rows, N, C);
    fp32().embedding_forward(ref.data(), inp.data(), fw.data(), begin, rows, N, C);
    EXPECT_TRUE(rounded_once(out, ref)) << "embedding_forward rows [" << begin << ", " << begin + rows << ")";
    Vec dw(rows * C, 0.5f), dref = dw, fdy = widen(dy);
    ops().embedding_backward(dw.data(), dy.data(), inp.data(), begin, rows, N, C);
    fp32().embedding_backward(dref.data(), fdy.data(), inp.data(), begin, rows, N, C);
    EXPECT_EQ(dw, dref) << "embedding_backward accumulates in fp32 as ref";
  }
  Bf p = rand_bf(N * C, 5);
  Vec fp = widen(p), fwpe = widen(wpe);
  ops().position_forward(p.data(), wpe.data(), B, T, C);
  fp32().position_forward(fp.data(), fwpe.data(), B, T, C);
  EXPECT_TRUE(rounded_once(p, fp)) << "position_forward";
  Vec dp(T * C, 0.25f), dpref = dp, fdy = widen(dy);
  ops().position_backward(dp.data(), dy.data(), B, T, C);
  fp32().position_backward(dpref.data(), fdy.data(), B, T, C);
  EXPECT_EQ(dp, dpref);
}

TEST_P(Bf16Table, LayerNorm) {
  const int64_t N = 13;
  const int C = 40;
  Bf x = rand_bf(N * C, 1, 2.0f), w = rand_bf(C, 2), b = rand_bf(C, 3), dy = rand_bf(N * C, 4),
     d0 = rand_bf(N * C, 5);
  Vec fx = widen(x), fw = widen(w), fb = widen(b), fdy = widen(dy);
  Bf out(N * C);
  Vec mean(N), rstd(N), ref(N * C), rmean(N), rrstd(N);
  layernorm_steps(ops(), out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, C);
  layernorm_steps(fp32(), ref.data(), rmean.data(), rrstd.data(), fx.data(), fw.data(), fb.data(), N, C, C);
  EXPECT_TRUE(rounded_once(out, ref));
  EXPECT_EQ(mean, rmean) << "statistics stay fp32";
  EXPECT_EQ(rstd, rrstd);

  Bf dinp = d0;
  Vec fdinp = widen(d0), dw(C, 0.5f), db(C, -0.5f), rdw = dw, rdb = db;
  layernorm_rows_backward(ops(), dinp.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                          rstd.data(), N, C, C);
  layernorm_rows_backward(fp32(), fdinp.data(), rdw.data(), rdb.data(), fdy.data(), fx.data(), fw.data(),
                          rmean.data(), rrstd.data(), N, C, C);
  EXPECT_TRUE(rounded_once(dinp, fdinp));
  EXPECT_EQ(dw, rdw) << "parameter gradients accumulate in fp32";
  EXPECT_EQ(db, rdb);
}

// The GPT-2 block's ops at the shapes of training: odd channel counts, rows split over the threads, GPT-2's
// padded vocabulary (50,257 of 50,304). cpu_bf16 works on bf16 directly (no fp32 copies of the tensors) and must
// still give round(the fp32 op on the widened inputs), bit for bit, and the same fp32 row values.
TEST_P(Bf16Table, GptOpsAtTrainingShapesRoundOnce) {
  for (const int64_t N : {int64_t{3} * 100003 + 1, int64_t{100003}, int64_t{3} * 4096 + 5, int64_t{17}}) {
    Bf a = rand_bf(N, 11, 3.0f), b = rand_bf(N, 12), dy = rand_bf(N, 13), d0 = rand_bf(N, 14);
    Vec fa = widen(a), fb = widen(b), fdy = widen(dy), ref(N);
    Bf out(N);
    // GELU's tanhf gives other last bits in a vector lane than in scalar code: each element must take the
    // lane it takes in the fp32 op, for every N and thread count
    ops().gelu_forward(out.data(), a.data(), N);
    fp32().gelu_forward(ref.data(), fa.data(), N);
    EXPECT_TRUE(rounded_once(out, ref)) << "gelu_forward N=" << N;
    Bf dinp = d0;
    Vec fdinp = widen(d0);
    ops().gelu_backward(dinp.data(), a.data(), dy.data(), N);
    fp32().gelu_backward(fdinp.data(), fa.data(), fdy.data(), N);
    EXPECT_TRUE(rounded_once(dinp, fdinp)) << "gelu_backward N=" << N;
    ops().residual_forward(out.data(), a.data(), b.data(), N);
    fp32().residual_forward(ref.data(), fa.data(), fb.data(), N);
    EXPECT_TRUE(rounded_once(out, ref)) << "residual_forward";
    Bf da = d0, db = b;
    Vec fda = widen(d0), fdb = fb;
    ops().residual_backward(da.data(), db.data(), dy.data(), N);
    fp32().residual_backward(fda.data(), fdb.data(), fdy.data(), N);
    EXPECT_TRUE(rounded_once(da, fda)) << "residual_backward da N=" << N;
    EXPECT_TRUE(rounded_once(db, fdb)) << "residual_backward db N=" << N;
  }
  for (const int C : {771, 768}) {
    const int B = 2, T = 33;
    const int64_t N = B * T;
    Bf x = rand_bf(N * C, 21, 2.0f), w = rand_bf(C, 22), bias = rand_bf(C, 23), dy = rand_bf(N * C, 24),
       d0 = rand_bf(N * C, 25), wpe = rand_bf(T * C, 26);
    Vec fx = widen(x), fw = widen(w), fbias = widen(bias), fdy = widen(dy), fwpe = widen(wpe);
    Bf p = x;
    Vec fp = fx;
    ops().position_forward(p.data(), wpe.data(), B, T, C);
    fp32().position_forward(fp.data(), fwpe.data(), B, T, C);
    EXPECT_TRUE(rounded_once(p, fp)) << "position_forward C=" << C;
    {
      Bf out(N * C);
      Vec mean(N), rstd(N), ref(N * C), rmean(N), rrstd(N);
      layernorm_steps(ops(), out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N, C, C);
      layernorm_steps(fp32(), ref.data(), rmean.data(), rrstd.data(), fx.data(), fw.data(), fbias.data(), N, C, C);
      EXPECT_TRUE(rounded_once(out, ref)) << "layernorm_forward C=" << C;
      EXPECT_EQ(mean, rmean) << C;
      EXPECT_EQ(rstd, rrstd) << C;
      Bf dinp = d0;
      Vec fdinp = widen(d0), dw(C, 0.5f), dbias(C, -0.5f), rdw = dw, rdbias = dbias;
      layernorm_rows_backward(ops(), dinp.data(), dw.data(), dbias.data(), dy.data(), x.data(), w.data(),
                              mean.data(), rstd.data(), N, C, C);
      layernorm_rows_backward(fp32(), fdinp.data(), rdw.data(), rdbias.data(), fdy.data(), fx.data(), fw.data(),
                              rmean.data(), rrstd.data(), N, C, C);
      EXPECT_TRUE(rounded_once(dinp, fdinp)) << "layernorm_backward C=" << C;
      EXPECT_EQ(dw, rdw) << C;
      EXPECT_EQ(dbias, rdbias) << C;
    }
  }
  {
    const int64_t N = 5;
    const int V = 50257, Vs = 50304;
    Bf z = rand_bf(N * Vs, 31, 4.0f);
    auto targets = randint(N, V, 32);
    targets[1] = V - 1;  // the last real token, next to the padding
    Vec fz = widen(z), losses(N), rlosses(N), rp(N * Vs), row_values(3 * N), rrow_values(3 * N);
    crossentropy_steps(fp32(), rrow_values.data(), rlosses.data(), rp.data(), fz.data(), targets.data(), N, V, Vs, 0);
    Bf probs = z;  // in place, as the model calls it
    crossentropy_steps(ops(), row_values.data(), losses.data(), probs.data(), probs.data(), targets.data(), N, V, Vs,
                       0);
    EXPECT_EQ(row_values, rrow_values) << "the row max, sums and target logits stay fp32";
    EXPECT_TRUE(rounded_once(probs, rp)) << "softmax_crossentropy_forward";
    EXPECT_EQ(losses, rlosses);
    Vec fprobs = widen(probs), fin = fprobs;
    Bf in_place = probs;
    ops().softmax_crossentropy_backward(in_place.data(), in_place.data(), targets.data(), nullptr, 1.0f / N, N, V, Vs,
                                        0);
    fp32().softmax_crossentropy_backward(fin.data(), fin.data(), targets.data(), nullptr, 1.0f / N, N, V, Vs, 0);
    EXPECT_TRUE(rounded_once(in_place, fin)) << "softmax_crossentropy_backward in place";
    Bf acc = rand_bf(N * Vs, 33);
    Vec facc = widen(acc);
    ops().softmax_crossentropy_backward(acc.data(), probs.data(), targets.data(), nullptr, 1.0f / N, N, V, Vs, 0);
    fp32().softmax_crossentropy_backward(facc.data(), fprobs.data(), targets.data(), nullptr, 1.0f / N, N, V, Vs, 0);
    EXPECT_TRUE(rounded_once(acc, facc)) << "softmax_crossentropy_backward accumulating";
  }
}

// The Llama block's ops: each rounds its fp32 result once (RMSNorm with fp32 statistics, RoPE with the
// fp32 tables, SwiGLU, the KV repetition), and the weight gradient accumulates in fp32.
TEST_P(Bf16Table, LlamaOpsRoundOnceWithFp32Statistics) {
  const int64_t N = 13;
  const int C = 40, B = 1, T = 13;
  Bf x = rand_bf(N * C, 1, 2.0f), w = rand_bf(C, 2), dy = rand_bf(N * C, 3), d0 = rand_bf(N * C, 4);
  Vec fx = widen(x), fw = widen(w), fdy = widen(dy);
  Vec ss(N), rss(N), rstd(N), rrstd(N), dot(N), rdot(N), ref(N * C);
  Bf out(N * C);
  ops().rmsnorm_sumsq(ss.data(), x.data(), N, C);
  fp32().rmsnorm_sumsq(rss.data(), fx.data(), N, C);
  EXPECT_EQ(ss, rss) << "statistics in fp32";
  rstd = ss;
  rrstd = rss;
  ops().rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, C, 1e-5f);
  fp32().rmsnorm_forward(ref.data(), rrstd.data(), fx.data(), fw.data(), N, C, C, 1e-5f);
  EXPECT_TRUE(rounded_once(out, ref)) << "rmsnorm_forward";
  EXPECT_EQ(rstd, rrstd);
  ops().rmsnorm_backward_dot(dot.data(), dy.data(), x.data(), w.data(), N, C);
  fp32().rmsnorm_backward_dot(rdot.data(), fdy.data(), fx.data(), fw.data(), N, C);
  EXPECT_EQ(dot, rdot);
  Bf dinp = d0;
  Vec fdinp = widen(d0), dw(C, 0.5f), rdw = dw;
  ops().rmsnorm_backward(dinp.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), dot.data(), N, C, C);
  fp32().rmsnorm_backward(fdinp.data(), rdw.data(), fdy.data(), fx.data(), fw.data(), rrstd.data(), rdot.data(), N, C, C);
  EXPECT_TRUE(rounded_once(dinp, fdinp)) << "rmsnorm_backward";
  EXPECT_EQ(dw, rdw);

  const int HS = 8, heads = 3, stride = C;  // 5 heads of 8 in each row, the first 3 rotated
  Vec cos(static_cast<size_t>(T) * HS / 2), sin(cos.size());
  for (size_t i = 0; i < cos.size(); i++) {
    cos[i] = std::cos(0.1f * static_cast<float>(i));
    sin[i] = std::sin(0.1f * static_cast<float>(i));
  }
  for (bool forward : {true, false}) {
    Bf r = x;
    Vec fr = fx;
    if (forward) {
      ops().rope_forward(r.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
      fp32().rope_forward(fr.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
    } else {
      ops().rope_backward(r.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
      fp32().rope_backward(fr.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
    }
    EXPECT_TRUE(rounded_once(r, fr)) << (forward ? "rope_forward" : "rope_backward");
  }

  const int F = C / 2;  // x as [N, 2F] = gate | up
  Bf act(N * F), dact = rand_bf(N * F, 5), dgu = d0;
  Vec ract(N * F), fdact = widen(dact), rdgu = widen(d0);
  ops().swiglu_forward(act.data(), x.data(), N, F);
  fp32().swiglu_forward(ract.data(), fx.data(), N, F);
  EXPECT_TRUE(rounded_once(act, ract)) << "swiglu_forward";
  ops().swiglu_backward(dgu.data(), x.data(), dact.data(), N, F);
  fp32().swiglu_backward(rdgu.data(), fx.data(), fdact.data(), N, F);
  EXPECT_TRUE(rounded_once(dgu, rdgu)) << "swiglu_backward";

  const int NH = 4, NKV = 2, hs = 5;  // x as [N, (4 + 2*2)*5 = 40]
  Bf rep(N * 3 * NH * hs), drep = rand_bf(N * 3 * NH * hs, 6), dkv = d0;
  Vec rrep(rep.size()), fdrep = widen(drep), rdkv = widen(d0);
  ops().repeat_kv_forward(rep.data(), x.data(), N, NH, NKV, hs);
  fp32().repeat_kv_forward(rrep.data(), fx.data(), N, NH, NKV, hs);
  EXPECT_TRUE(rounded_once(rep, rrep)) << "repeat_kv_forward";
  ops().repeat_kv_backward(dkv.data(), drep.data(), N, NH, NKV, hs);
  fp32().repeat_kv_backward(rdkv.data(), fdrep.data(), N, NH, NKV, hs);
  EXPECT_TRUE(rounded_once(dkv, rdkv)) << "repeat_kv_backward";
}

// The Llama block's ops at the shapes of training (llama-124m's rows: C = 768, F = 2048 for SwiGLU, 12
// heads of 64 with 4 KV heads), and an odd C: round(the fp32 op on the widened inputs), bit for bit.
TEST_P(Bf16Table, LlamaOpsAtTrainingShapesRoundOnce) {
  const int B = 2, T = 37;
  const int64_t N = B * T;
  for (const int C : {768, 771}) {
    Bf x = rand_bf(N * C, 41, 2.0f), w = rand_bf(C, 42), dy = rand_bf(N * C, 43), d0 = rand_bf(N * C, 44);
    Vec fx = widen(x), fw = widen(w), fdy = widen(dy);
    Vec ss(N), rss(N), dot(N), rdot(N), ref(N * C);
    Bf out(N * C);
    ops().rmsnorm_sumsq(ss.data(), x.data(), N, C);
    fp32().rmsnorm_sumsq(rss.data(), fx.data(), N, C);
    EXPECT_EQ(ss, rss) << C;
    Vec rstd = ss, rrstd = rss;
    ops().rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, C, 1e-5f);
    fp32().rmsnorm_forward(ref.data(), rrstd.data(), fx.data(), fw.data(), N, C, C, 1e-5f);
    EXPECT_TRUE(rounded_once(out, ref)) << "rmsnorm_forward C=" << C;
    ops().rmsnorm_backward_dot(dot.data(), dy.data(), x.data(), w.data(), N, C);
    fp32().rmsnorm_backward_dot(rdot.data(), fdy.data(), fx.data(), fw.data(), N, C);
    EXPECT_EQ(dot, rdot) << C;
    Bf dinp = d0;
    Vec fdinp = widen(d0), dw(C, 0.5f), rdw = dw;
    ops().rmsnorm_backward(dinp.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), dot.data(), N, C, C);
    fp32().rmsnorm_backward(fdinp.data(), rdw.data(), fdy.data(), fx.data(), fw.data(), rrstd.data(), rdot.data(), N,
                            C, C);
    EXPECT_TRUE(rounded_once(dinp, fdinp)) << "rmsnorm_backward C=" << C;
    EXPECT_EQ(dw, rdw) << C;
  }
  {
    const int NH = 12, NKV = 4, HS = 64, stride = (NH + 2 * NKV) * HS;  // q | k | v rows; q and k rotate
    Bf x = rand_bf(N * stride, 45, 2.0f);
    Vec fx = widen(x), cos(static_cast<size_t>(T) * HS / 2), sin(cos.size());
    for (size_t i = 0; i < cos.size(); i++) {
      cos[i] = std::cos(0.01f * static_cast<float>(i));
      sin[i] = std::sin(0.01f * static_cast<float>(i));
    }
    for (bool forward : {true, false}) {
      Bf r = x;
      Vec fr = fx;
      auto rope = forward ? ops().rope_forward : ops().rope_backward;
      auto frope = forward ? fp32().rope_forward : fp32().rope_backward;
      rope(r.data(), cos.data(), sin.data(), B, T, NH + NKV, HS, stride);
      frope(fr.data(), cos.data(), sin.data(), B, T, NH + NKV, HS, stride);
      EXPECT_TRUE(rounded_once(r, fr)) << (forward ? "rope_forward" : "rope_backward");
    }
    Bf rep(N * 3 * NH * HS), drep = rand_bf(N * 3 * NH * HS, 46), dkv = rand_bf(N * stride, 47);
    Vec rrep(rep.size()), fdrep = widen(drep), rdkv = widen(dkv);
    ops().repeat_kv_forward(rep.data(), x.data(), N, NH, NKV, HS);
    fp32().repeat_kv_forward(rrep.data(), fx.data(), N, NH, NKV, HS);
    EXPECT_TRUE(rounded_once(rep, rrep)) << "repeat_kv_forward";
    ops().repeat_kv_backward(dkv.data(), drep.data(), N, NH, NKV, HS);
    fp32().repeat_kv_backward(rdkv.data(), fdrep.data(), N, NH, NKV, HS);
    EXPECT_TRUE(rounded_once(dkv, rdkv)) << "repeat_kv_backward: each row rounded once, after its KV copies";
  }
  for (const int F : {2048, 2051}) {
    Bf gu = rand_bf(N * 2 * F, 48, 3.0f), dact = rand_bf(N * F, 49), dgu = rand_bf(N * 2 * F, 50);
    Vec fgu = widen(gu), fdact = widen(dact), rdgu = widen(dgu), ract(N * F);
    Bf act(N * F);
    ops().swiglu_forward(act.data(), gu.data(), N, F);
    fp32().swiglu_forward(ract.data(), fgu.data(), N, F);
    EXPECT_TRUE(rounded_once(act, ract)) << "swiglu_forward F=" << F;
    ops().swiglu_backward(dgu.data(), gu.data(), dact.data(), N, F);
    fp32().swiglu_backward(rdgu.data(), fgu.data(), fdact.data(), N, F);
    EXPECT_TRUE(rounded_once(dgu, rdgu)) << "swiglu_backward F=" << F;
  }
}

TEST_P(Bf16Table, Matmul) {
  const int64_t N = 11;
  const int C = 24, OC = 17;
  Bf x = rand_bf(N * C, 1), w = rand_bf(OC * C, 2), b = rand_bf(OC, 3), dy = rand_bf(N * OC, 4),
     d0 = rand_bf(N * C, 5);
  Vec fx = widen(x), fw = widen(w), fb = widen(b), fdy = widen(dy);
  // ref_bf16 widens and runs ref's matmul: bit for bit round(ref). cpu_bf16 runs bf16 GEMMs, not cpu's sgemm
  // on widened inputs: the same exact products summed in another order (and the bias added after the
  // products, not before), so it is held to one bf16 ulp plus the fp32 summation bound instead.
  const bool exact = g_backend == k::Backend::kRef;
  Vec fdinp = widen(d0), dw(OC * C, 0.5f), db(OC, 0.25f), rdw = dw, rdb = db;
  const MatmulMagnitudes mag(fx, fw, &fb, fdy, fdinp, dw, db, N, C, OC);
  for (bool with_bias : {true, false}) {
    Bf out(N * OC);
    Vec ref(N * OC);
    ops().matmul_forward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, C, OC);
    fp32().matmul_forward(ref.data(), fx.data(), fw.data(), with_bias ? fb.data() : nullptr, N, C, OC);
    EXPECT_TRUE(exact ? rounded_once(out, ref) : bf16_sum_close(out, ref, mag.out, C)) << "bias " << with_bias;
  }
  Bf dinp = d0;
  ops().matmul_backward(dinp.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC);
  fp32().matmul_backward(fdinp.data(), rdw.data(), rdb.data(), fdy.data(), fx.data(), fw.data(), N, C, OC);
  if (exact) {
    EXPECT_TRUE(rounded_once(dinp, fdinp));
    EXPECT_EQ(dw, rdw);
    EXPECT_EQ(db, rdb);
  } else {
    EXPECT_TRUE(bf16_sum_close(dinp, fdinp, mag.dinp, OC));
    EXPECT_TRUE(fp32_sum_close(dw, rdw, mag.dweight, N));
    EXPECT_TRUE(fp32_sum_close(db, rdb, mag.dbias, N));
  }
  // Null outputs are skipped (the tensor-parallel linear asks for dinp and dweight separately).
  Bf dinp2 = d0;
  ops().matmul_backward(dinp2.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), N, C, OC);
  EXPECT_EQ(dinp2, dinp);
  Vec dw2(OC * C, 0.5f);
  ops().matmul_backward(nullptr, dw2.data(), nullptr, dy.data(), x.data(), w.data(), N, C, OC);
  EXPECT_EQ(dw2, dw);
}

TEST_P(Bf16Table, SoftmaxCrossEntropy) {
  const int64_t N = 9;
  const int V = 50, Vs = 56;
  Bf z = rand_bf(N * Vs, 1, 3.0f);
  auto targets = randint(N, V, 2);
  Vec fz = widen(z), losses(N), rlosses(N), rp(N * Vs);
  crossentropy_rows(fp32(), rlosses.data(), rp.data(), fz.data(), targets.data(), N, V, Vs);
  Bf probs(N * Vs);
  crossentropy_rows(ops(), losses.data(), probs.data(), z.data(), targets.data(), N, V, Vs);
  EXPECT_TRUE(rounded_once(probs, rp));
  EXPECT_EQ(losses, rlosses) << "the loss is fp32, from the fp32 softmax";
  // In place (probs aliasing logits), as the model does.
  Bf zz = z;
  crossentropy_rows(ops(), losses.data(), zz.data(), zz.data(), targets.data(), N, V, Vs);
  EXPECT_EQ(zz, probs);

  const float dloss = 1.0f / N;
  Vec mask(N, 1.0f);  // per-token weights (the Goldfish mask): 0 for the dropped tokens
  mask[2] = mask[5] = 0.0f;
  for (const float* w : {static_cast<const float*>(nullptr), static_cast<const float*>(mask.data())}) {
    Bf d0 = rand_bf(N * Vs, 3), dz = d0;
    Vec fdz = widen(d0), fprobs = widen(probs);
    ops().softmax_crossentropy_backward(dz.data(), probs.data(), targets.data(), w, dloss, N, V, Vs, 0);
    fp32().softmax_crossentropy_backward(fdz.data(), fprobs.data(), targets.data(), w, dloss, N, V, Vs, 0);
    EXPECT_TRUE(rounded_once(dz, fdz)) << "accumulating" << (w ? ", weighted" : "");
    // dlogits aliasing probs: overwritten, padding zeroed.
    Vec fin = fprobs;
    Bf in_place = probs;
    ops().softmax_crossentropy_backward(in_place.data(), in_place.data(), targets.data(), w, dloss, N, V, Vs, 0);
    fp32().softmax_crossentropy_backward(fin.data(), fin.data(), targets.data(), w, dloss, N, V, Vs, 0);
    EXPECT_TRUE(rounded_once(in_place, fin)) << "in place" << (w ? ", weighted" : "");
    if (w) {
      EXPECT_EQ(widen(in_place)[2 * Vs + 1], 0.0f) << "a dropped token has no gradient";
    }
    // a training forward's: the losses and the gradient in one pass over the logits, in place; the bf16
    // probabilities it never stores are rounded as the forward stores them: the two steps' bits
    Bf one_pass = z;
    Vec one_pass_losses(N);
    crossentropy_rows_gradient(ops(), one_pass_losses.data(), one_pass.data(), one_pass.data(), targets.data(), w,
                               dloss, N, V, Vs);
    EXPECT_EQ(one_pass, in_place) << "one pass against the two steps" << (w ? ", weighted" : "");
    EXPECT_EQ(one_pass_losses, losses) << "one pass against the two steps";
  }
}

TEST_P(Bf16Table, AdamWUpdatesMasterAndRoundsTheCopy) {
  const int64_t n = 777;
  Vec master = randn(n, 1), m = randn(n, 2, 0.1f), v = randn(n, 3, 0.1f), g = randn(n, 4);
  for (auto& x : v) x = x * x;
  Vec rmaster = master, rm = m, rv = v;
  Bf params(n, 0);
  ops().adamw_update(master.data(), params.data(), m.data(), v.data(), g.data(), n, 3e-3f, 0.9f, 0.999f, 1e-8f, 0.1f,
                     0.5f, 3);
  fp32().adamw_update(rmaster.data(), nullptr, rm.data(), rv.data(), g.data(), n, 3e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.5f, 3);
  EXPECT_EQ(master, rmaster) << "the fp32 master update is ref's";
  EXPECT_EQ(m, rm);
  EXPECT_EQ(v, rv);
  EXPECT_TRUE(rounded_once(params, master)) << "params = round(master)";
}

namespace {

// Attention on doubles, straight from the definition: out and lse for qkv [B,T,3C].
void attention_double(std::vector<double>& out, std::vector<double>& lse, const std::vector<double>& qkv, int B, int T,
                      int C, int NH) {
  const int HS = C / NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  out.assign(static_cast<size_t>(B) * T * C, 0.0);
  lse.assign(static_cast<size_t>(B) * NH * T, 0.0);
  std::vector<double> s(static_cast<size_t>(T));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const double* q = &qkv[(static_cast<size_t>(b) * T + t) * 3 * C + h * HS];
        double mx = -1e300;
        for (int t2 = 0; t2 <= t; t2++) {
          const double* kk = &qkv[(static_cast<size_t>(b) * T + t2) * 3 * C + C + h * HS];
          double dot = 0;
          for (int i = 0; i < HS; i++) dot += q[i] * kk[i];
          s[t2] = dot * scale;
          mx = std::max(mx, s[t2]);
        }
        double sum = 0;
        for (int t2 = 0; t2 <= t; t2++) sum += std::exp(s[t2] - mx);
        lse[(static_cast<size_t>(b) * NH + h) * T + t] = mx + std::log(sum);
        double* o = &out[(static_cast<size_t>(b) * T + t) * C + h * HS];
        for (int t2 = 0; t2 <= t; t2++) {
          const double p = std::exp(s[t2] - mx) / sum;
          const double* vv = &qkv[(static_cast<size_t>(b) * T + t2) * 3 * C + 2 * C + h * HS];
          for (int i = 0; i < HS; i++) o[i] += p * vv[i];
        }
      }
}

// cpu_bf16's attention rounds its probabilities p and score gradients ds to bf16 once, as the operands of
// the GEMMs after them (out = p v; dv += p^T dy, dq += ds k, dk += ds^T q). Rounding to nearest moves each
// operand by at most 2^-8 of itself (half a bf16 ulp), so each output moves by at most 2^-8 times the sum of
// the magnitudes of its terms. These are those sums, in double from the definition, for out [B,T,C] and
// dqkv [B,T,3C].
struct AttentionOperandMagnitudes {
  std::vector<double> out, dqkv;
};
AttentionOperandMagnitudes attention_operand_magnitudes(const Vec& qkv, const Vec& dy, int B, int T, int C, int NH) {
  const int HS = C / NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  const size_t C3 = 3 * static_cast<size_t>(C);
  AttentionOperandMagnitudes m{std::vector<double>(static_cast<size_t>(B) * T * C, 0.0),
                               std::vector<double>(static_cast<size_t>(B) * T * C3, 0.0)};
  std::vector<double> p(static_cast<size_t>(T) * T), ds(p.size());
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      auto at = [&](int t, int part, int i) { return static_cast<double>(qkv[(b * T + t) * C3 + part * C + h * HS + i]); };
      auto dout = [&](int t, int i) { return static_cast<double>(dy[(static_cast<size_t>(b) * T + t) * C + h * HS + i]); };
      for (int t = 0; t < T; t++) {
        double mx = -1e300, sum = 0, dot = 0;
        for (int t2 = 0; t2 <= t; t2++) {
          double s = 0;
          for (int i = 0; i < HS; i++) s += at(t, 0, i) * at(t2, 1, i);
          p[t * T + t2] = s * scale;
          mx = std::max(mx, s * scale);
        }
        for (int t2 = 0; t2 <= t; t2++) sum += std::exp(p[t * T + t2] - mx);
        for (int t2 = 0; t2 <= t; t2++) {
          p[t * T + t2] = std::exp(p[t * T + t2] - mx) / sum;
          double dp = 0;
          for (int i = 0; i < HS; i++) dp += dout(t, i) * at(t2, 2, i);
          ds[t * T + t2] = dp;
          dot += p[t * T + t2] * dp;
        }
        for (int t2 = 0; t2 <= t; t2++) ds[t * T + t2] = p[t * T + t2] * (ds[t * T + t2] - dot) * scale;
      }
      for (int t = 0; t < T; t++)
        for (int t2 = 0; t2 <= t; t2++)
          for (int i = 0; i < HS; i++) {
            const double pw = p[t * T + t2], dsw = std::fabs(ds[t * T + t2]);
            m.out[(static_cast<size_t>(b) * T + t) * C + h * HS + i] += pw * std::fabs(at(t2, 2, i));
            double* row_t = &m.dqkv[(static_cast<size_t>(b) * T + t) * C3 + h * HS];
            double* row_t2 = &m.dqkv[(static_cast<size_t>(b) * T + t2) * C3 + h * HS];
            row_t[i] += dsw * std::fabs(at(t2, 1, i));       // dq[t] += ds[t,t2] k[t2]
            row_t2[C + i] += dsw * std::fabs(at(t, 0, i));   // dk[t2] += ds[t,t2] q[t]
            row_t2[2 * C + i] += pw * std::fabs(dout(t, i));  // dv[t2] += p[t,t2] dy[t]
          }
    }
  return m;
}

// got (bf16) against ref (fp32, unrounded operands): within one bf16 ulp of either, `atol` for sums that
// cancel, and 2^-8 of the magnitudes of the rounded operands' terms (5% over, for the fp32 p and ds the
// kernel rounds instead of the exact ones).
::testing::AssertionResult within_operand_rounding(const Bf& got, const Vec& ref, const std::vector<double>& mag,
                                                   double atol) {
  size_t bad = 0, first = 0;
  double tol_first = 0;
  for (size_t i = 0; i < got.size(); i++) {
    const double g = bf16_to_f32(got[i]);
    const double tol = kUlp * std::max(std::fabs(g), std::fabs(static_cast<double>(ref[i]))) + atol + 0x1p-8 * 1.05 * mag[i];
    if (std::fabs(g - ref[i]) > tol && bad++ == 0) {
      first = i;
      tol_first = tol;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " beyond the operand rounding bound; first ["
                                       << first << "] " << bf16_to_f32(got[first]) << " vs " << ref[first]
                                       << " (tolerance " << tol_first << ")";
}

// ref_bf16 runs the fp32 attention on the widened inputs (one bf16 ulp of it); cpu_bf16 also rounds its GEMM
// operands p and ds (within_operand_rounding).
::testing::AssertionResult attention_close(const Bf& got, const Vec& ref, const std::vector<double>& mag, float atol) {
  if (g_backend == k::Backend::kRef) return allclose(widen(got), ref, atol, kUlp);
  return within_operand_rounding(got, ref, mag, atol);
}

struct AttnShape {
  int B, T, C, NH;
};

// One attention both ways: the table under test (forward, then the backward accumulating into an old
// gradient, its D scratch prefilled with 123) and the fp32 attention on the widened inputs, which keeps
// the [T, T] probabilities. Inputs from seeds seed, seed + 1, seed + 2.
struct AttentionBothWays {
  Bf out, dqkv;
  Vec lse, scratch;
  Vec fqkv, fdy, rout, fd;  // fp32: the widened inputs, out, the accumulated gradient
  AttentionOperandMagnitudes mag;
};
AttentionBothWays attention_both_ways(int B, int T, int C, int NH, uint32_t seed) {
  const size_t nqkv = static_cast<size_t>(B) * T * 3 * C, nout = static_cast<size_t>(B) * T * C;
  Bf qkv = rand_bf(nqkv, seed, 1.5f), dy = rand_bf(nout, seed + 1), d0 = rand_bf(nqkv, seed + 2);
  AttentionBothWays r{Bf(nout), d0, Vec(static_cast<size_t>(B) * NH * T), Vec(static_cast<size_t>(B) * NH * T, 123.0f),
                      widen(qkv), widen(dy), Vec(nout), widen(d0), {}};
  ops().attention_forward(r.out.data(), r.lse.data(), qkv.data(), B, T, C, NH);
  ops().attention_backward(r.dqkv.data(), r.scratch.data(), dy.data(), qkv.data(), r.out.data(), r.lse.data(), B, T, C,
                           NH);
  Vec att(static_cast<size_t>(B) * NH * T * T), tmp(att.size());
  fp32().attention_forward(r.rout.data(), att.data(), r.fqkv.data(), B, T, C, NH);
  fp32().attention_backward(r.fd.data(), tmp.data(), r.fdy.data(), r.fqkv.data(), nullptr, att.data(), B, T, C, NH);
  r.mag = attention_operand_magnitudes(r.fqkv, r.fdy, B, T, C, NH);
  return r;
}

}  // namespace

TEST_P(Bf16Table, AttentionForwardOutAndLogSumExp) {
  for (AttnShape s : {AttnShape{2, 5, 8, 2}, AttnShape{3, 17, 48, 3}}) {
    const auto [B, T, C, NH] = s;
    Bf qkv = rand_bf(static_cast<size_t>(B) * T * 3 * C, 1, 1.5f);
    Vec fqkv = widen(qkv), ref(static_cast<size_t>(B) * T * C), att(static_cast<size_t>(B) * NH * T * T);
    fp32().attention_forward(ref.data(), att.data(), fqkv.data(), B, T, C, NH);
    Bf out(static_cast<size_t>(B) * T * C);
    Vec lse(static_cast<size_t>(B) * NH * T);
    ops().attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
    if (g_backend == k::Backend::kRef) {
      EXPECT_TRUE(rounded_once(out, ref)) << "B=" << B << " T=" << T;
    } else {  // cpu_bf16's flash-style forward rounds p to bf16 for p v and sums in another order
      const AttentionOperandMagnitudes mag = attention_operand_magnitudes(fqkv, Vec(out.size(), 0.0f), B, T, C, NH);
      EXPECT_TRUE(within_operand_rounding(out, ref, mag.out, 1e-6)) << "B=" << B << " T=" << T;
    }
    std::vector<double> dqkv(fqkv.begin(), fqkv.end()), dout, dlse;
    attention_double(dout, dlse, dqkv, B, T, C, NH);
    Vec lse_exact(dlse.begin(), dlse.end());
    EXPECT_TRUE(allclose(lse, lse_exact, 1e-5f, 1e-5f)) << "lse vs a direct double sum, B=" << B << " T=" << T;
    // Row t = 0 sees one key: lse = its own scaled score.
    const int HS = C / NH;
    double dot = 0;
    for (int i = 0; i < HS; i++) dot += static_cast<double>(fqkv[i]) * fqkv[C + i];
    EXPECT_NEAR(lse[0], dot / std::sqrt(static_cast<double>(HS)), 1e-5);
  }
}

TEST_P(Bf16Table, AttentionBackwardFromLseMatchesRef) {
  const int B = 3, T = 17, C = 48, NH = 3;
  const AttentionBothWays a = attention_both_ways(B, T, C, NH, 1);
  EXPECT_TRUE(attention_close(a.dqkv, a.fd, a.mag.dqkv, 1e-4f)) << "dqkv (accumulated) vs ref with the stored att";

  // scratch = D = rowsum(dout * out) per head, with the forward's bf16 out.
  const int HS = C / NH;
  Vec fout = widen(a.out);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        double D = 0;
        for (int i = 0; i < HS; i++)
          D += static_cast<double>(a.fdy[(static_cast<size_t>(b) * T + t) * C + h * HS + i]) *
               fout[(static_cast<size_t>(b) * T + t) * C + h * HS + i];
        EXPECT_NEAR(a.scratch[(static_cast<size_t>(b) * NH + h) * T + t], D, 1e-5 * (1 + std::fabs(D)));
      }
}

// cpu_bf16's attention goes by blocks of 64 query rows: T = 150 is three blocks, the last partial, at GPT-2's
// head size 64. Forward and backward against the fp32 attention (which keeps [T, T] probabilities) and lse
// against double sums; the backward accumulates into old gradients and fills the D scratch.
TEST_P(Bf16Table, AttentionOverSeveralBlocksOfQueryRows) {
  const int B = 2, T = 150, C = 128, NH = 2, HS = C / NH;
  const AttentionBothWays a = attention_both_ways(B, T, C, NH, 61);
  EXPECT_TRUE(attention_close(a.out, a.rout, a.mag.out, 1e-6f)) << "out";
  EXPECT_TRUE(attention_close(a.dqkv, a.fd, a.mag.dqkv, 1e-4f)) << "dqkv (accumulated)";
  std::vector<double> dx(a.fqkv.begin(), a.fqkv.end()), dout, dlse;
  attention_double(dout, dlse, dx, B, T, C, NH);
  EXPECT_TRUE(allclose(a.lse, Vec(dlse.begin(), dlse.end()), 1e-5f, 1e-5f)) << "lse vs a direct double sum";
  Vec fout = widen(a.out);
  double worst = 0;
  for (size_t row = 0; row < a.lse.size(); row++) {
    const size_t b = row / (NH * T), h = row / T % NH, t = row % T;
    double D = 0;
    for (int i = 0; i < HS; i++) D += static_cast<double>(a.fdy[(b * T + t) * C + h * HS + i]) * fout[(b * T + t) * C + h * HS + i];
    worst = std::max(worst, std::fabs(a.scratch[row] - D) / (1 + std::fabs(D)));
  }
  EXPECT_LT(worst, 1e-5) << "scratch = D = rowsum(dout * out)";
}

TEST_P(Bf16Table, AttentionBackwardFiniteDifferences) {
  // L(qkv) = sum(dout * attention(qkv)) in double; dL/dqkv by central differences vs the bf16 backward
  // (which rounds its fp32 result once: bound one bf16 ulp relative plus 1e-4).
  const int B = 2, T = 5, C = 8, NH = 2;
  const size_t nqkv = static_cast<size_t>(B) * T * 3 * C, nout = static_cast<size_t>(B) * T * C;
  Bf qkv = rand_bf(nqkv, 7), dy = rand_bf(nout, 8);
  Vec fqkv = widen(qkv), fdy = widen(dy);
  Bf out(nout), dqkv(nqkv, 0);
  Vec lse(static_cast<size_t>(B) * NH * T), scratch(lse.size());
  ops().attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
  ops().attention_backward(dqkv.data(), scratch.data(), dy.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);

  auto loss = [&](const std::vector<double>& x) {
    std::vector<double> o, l;
    attention_double(o, l, x, B, T, C, NH);
    double s = 0;
    for (size_t i = 0; i < nout; i++) s += o[i] * fdy[i];
    return s;
  };
  std::vector<double> x(fqkv.begin(), fqkv.end());
  Vec fd(nqkv);
  const double h = 1e-4;
  for (size_t i = 0; i < nqkv; i++) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = loss(x);
    x[i] = keep - h;
    const double down = loss(x);
    x[i] = keep;
    fd[i] = static_cast<float>((up - down) / (2 * h));
  }
  EXPECT_TRUE(attention_close(dqkv, fd, attention_operand_magnitudes(fqkv, fdy, B, T, C, NH).dqkv, 1e-4f));
}

// ---- cpu_bf16's matmuls (bf16 GEMMs) and the GEMMs under them, on both GEMM backends ----------------------
// onednn runs oneDNN's bf16 matmul (AMX / AVX512-BF16) where the CPU has it; openblas runs cblas_sbgemm when
// the library exports it, else (Debian's 0.3.21) the widened fallback: both paths are checked here.

namespace {

class Gemm16 : public ::testing::TestWithParam<k::GemmBackend> {
 protected:
  void SetUp() override { k::set_gemm_backend(GetParam()); }
  void TearDown() override { k::set_gemm_backend(k::GemmBackend::kOneDnn); }
};
std::string gemm_label(const ::testing::TestParamInfo<k::GemmBackend>& info) {
  return std::string(k::gemm_backend_name(info.param));
}

}  // namespace

TEST_P(Gemm16, NativeWhereTheCpuHasBf16) {
  std::printf("bf16 GEMM with --gemm %s: %s\n", std::string(k::gemm_backend_name(GetParam())).c_str(),
              k::gemm_bf16_kernel().c_str());
  // This project's machines and CI have AVX512-BF16 (and AMX): there oneDNN must not fall back silently.
  if (GetParam() == k::GemmBackend::kOneDnn && __builtin_cpu_supports("avx512bf16")) {
    EXPECT_TRUE(k::gemm_bf16_native()) << k::gemm_bf16_kernel();
  }
  EXPECT_GT(k::measure_bf16_gemm_gflops(128, 2), 0.0);  // a rate (not a timed test)
}

TEST_P(Gemm16, GemmBf16MatchesDoubleSumsWithTransposesStridesAlphaAndBeta) {
  const int M = 19, N = 37, K = 45, lda = 50, ldb = 52, ldc = 41;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f, 2.0f}) {
        Bf A = rand_bf(50 * lda, 1), B = rand_bf(50 * ldb, 2);
        Vec Cm = randn(M * ldc, 3), C0 = Cm;
        const float alpha = 0.5f;
        k::gemm_bf16(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, Cm.data(), ldc);
        for (int i = 0; i < M; i++)
          for (int j = 0; j < N; j++) {
            double acc = 0, mag = 0;
            for (int p = 0; p < K; p++) {
              const double t = static_cast<double>(bf16_to_f32(ta ? A[p * lda + i] : A[i * lda + p])) *
                               bf16_to_f32(tb ? B[j * ldb + p] : B[p * ldb + j]);
              acc += t;
              mag += std::fabs(t);
            }
            const double ref = alpha * acc + beta * C0[i * ldc + j];
            const double bound = fp32_sum_bound(K, alpha * mag + std::fabs(beta * C0[i * ldc + j]));
            ASSERT_NEAR(Cm[i * ldc + j], ref, bound) << "ta=" << ta << " tb=" << tb << " beta=" << beta << " [" << i
                                                     << "," << j << "]";
          }
        for (int i = 0; i < M; i++)  // the padding of each row of C is not written
          for (int j = N; j < ldc; j++) ASSERT_EQ(Cm[i * ldc + j], C0[i * ldc + j]);
      }
}

TEST_P(Gemm16, RoundedGemmAddsBiasAndOldValueInFp32AndRoundsOnce) {
  const int M = 23, N = 33, K = 70, ldc = 40;
  for (bool ta : {false, true})
    for (bool with_bias : {false, true})
      for (bool accumulate : {false, true}) {
        Bf A = rand_bf(M * K, 1), B = rand_bf(N * K, 2), bias = rand_bf(N, 3), Cm = rand_bf(M * ldc, 4), C0 = Cm;
        // B as the weights [N,K] (trans_b), the layout of the matmul forward
        k::gemm_bf16_round(ta, true, M, N, K, A.data(), ta ? M : K, B.data(), K, with_bias ? bias.data() : nullptr,
                           accumulate, Cm.data(), ldc);
        size_t bad = 0;
        for (int i = 0; i < M; i++) {
          for (int j = 0; j < N; j++) {
            double acc = 0, mag = 0;
            for (int p = 0; p < K; p++) {
              const double t = static_cast<double>(bf16_to_f32(ta ? A[p * M + i] : A[i * K + p])) *
                               bf16_to_f32(B[j * K + p]);
              acc += t;
              mag += std::fabs(t);
            }
            const double b_j = with_bias ? bf16_to_f32(bias[j]) : 0.0;
            const double c_ij = accumulate ? bf16_to_f32(C0[i * ldc + j]) : 0.0;
            acc += b_j + c_ij;
            mag += std::fabs(b_j) + std::fabs(c_ij);
            const double got = bf16_to_f32(Cm[i * ldc + j]);
            if (std::fabs(got - acc) > kUlp * std::fabs(acc) + fp32_sum_bound(K, mag)) bad++;
          }
          for (int j = N; j < ldc; j++) bad += Cm[i * ldc + j] != C0[i * ldc + j];  // padding untouched
        }
        EXPECT_EQ(bad, 0u) << "ta=" << ta << " bias=" << with_bias << " accumulate=" << accumulate;
      }
}

// cpu_bf16's matmul against ref_bf16 (the oracle: widened, naive loops, rounded once), forward and backward,
// on shapes that are not multiples of 16 or 32, N = 1, null bias, and outputs accumulated into (beta = 1).
TEST_P(Gemm16, CpuMatmulMatchesRefBf16) {
  struct Shape {
    int64_t N;
    int C, OC;
  };
  const k::OpsBf16& cpu = k::cpu_bf16_ops();
  const k::OpsBf16& ref = k::ref_bf16_ops();
  for (Shape sh : {Shape{1, 64, 33}, Shape{1, 7, 1}, Shape{11, 24, 17}, Shape{37, 100, 129}, Shape{130, 96, 300},
                   Shape{64, 768, 48}}) {
    const auto [N, C, OC] = sh;
    Bf x = rand_bf(N * C, 1), w = rand_bf(OC * C, 2), b = rand_bf(OC, 3), dy = rand_bf(N * OC, 4),
       d0 = rand_bf(N * C, 5);
    const Vec dw0 = randn(OC * C, 6), db0 = randn(OC, 7), fb = widen(b);
    const MatmulMagnitudes mag(widen(x), widen(w), &fb, widen(dy), widen(d0), dw0, db0, N, C, OC);
    const std::string where = "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
    for (bool with_bias : {true, false}) {
      Bf out(N * OC), rout(N * OC);
      cpu.matmul_forward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, C, OC);
      ref.matmul_forward(rout.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, C, OC);
      EXPECT_TRUE(bf16_sum_close(out, widen(rout), mag.out, C)) << where << " bias " << with_bias;
    }
    Bf dinp = d0, rdinp = d0;
    Vec dw = dw0, db = db0, rdw = dw0, rdb = db0;
    cpu.matmul_backward(dinp.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC);
    ref.matmul_backward(rdinp.data(), rdw.data(), rdb.data(), dy.data(), x.data(), w.data(), N, C, OC);
    EXPECT_TRUE(bf16_sum_close(dinp, widen(rdinp), mag.dinp, OC)) << where << " dinp (added to)";
    EXPECT_TRUE(fp32_sum_close(dw, rdw, mag.dweight, N)) << where << " dweight (added to, fp32)";
    EXPECT_TRUE(fp32_sum_close(db, rdb, mag.dbias, N)) << where << " dbias (added to, fp32)";
    // The tensor-parallel linear asks for dinp and for dweight + dbias separately: the same bits.
    Bf dinp2 = d0;
    Vec dw2 = dw0, db2 = db0;
    cpu.matmul_backward(dinp2.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), N, C, OC);
    cpu.matmul_backward(nullptr, dw2.data(), db2.data(), dy.data(), x.data(), w.data(), N, C, OC);
    EXPECT_EQ(dinp2, dinp) << where;
    EXPECT_EQ(dw2, dw) << where;
    EXPECT_EQ(db2, db) << where;
    Vec dw3 = dw0;  // dweight alone
    cpu.matmul_backward(nullptr, dw3.data(), nullptr, dy.data(), x.data(), w.data(), N, C, OC);
    EXPECT_EQ(dw3, dw) << where;
    // Deterministic: the same call again gives the same bits.
    Bf dinp4 = d0;
    cpu.matmul_backward(dinp4.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), N, C, OC);
    EXPECT_EQ(dinp4, dinp) << where;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Gemm16, ::testing::Values(k::GemmBackend::kOneDnn, k::GemmBackend::kOpenBlas),
                         gemm_label);

INSTANTIATE_TEST_SUITE_P(Backends, Bf16Table, ::testing::Values(k::Backend::kRef, k::Backend::kCpu), backend_label);
