// MFU's peak (train/peak.hpp): fixed at the start, a step faster than it said and not hidden; the
// measured peak is the best of its timings, agreed on by every rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/train/peak.hpp"

namespace at = axonn::train;

TEST(MfuPeak, BelowThePeakIsTheRatio) {
  at::MfuPeak p{100.0, "given, --peak-gflops"};
  // 2 ranks, 50 GFLOP in 1 s: 25 GFLOP/s per rank of 100
  EXPECT_DOUBLE_EQ(p.observe(50e9, 1.0, 2, 0), 0.25);
  EXPECT_DOUBLE_EQ(p.gflops_per_rank, 100.0);
  EXPECT_EQ(p.source, "given, --peak-gflops");
}

TEST(MfuPeak, AStepFasterThanThePeakIsSaidNotHidden) {
  at::MfuPeak p{10.0, "sgemm measured now"};
  EXPECT_DOUBLE_EQ(p.observe(30e9, 1.0, 1, 4), 3.0);  // 30 GFLOP/s on a peak of 10: 300 %
  EXPECT_TRUE(p.said_above);
  // the peak and its source stay what they were at the start
  EXPECT_DOUBLE_EQ(p.gflops_per_rank, 10.0);
  EXPECT_EQ(p.source, "sgemm measured now");
  EXPECT_DOUBLE_EQ(p.observe(5e9, 1.0, 1, 5), 0.5);
  EXPECT_DOUBLE_EQ(p.observe(60e9, 1.0, 1, 6), 6.0);
}

TEST(MfuPeak, MeasuredPeakIsTheBestTiming) {
  const axonn::kernels::GemmPeak g = axonn::kernels::measure_gemm_peak(false, {64, 128}, 2);
  EXPECT_GT(g.gflops, 0);
  EXPECT_TRUE(g.n == 64 || g.n == 128) << g.n;
  const axonn::kernels::GemmPeak one = axonn::kernels::measure_gemm_peak(false, {96}, 1);
  EXPECT_EQ(one.n, 96);
  auto world = axonn::comm::world();
  const double agreed = at::measure_cpu_peak_gflops(*world, false, {64}, 2);
  EXPECT_GT(agreed, 0);
}

TEST(MfuPeak, GivenPeakIsUsedAsIs) {
  auto world = axonn::comm::world();
  const at::MfuPeak p = at::resolve_mfu_peak(123.5, false, false, *world);
  EXPECT_DOUBLE_EQ(p.gflops_per_rank, 123.5);
  EXPECT_EQ(p.source, "given, --peak-gflops");
  EXPECT_THROW(at::resolve_mfu_peak(-1, false, false, *world), axonn::InvalidArgument);
}

// Without a local profile the run measures its own peak and says so.
TEST(MfuPeak, WithoutAProfileThePeakIsMeasured) {
  const auto dir = std::filesystem::temp_directory_path() / ("axonn_peak_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ::setenv("XDG_CONFIG_HOME", dir.c_str(), 1);
  ::unsetenv("AXONN_PROFILE_PATH");
  auto world = axonn::comm::world();
  const at::MfuPeak p = at::resolve_mfu_peak(0, false, false, *world);
  std::filesystem::remove_all(dir);
  EXPECT_GT(p.gflops_per_rank, 0);
  EXPECT_NE(p.source.find("sgemm measured now"), std::string::npos) << p.source;
  EXPECT_NE(p.source.find("no local profile"), std::string::npos) << p.source;
}
