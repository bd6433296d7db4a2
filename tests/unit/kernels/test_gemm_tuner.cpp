// The GEMM layout tuner on the CPU (spec axonn.md §6): every variant computes the as-issued GEMM
// (to fp32 rounding: the dot-product error bound below), the cache keeps one choice per key and
// site, a forced variant is the one that runs, and the CPU matmul gives the same results tuned.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/gemm_tuner.hpp"
#include "axonn/kernels/ops.hpp"
#include "gemm_problem.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
using axonn::test::allclose;
using axonn::test::GemmProblem;
using axonn::test::randn;
using Vec = std::vector<float>;

namespace {

// The CPU engine with every call counted and the BLAS flags of its GEMMs recorded: the variants'
// steps are visible, while the arithmetic is the real engine's.
class CountingEngine final : public k::GemmEngine {
 public:
  explicit CountingEngine(std::string name = "counting") : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void sgemm(const k::GemmCall& c) override {
    gemms++;
    layouts.push_back(std::string(c.trans_a ? "T" : "N") + (c.trans_b ? "T" : "N"));
    inner_.sgemm(c);
  }
  void transpose(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols, int64_t ld_src,
                 bool accumulate, float beta) override {
    (accumulate ? transposes_acc : transposes)++;
    inner_.transpose(dst, ld_dst, src, rows, cols, ld_src, accumulate, beta);
  }
  void copy(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols, int64_t ld_src) override {
    copies++;
    inner_.copy(dst, ld_dst, src, rows, cols, ld_src);
  }
  float* workspace(int slot, size_t count) override { return inner_.workspace(slot, count); }
  void release_workspace() override { inner_.release_workspace(); }
  double time(const std::function<void()>& fn) override {
    timed++;
    return inner_.time(fn);
  }
  void reset() {
    gemms = transposes = transposes_acc = copies = timed = 0;
    layouts.clear();
  }
  int gemms = 0, transposes = 0, transposes_acc = 0, copies = 0, timed = 0;
  std::vector<std::string> layouts;

 private:
  std::string name_;
  k::GemmEngine& inner_ = k::cpu_gemm_engine();
};

class TunerBackends : public ::testing::TestWithParam<k::GemmBackend> {
 protected:
  void SetUp() override { k::set_gemm_backend(GetParam()); }
  void TearDown() override {
    k::set_gemm_backend(k::GemmBackend::kOneDnn);
    k::set_gemm_tuning(false);
    k::gemm_tuner().force(std::nullopt);
    k::gemm_tuner().clear();
  }
};

}  // namespace

TEST_P(TunerBackends, EveryVariantComputesTheAsIssuedGemm) {
  // odd shapes, every layout, beta 0 (C not read) and 1 (accumulation, as the weight gradients), alpha != 1
  struct Shape {
    int64_t M, N, K;
  };
  uint32_t seed = 1;
  for (Shape s : {Shape{37, 23, 19}, Shape{1, 29, 5}, Shape{64, 3, 130}, Shape{33, 65, 1}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.0f, 1.0f, 0.75f})
          for (float alpha : {1.0f, 0.5f}) {
            GemmProblem p(ta, tb, s.M, s.N, s.K, alpha, beta, seed++);
            Vec issued = p.c;
            k::cpu_gemm_engine().sgemm(p.call(issued.data()));
            ASSERT_TRUE(p.check(issued)) << "as-issued sgemm";
            for (k::GemmVariant v : k::kGemmVariants) {
              SCOPED_TRACE(k::gemm_variant_name(v) + " M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
                           " K=" + std::to_string(s.K) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                           " beta=" + std::to_string(beta) + " alpha=" + std::to_string(alpha));
              Vec out = p.c;
              k::run_gemm_variant(k::cpu_gemm_engine(), p.call(out.data()), v);
              EXPECT_TRUE(p.check(out, &issued));  // the exact product, and the as-issued result
            }
          }
}

TEST_P(TunerBackends, ForcedVariantIsTheOneThatRuns) {
  GemmProblem p(false, true, 21, 17, 13, 1.0f, 1.0f, 7);
  for (k::GemmVariant v : k::kGemmVariants) {
    SCOPED_TRACE(k::gemm_variant_name(v));
    k::GemmTuner tuner;
    tuner.force(v);
    CountingEngine e;
    Vec out = p.c;
    tuner.gemm(e, "fw", p.call(out.data()));
    EXPECT_TRUE(p.check(out));
    EXPECT_EQ(e.timed, 0) << "a forced variant is not timed";
    EXPECT_TRUE(tuner.records().empty()) << "nor cached";
    EXPECT_EQ(e.gemms, 1);
    ASSERT_EQ(e.layouts.size(), 1u);
    EXPECT_EQ(e.layouts[0], k::gemm_variant_layout(p.call(out.data()), v));
    EXPECT_EQ(e.transposes, v.copy == k::GemmCopy::kNone ? 0 : 1) << "one transposed copy of A or B";
    EXPECT_EQ(e.transposes_acc, v.orientation == k::GemmOrientation::kSwapped ? 1 : 0)
        << "the swapped result is transposed into C";
  }
}

TEST(GemmTuner, LayoutsOfTheVariants) {
  // forward "fw": out = inp @ W^T is NT as issued
  k::GemmCall fw{false, true, 8, 6, 4, 1.0f, nullptr, 4, nullptr, 4, 0.0f, nullptr, 6};
  EXPECT_EQ(k::gemm_variant_layout(fw, k::kGemmVariants[0]), "NT");  // as-issued
  EXPECT_EQ(k::gemm_variant_layout(fw, k::kGemmVariants[1]), "TT");  // copy of A: A read transposed
  EXPECT_EQ(k::gemm_variant_layout(fw, k::kGemmVariants[2]), "NN");  // copy of B: W^T materialised
  EXPECT_EQ(k::gemm_variant_layout(fw, k::kGemmVariants[3]), "NT");  // swapped: W (N) then inp^T (T)
  EXPECT_EQ(k::gemm_variant_layout(fw, k::kGemmVariants[4]), "NN");
  EXPECT_EQ(k::gemm_variant_layout(fw, k::kGemmVariants[5]), "TT");
  for (k::GemmVariant v : k::kGemmVariants) EXPECT_EQ(k::parse_gemm_variant(k::gemm_variant_name(v)), v);
  EXPECT_THROW(k::parse_gemm_variant("sideways"), axonn::InvalidArgument);
  EXPECT_TRUE(k::parse_gemm_tuning("on"));
  EXPECT_FALSE(k::parse_gemm_tuning("off"));
  EXPECT_THROW(k::parse_gemm_tuning("yes"), axonn::InvalidArgument);
  k::GemmTuner t;
  EXPECT_THROW(t.set_options({.warmup = 0, .reps = 0, .min_gain = 0.0}), axonn::InvalidArgument);
}

TEST_P(TunerBackends, TunesOnceThenRunsTheCachedChoice) {
  k::GemmTuner tuner;
  tuner.set_options({.warmup = 1, .reps = 2, .min_gain = 0.03});
  CountingEngine e;
  GemmProblem p(true, false, 40, 24, 56, 1.0f, 1.0f, 11);  // the weight-gradient form: beta = 1
  Vec out = p.c;
  tuner.gemm(e, "bw_w", p.call(out.data()));
  // C accumulated exactly once, although all six variants ran three times each on scratch output
  EXPECT_TRUE(p.check(out));
  EXPECT_EQ(e.timed, 12);
  EXPECT_EQ(e.copies, 1) << "C copied once to the timing scratch";
  ASSERT_EQ(tuner.records().size(), 1u);
  const k::GemmTuneRecord rec = tuner.records()[0];
  EXPECT_EQ(rec.key.site, "bw_w");
  EXPECT_EQ(rec.key.engine, "counting");
  EXPECT_EQ(rec.key.m, 40);
  EXPECT_EQ(rec.key.n, 24);
  EXPECT_EQ(rec.key.k, 56);
  ASSERT_EQ(rec.candidates.size(), k::kGemmVariants.size());
  double as_issued = 0, chosen = 0, fastest = 1e30;
  for (const auto& c : rec.candidates) {
    EXPECT_TRUE(c.seconds > 0 && std::isfinite(c.seconds)) << k::gemm_variant_name(c.variant);
    if (c.variant == k::kAsIssued) as_issued = c.seconds;
    if (c.variant == rec.chosen) chosen = c.seconds;
    fastest = std::min(fastest, c.seconds);
  }
  // the fastest, unless within min_gain of as-issued
  if (rec.chosen == k::kAsIssued) {
    EXPECT_GE(fastest, as_issued * 0.97);
  } else {
    EXPECT_EQ(chosen, fastest);
  }
  EXPECT_GE(rec.speedup(), 1.0);
  EXPECT_NE(rec.str().find("bw_w M=40 N=24 K=56 TN"), std::string::npos) << rec.str();

  // the same key: no timing, the cached variant's steps only
  e.reset();
  Vec out2 = p.c;
  tuner.gemm(e, "bw_w", p.call(out2.data()));
  EXPECT_EQ(e.timed, 0);
  EXPECT_EQ(e.gemms, 1);
  ASSERT_EQ(e.layouts.size(), 1u);
  EXPECT_EQ(e.layouts[0], k::gemm_variant_layout(p.call(out2.data()), rec.chosen));
  EXPECT_EQ(out2, out) << "same key, same variant, same bits";
  EXPECT_EQ(tuner.records().size(), 1u);
  k::GemmTuneKey key = rec.key;
  ASSERT_TRUE(tuner.cached(key).has_value());
  EXPECT_EQ(*tuner.cached(key), rec.chosen);

  // another site, or another engine, with the same shape: a key of its own
  tuner.gemm(e, "fw", p.call(out2.data()));
  CountingEngine other("other");
  tuner.gemm(other, "bw_w", p.call(out2.data()));
  EXPECT_EQ(tuner.records().size(), 3u);
  key.site = "fw";
  EXPECT_TRUE(tuner.cached(key).has_value());
  key.site = "bw_act";
  EXPECT_FALSE(tuner.cached(key).has_value());
  tuner.clear();
  EXPECT_TRUE(tuner.records().empty());
}

TEST_P(TunerBackends, BetaZeroTuningOverwritesC) {
  k::GemmTuner tuner;
  tuner.set_options({.warmup = 0, .reps = 1, .min_gain = 0.0});
  CountingEngine e;
  GemmProblem p(false, true, 19, 45, 31, 1.0f, 0.0f, 21);  // the LM head's form: no bias, C full of NaN
  Vec out = p.c;
  tuner.gemm(e, "fw", p.call(out.data()));
  EXPECT_TRUE(p.check(out));
  EXPECT_EQ(e.copies, 0) << "beta = 0: timed straight into C, which the chosen variant then overwrites";
}

TEST_P(TunerBackends, CpuMatmulTunedOrForcedMatchesUntuned) {
  // the three CPU call sites through kernels::cpu_ops(), with tuning off, on, and each variant forced
  const int64_t Nr = 45;
  const int C = 24, OC = 40;
  const Vec inp = randn(static_cast<size_t>(Nr * C), 1), w = randn(static_cast<size_t>(OC * C), 2),
            bias = randn(static_cast<size_t>(OC), 3), dout = randn(static_cast<size_t>(Nr * OC), 4);
  const Vec dinp0 = randn(static_cast<size_t>(Nr * C), 5), dw0 = randn(static_cast<size_t>(OC * C), 6);
  const k::Ops& ops = k::ops_for(k::Backend::kCpu);
  auto run = [&](Vec& out, Vec& dinp, Vec& dw) {
    out.assign(static_cast<size_t>(Nr * OC), 0.0f);
    dinp = dinp0;
    dw = dw0;
    ops.matmul_forward(out.data(), inp.data(), w.data(), bias.data(), Nr, C, OC);
    ops.matmul_backward(dinp.data(), nullptr, nullptr, dout.data(), inp.data(), w.data(), Nr, C, OC);
    ops.matmul_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), Nr, C, OC);
  };
  Vec out0, di0, dwr0;
  k::set_gemm_tuning(false);
  run(out0, di0, dwr0);
  k::set_gemm_tuning(true);
  k::gemm_tuner().clear();
  k::gemm_tuner().set_options({.warmup = 0, .reps = 1, .min_gain = 0.0});
  std::vector<std::optional<k::GemmVariant>> modes{std::nullopt};
  for (k::GemmVariant v : k::kGemmVariants) modes.emplace_back(v);
  for (const auto& mode : modes) {
    SCOPED_TRACE(mode ? k::gemm_variant_name(*mode) : std::string("tuned"));
    k::gemm_tuner().force(mode);
    Vec out, di, dw;
    run(out, di, dw);
    EXPECT_TRUE(allclose(out.data(), out0.data(), out.size(), 1e-5f, 1e-5f));
    EXPECT_TRUE(allclose(di.data(), di0.data(), di.size(), 1e-5f, 1e-5f));
    EXPECT_TRUE(allclose(dw.data(), dwr0.data(), dw.size(), 1e-5f, 1e-5f));
  }
  // tuning ran once per site, and the report names them
  k::gemm_tuner().force(std::nullopt);
  const auto recs = k::gemm_tuner().records();
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].key.site, "fw");
  EXPECT_EQ(recs[1].key.site, "bw_act");
  EXPECT_EQ(recs[2].key.site, "bw_w");
  EXPECT_EQ(recs[0].key.engine, "cpu/" + std::string(k::gemm_backend_name(GetParam())));
  EXPECT_EQ(k::gemm_tuner().report_lines().size(), 3u);
  // tuning off again: kernels::sgemm as issued, bit for bit the untuned results
  k::set_gemm_tuning(false);
  Vec out, di, dw;
  run(out, di, dw);
  EXPECT_EQ(out, out0);
  EXPECT_EQ(di, di0);
  EXPECT_EQ(dw, dwr0);
}

INSTANTIATE_TEST_SUITE_P(Cpu, TunerBackends, ::testing::Values(k::GemmBackend::kOneDnn, k::GemmBackend::kOpenBlas),
                         [](const auto& info) { return std::string(k::gemm_backend_name(info.param)); });
