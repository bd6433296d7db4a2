// The GEMM layout tuner on the GPU: every variant (cuBLAS + the transpose kernel) gives the result of
// cuBLAS as issued, within the fp32 dot-product bound; tuning picks one, accumulates C once and then
// reuses it; the CUDA matmul ops give the same results tuned, forced or untuned. Without a CUDA
// device every test here is SKIPPED.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "axonn/kernels/cuda.hpp"
#include "axonn/kernels/gemm_tuner.hpp"
#include "axonn/kernels/ops.hpp"
#include "gemm_problem.hpp"
#include "gpu_test.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
using axonn::test::allclose;
using axonn::test::GemmProblem;
using axonn::test::randn;
using Vec = std::vector<float>;
using Dev = axonn::test::DeviceArray<float>;

namespace {

struct TuningReset {
  ~TuningReset() {
    k::set_gemm_tuning(false);
    k::gemm_tuner().force(std::nullopt);
    k::gemm_tuner().clear();
  }
};

}  // namespace

TEST(CudaGemmTuner, EveryVariantGivesCublasAsIssued) {
  AXONN_REQUIRE_GPU();
  struct Shape {
    int64_t M, N, K;
  };
  uint32_t seed = 1;
  // odd shapes; the last crosses the transpose kernel's 32 x 32 tiles several times in both directions
  for (Shape s : {Shape{37, 23, 19}, Shape{1, 29, 5}, Shape{64, 3, 130}, Shape{161, 97, 70}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.0f, 1.0f})
          for (float alpha : {1.0f, 0.5f}) {
            GemmProblem p(ta, tb, s.M, s.N, s.K, alpha, beta, seed++);
            Dev da(p.a), db(p.b), dissued(p.c);
            k::cuda_gemm_engine().sgemm(p.call(da.get(), db.get(), dissued.get()));
            const Vec issued = dissued.host();
            ASSERT_TRUE(p.check(issued)) << "cuBLAS as issued";
            for (k::GemmVariant v : k::kGemmVariants) {
              SCOPED_TRACE(k::gemm_variant_name(v) + " M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
                           " K=" + std::to_string(s.K) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                           " beta=" + std::to_string(beta) + " alpha=" + std::to_string(alpha));
              Dev dc(p.c);
              k::run_gemm_variant(k::cuda_gemm_engine(), p.call(da.get(), db.get(), dc.get()), v);
              EXPECT_TRUE(p.check(dc.host(), &issued, "cuBLAS as issued"));
            }
          }
}

TEST(CudaGemmTuner, TunesOnceAccumulatesOnceThenReuses) {
  AXONN_REQUIRE_GPU();
  k::GemmTuner tuner;
  tuner.set_options({.warmup = 2, .reps = 3, .min_gain = 0.03});
  GemmProblem p(true, false, 300, 200, 517, 1.0f, 1.0f, 5);  // the weight-gradient form (beta = 1)
  Dev da(p.a), db(p.b), dc(p.c);
  tuner.gemm(k::cuda_gemm_engine(), "bw_w", p.call(da.get(), db.get(), dc.get()));
  const Vec first = dc.host();
  EXPECT_TRUE(p.check(first)) << "C accumulated exactly once";
  const auto recs = tuner.records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].key.engine, "cuda");
  std::printf("%s\n", recs[0].str().c_str());
  for (const auto& c : recs[0].candidates)
    EXPECT_TRUE(c.seconds > 0 && std::isfinite(c.seconds)) << k::gemm_variant_name(c.variant);
  EXPECT_GE(recs[0].speedup(), 1.0);
  // the cached variant again on a fresh C: the same bits
  Dev dc2(p.c);
  tuner.gemm(k::cuda_gemm_engine(), "bw_w", p.call(da.get(), db.get(), dc2.get()));
  EXPECT_EQ(dc2.host(), first);
  EXPECT_EQ(tuner.records().size(), 1u);
}

TEST(CudaGemmTuner, CudaMatmulTunedOrForcedMatchesUntuned) {
  AXONN_REQUIRE_GPU();
  TuningReset reset;
  const int64_t Nr = 133;
  const int C = 72, OC = 200;
  const Vec inp = randn(static_cast<size_t>(Nr * C), 1), w = randn(static_cast<size_t>(OC * C), 2),
            bias = randn(static_cast<size_t>(OC), 3), dout = randn(static_cast<size_t>(Nr * OC), 4);
  const Vec dinp0 = randn(static_cast<size_t>(Nr * C), 5), dw0 = randn(static_cast<size_t>(OC * C), 6);
  Dev d_inp(inp), d_w(w), d_bias(bias), d_dout(dout);
  auto run = [&](Vec& out, Vec& dinp, Vec& dw) {
    Dev d_out(static_cast<size_t>(Nr * OC)), d_dinp(dinp0), d_dw(dw0);
    k::cuda::matmul_forward(d_out.get(), d_inp.get(), d_w.get(), d_bias.get(), Nr, C, OC);
    k::cuda::matmul_backward(d_dinp.get(), nullptr, nullptr, d_dout.get(), d_inp.get(), d_w.get(), Nr, C, OC);
    k::cuda::matmul_backward(nullptr, d_dw.get(), nullptr, d_dout.get(), d_inp.get(), d_w.get(), Nr, C, OC);
    out = d_out.host();
    dinp = d_dinp.host();
    dw = d_dw.host();
  };
  Vec out0, di0, dw0r;
  k::set_gemm_tuning(false);
  run(out0, di0, dw0r);
  // the untuned CUDA matmul against the CPU reference (the tuner's rewrite kept the cuBLAS calls)
  Vec ref_out(static_cast<size_t>(Nr * OC)), ref_di = dinp0, ref_dw = dw0;
  k::ref::matmul_forward(ref_out.data(), inp.data(), w.data(), bias.data(), Nr, C, OC);
  k::ref::matmul_backward(ref_di.data(), ref_dw.data(), nullptr, dout.data(), inp.data(), w.data(), Nr, C, OC);
  EXPECT_TRUE(allclose(out0, ref_out, 1e-4f, 1e-4f));
  EXPECT_TRUE(allclose(di0, ref_di, 1e-4f, 1e-4f));
  EXPECT_TRUE(allclose(dw0r, ref_dw, 1e-4f, 1e-4f));
  k::set_gemm_tuning(true);
  k::gemm_tuner().clear();
  std::vector<std::optional<k::GemmVariant>> modes{std::nullopt};
  for (k::GemmVariant v : k::kGemmVariants) modes.emplace_back(v);
  for (const auto& mode : modes) {
    SCOPED_TRACE(mode ? k::gemm_variant_name(*mode) : std::string("tuned"));
    k::gemm_tuner().force(mode);
    Vec out, di, dw;
    run(out, di, dw);
    EXPECT_TRUE(allclose(out, out0, 1e-5f, 1e-5f));
    EXPECT_TRUE(allclose(di, di0, 1e-5f, 1e-5f));
    EXPECT_TRUE(allclose(dw, dw0r, 1e-5f, 1e-5f));
  }
  k::gemm_tuner().force(std::nullopt);
  const auto recs = k::gemm_tuner().records();
  ASSERT_EQ(recs.size(), 3u);
  for (const auto& r : recs) std::printf("%s\n", r.str().c_str());
  EXPECT_EQ(recs[0].key.site, "fw");
  EXPECT_EQ(recs[1].key.site, "bw_act");
  EXPECT_EQ(recs[2].key.site, "bw_w");
  // off again: the cuBLAS calls as issued, bit for bit
  k::set_gemm_tuning(false);
  Vec out, di, dw;
  run(out, di, dw);
  EXPECT_EQ(out, out0);
  EXPECT_EQ(di, di0);
  EXPECT_EQ(dw, dw0r);
}
