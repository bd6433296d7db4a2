// The guard's outlier detector against its definition (llm.c's -sl/-sg), its record and its parse,
// and a run that skips outliers resumed bit for bit (the windows are restored from the checkpoint).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/train/guard.hpp"
#include "axonn/train/trainer.hpp"
#include "common/reference_run.hpp"

using namespace axonn;

TEST(OutlierDetector, ZScoreOfTheWindowBefore) {
  train::OutlierDetector d(4);
  for (double x : {1.0, 2.0, 3.0}) {
    EXPECT_TRUE(std::isnan(d.z(x))) << "not full yet";
    d.add(x);
  }
  d.add(4.0);  // window 1,2,3,4: mean 2.5, population std sqrt(1.25)
  EXPECT_NEAR(d.z(5.0), (5.0 - 2.5) / std::sqrt(1.25), 1e-12);
  d.add(9.0);  // 2,3,4,9: the oldest dropped
  EXPECT_NEAR(d.z(4.5), 0.0, 1e-12);
  train::OutlierDetector e(4);
  e.from_text(d.to_text());
  EXPECT_EQ(e.z(7.25), d.z(7.25));
  EXPECT_THROW(e.from_text("1,2,x"), std::invalid_argument);
  EXPECT_THROW(e.from_text("1,2,3,4,5"), std::invalid_argument);  // more than the window
  EXPECT_THROW(e.from_text("1,nan"), std::invalid_argument);
}

TEST(StepGuard, Verdicts) {
  train::StepGuard g(3.0f, 0.0f);
  EXPECT_EQ(g.judge(std::numeric_limits<float>::quiet_NaN(), 1.0), train::Verdict::kNonFinite);
  EXPECT_EQ(g.judge(1.0f, std::numeric_limits<double>::infinity()), train::Verdict::kNonFinite);
  for (int i = 0; i < train::OutlierDetector::kOutlierWindow; i++)
    EXPECT_EQ(g.judge(1.0f + 0.01f * static_cast<float>(i % 2), 1.0), train::Verdict::kUpdate);
  EXPECT_EQ(g.judge(5.0f, 1.0), train::Verdict::kLossOutlier);
  EXPECT_EQ(g.judge(1.0f, 1e6), train::Verdict::kUpdate) << "--skip-grad-z is off";
}

TEST(StepGuard, OutlierSkippingResumesBitForBit) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("axonn-guard-" + std::to_string(::getpid()));
  train::TrainConfig c = test::reference_config();
  c.steps = 200;
  c.batch_size = 2;
  c.seq_len = 8;
  c.lr = 1e-2f;
  c.skip_grad_z = 0.5f;  // low: some of the steps after the window fills are skipped
  const std::vector<train::StepMetrics> whole = train::train(c, comm::world());
  ASSERT_EQ(whole.size(), 200u);
  EXPECT_GT(whole.back().skipped_steps, 0) << "no outlier skipped: the test shows nothing";
  c.checkpoint_dir = dir.string();
  c.checkpoint_every = 160;
  c.exit_after_steps = 160;
  (void)train::train(c, comm::world());
  c.exit_after_steps = 0;
  c.resume = true;
  const std::vector<train::StepMetrics> rest = train::train(c, comm::world());
  EXPECT_GT(whole.back().skipped_steps, whole[159].skipped_steps) << "no outlier skipped after the resume point";
  ASSERT_EQ(rest.size(), 40u);
  for (size_t i = 0; i < rest.size(); i++) {
    EXPECT_EQ(rest[i].loss, whole[i + 160].loss) << "step " << i + 161;
    EXPECT_EQ(rest[i].verdict, whole[i + 160].verdict) << "step " << i + 161;
    EXPECT_EQ(rest[i].skipped_steps, whole[i + 160].skipped_steps) << "step " << i + 161;
  }
  fs::remove_all(dir);
}
