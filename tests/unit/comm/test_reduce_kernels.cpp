// The bf16 reduction loops behind the MPI backend's user-defined ops, and kAvg's division.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "axonn/core/error.hpp"
#include "comm/reduce_kernels.hpp"

namespace axonn::comm::detail {
namespace {

uint16_t bf(float f) { return f32_to_bf16(f); }
float fl(uint16_t b) { return bf16_to_f32(b); }

TEST(Bf16Sum, AddsInFp32AndRoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to the even one (1).
  // 1 + 3*2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: ties go to 1 + 2^-6.
  const std::vector<uint16_t> in = {bf(1.0f), bf(1.0f), bf(3.0f), bf(-2.5f), bf(1e30f)};
  std::vector<uint16_t> io = {bf(0.00390625f), bf(0.01171875f), bf(4.0f), bf(2.5f), bf(1e30f)};
  bf16_sum(in.data(), io.data(), in.size());
  EXPECT_EQ(fl(io[0]), 1.0f);
  EXPECT_EQ(fl(io[1]), 1.015625f);
  EXPECT_EQ(fl(io[2]), 7.0f);
  EXPECT_EQ(fl(io[3]), 0.0f);
  EXPECT_EQ(fl(io[4]), fl(bf(2e30f)));
}

TEST(Bf16Sum, SmallIntegersAreExact) {
  // Every integer up to 256 is a bf16: the closed-form sums in the MPI tests are exact.
  std::vector<uint16_t> acc(1, bf(0.0f));
  for (int k = 1; k <= 20; ++k) {
    const uint16_t v = bf(static_cast<float>(k));
    bf16_sum(&v, acc.data(), 1);
  }
  EXPECT_EQ(fl(acc[0]), 210.0f);
}

TEST(Bf16Max, KeepsTheLargerAndPropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<uint16_t> in = {bf(1.0f), bf(-3.0f), bf(nan), bf(2.0f)};
  std::vector<uint16_t> io = {bf(2.0f), bf(-4.0f), bf(1.0f), bf(nan)};
  bf16_max(in.data(), io.data(), in.size());
  EXPECT_EQ(fl(io[0]), 2.0f);
  EXPECT_EQ(fl(io[1]), -3.0f);
  EXPECT_TRUE(std::isnan(fl(io[2])));
  EXPECT_TRUE(std::isnan(fl(io[3])));
}

TEST(DivideInPlace, Fp32AndBf16) {
  std::vector<float> f = {3.0f, 1.0f, -9.0f};
  divide_in_place(f.data(), f.size(), DType::kF32, 3);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], 1.0f / 3.0f);
  EXPECT_EQ(f[2], -3.0f);
  std::vector<uint16_t> b = {bf(36.0f), bf(10.0f)};
  divide_in_place(b.data(), b.size(), DType::kBF16, 8);
  EXPECT_EQ(fl(b[0]), 4.5f);
  EXPECT_EQ(fl(b[1]), 1.25f);
}

TEST(DivideInPlace, RefusesIntegers) {
  int32_t v = 4;
  EXPECT_THROW(divide_in_place(&v, 1, DType::kI32, 2), ::axonn::Error);
}

}  // namespace
}  // namespace axonn::comm::detail
