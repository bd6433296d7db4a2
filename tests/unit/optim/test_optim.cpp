#include <gtest/gtest.h>

#include <cmath>

#include "axonn/core/error.hpp"
#include "axonn/optim/adamw.hpp"

using namespace axonn;
using optim::LrSchedule;

TEST(LrSchedule, WarmupConstantAndCosine) {
  EXPECT_FLOAT_EQ(optim::learning_rate(LrSchedule::kConstant, 1.0f, 0, 4, 100, 0), 0.25f);
  EXPECT_FLOAT_EQ(optim::learning_rate(LrSchedule::kConstant, 1.0f, 3, 4, 100, 0), 1.0f);
  EXPECT_FLOAT_EQ(optim::learning_rate(LrSchedule::kConstant, 1.0f, 50, 4, 100, 0), 1.0f);
  EXPECT_FLOAT_EQ(optim::learning_rate(LrSchedule::kCosine, 1.0f, 4, 4, 104, 0.1f), 1.0f);
  EXPECT_NEAR(optim::learning_rate(LrSchedule::kCosine, 1.0f, 54, 4, 104, 0.1f), 0.55f, 1e-6f);  // halfway
  EXPECT_NEAR(optim::learning_rate(LrSchedule::kCosine, 1.0f, 103, 4, 104, 0.1f), 0.1f, 1e-3f);
  EXPECT_THROW(optim::parse_lr_schedule("step"), InvalidArgument);
}

TEST(LrSchedule, LinearAndWarmupStableDecay) {
  const auto linear = optim::parse_lr_schedule("linear"), wsd = optim::parse_lr_schedule("wsd");
  EXPECT_FLOAT_EQ(optim::learning_rate(linear, 1.0f, 0, 4, 104, 0.1f), 0.25f);  // the same warmup
  EXPECT_FLOAT_EQ(optim::learning_rate(linear, 1.0f, 4, 4, 104, 0.1f), 1.0f);
  EXPECT_NEAR(optim::learning_rate(linear, 1.0f, 54, 4, 104, 0.1f), 0.55f, 1e-6f);  // halfway, a straight line
  EXPECT_NEAR(optim::learning_rate(linear, 1.0f, 29, 4, 104, 0.1f), 0.775f, 1e-6f);
  EXPECT_NEAR(optim::learning_rate(linear, 1.0f, 104, 4, 104, 0.1f), 0.1f, 1e-6f);
  // wsd over 100 steps: stable to step 80, then linear to the floor at 100
  EXPECT_FLOAT_EQ(optim::learning_rate(wsd, 1.0f, 1, 4, 100, 0.0f), 0.5f);
  EXPECT_FLOAT_EQ(optim::learning_rate(wsd, 1.0f, 50, 4, 100, 0.0f), 1.0f);
  EXPECT_FLOAT_EQ(optim::learning_rate(wsd, 1.0f, 79, 4, 100, 0.0f), 1.0f);
  EXPECT_NEAR(optim::learning_rate(wsd, 1.0f, 90, 4, 100, 0.0f), 0.5f, 1e-6f);
  EXPECT_NEAR(optim::learning_rate(wsd, 1.0f, 100, 4, 100, 0.0f), 0.0f, 1e-6f);
}

TEST(GradClip, ScaleOnlyAboveTheLimit) {
  EXPECT_FLOAT_EQ(optim::clip_scale(2.0, 1.0f), 0.5f);
  EXPECT_FLOAT_EQ(optim::clip_scale(0.5, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(optim::clip_scale(50.0, 0.0f), 1.0f);  // off
}

TEST(AdamW, DecaysOnlyMaskedTensorsAndNormIsGlobal) {
  Arena p("p");
  p.reserve("w", {2, 3});
  p.reserve("b", {3});
  p.allocate();
  Arena g = p.clone_layout("g");
  g.allocate();
  for (int i = 0; i < 6; i++) p.tensor(0).f32()[i] = 1.0f;
  for (int i = 0; i < 3; i++) p.tensor(1).f32()[i] = 1.0f;
  g.tensor(1).f32()[0] = 3.0f;
  g.tensor(0).f32()[5] = 4.0f;
  const auto& ops = kernels::ops_for(kernels::Backend::kCpu);
  EXPECT_DOUBLE_EQ(optim::grad_norm(g, ops), 5.0);
  optim::AdamW opt(p, {0.9f, 0.999f, 1e-8f, 0.5f}, {true, false}, ops);
  opt.step(p, g, 0.1f);
  EXPECT_EQ(opt.steps(), 1);
  EXPECT_NEAR(p.tensor(0).f32()[0], 1.0f - 0.1f * 0.5f, 1e-6f);  // zero grad: decay only
  EXPECT_FLOAT_EQ(p.tensor(1).f32()[1], 1.0f);                   // not decayed, zero grad
  EXPECT_NEAR(p.tensor(1).f32()[0], 1.0f - 0.1f, 1e-6f);         // first step moves by lr
  EXPECT_THROW(optim::AdamW(p, {1.5f, 0.999f, 1e-8f, 0}, {}, ops), InvalidArgument);
}
