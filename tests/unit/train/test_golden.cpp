// End-to-end: `axonn train`'s loop reproduces llm.c's own loss trajectory on the shared reference,
// within test::kLlmcLossBound at every step, and an independent PyTorch GPT-2's on odd shapes
// (tests/golden) within test::kPyTorchLossBound.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/train/trainer.hpp"
#include "common/reference_run.hpp"

using namespace axonn;

namespace {

// Trains and returns the largest per-step difference to the expected losses (each within `bound`).
double max_loss_diff(const train::TrainConfig& c, const std::vector<double>& expected, double bound) {
  auto history = train::train(c, comm::world());
  EXPECT_EQ(history.size(), expected.size());
  double worst = 0;
  for (size_t i = 0; i < history.size() && i < expected.size(); i++) {
    EXPECT_EQ(history[i].step, (int)i);
    EXPECT_NEAR(history[i].loss, expected[i], bound) << "step " << i;
    worst = std::max(worst, std::fabs(history[i].loss - expected[i]));
  }
  return worst;
}

train::TrainConfig reference_config(const std::string& kernels) {
  train::TrainConfig c = test::reference_config();
  c.kernels = kernels;
  return c;
}

}  // namespace

class ReferenceTrajectory : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTrajectory, ReproducesLlmcLosses) {
  auto expected = test::read_losses(AXONN_REFERENCE_DIR "/gpt2-tiny/losses.txt");
  ASSERT_EQ(expected.size(), 30u);
  double worst = max_loss_diff(reference_config(GetParam()), expected, test::kLlmcLossBound);
  RecordProperty("max_abs_diff", std::to_string(worst));
  std::printf("max |loss - llm.c| over 30 steps (%s kernels): %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReferenceTrajectory, ::testing::Values("cpu", "ref"));

// bf16 mixed precision stays within the stated bound of llm.c's fp32 trajectory, and it is not the fp32
// run: bf16 rounding must show in the losses.
TEST_P(ReferenceTrajectory, Bf16StaysCloseToLlmcLosses) {
  auto expected = test::read_losses(AXONN_REFERENCE_DIR "/gpt2-tiny/losses.txt");
  train::TrainConfig c = reference_config(GetParam());
  c.dtype = "bf16";
  double worst = max_loss_diff(c, expected, test::kBf16LossBound);
  EXPECT_GT(worst, 1e-3) << "bf16 gave fp32's losses: is the bf16 path running?";
  RecordProperty("max_abs_diff", std::to_string(worst));
  std::printf("bf16: max |loss - llm.c fp32| over 30 steps (%s kernels): %.3g (bound %.3g)\n", GetParam().c_str(),
              worst, test::kBf16LossBound);
}

TEST(GoldenTrajectory, OddShapesMatchPyTorch) {
  // L=2 NH=3 C=48 V=397 (padded 512) maxT=32; B=3 T=13
  train::TrainConfig c;
  c.init = AXONN_GOLDEN_DIR "/odd-shapes/model.bin";
  c.data = AXONN_GOLDEN_DIR "/odd-shapes/tokens.bin";
  c.batch_size = 3;
  c.seq_len = 13;
  c.steps = 20;
  c.lr = 3e-3f;
  c.lr_schedule = "constant";
  c.grad_clip = 0;
  c.peak_gflops = 100;
  c.quiet = true;
  double worst = max_loss_diff(c, test::read_losses(AXONN_GOLDEN_DIR "/odd-shapes/losses.txt"), test::kPyTorchLossBound);
  std::printf("odd shapes: max |loss - pytorch| = %.3g\n", worst);
}

TEST(GoldenTrajectory, WeightDecayClippingCosineWarmupMatchPyTorch) {
  // L=3 NH=5 C=40 V=203 (padded 256) maxT=24; B=5 T=11; decay on matrices only
  train::TrainConfig c;
  c.init = AXONN_GOLDEN_DIR "/decay-clip-cosine/model.bin";
  c.data = AXONN_GOLDEN_DIR "/decay-clip-cosine/tokens.bin";
  c.batch_size = 5;
  c.seq_len = 11;
  c.steps = 15;
  c.lr = 2e-3f;
  c.lr_schedule = "cosine";
  c.warmup_steps = 3;
  c.weight_decay = 0.1f;
  c.grad_clip = 0.5f;
  c.peak_gflops = 100;
  c.quiet = true;
  double worst = max_loss_diff(c, test::read_losses(AXONN_GOLDEN_DIR "/decay-clip-cosine/losses.txt"),
                              test::kPyTorchLossBound);
  std::printf("decay+clip+cosine: max |loss - pytorch| = %.3g\n", worst);
}

TEST(Train, BuiltInDefaultLearns) {
  train::TrainConfig c;  // gpt2-tiny shape, synthetic corpus
  c.steps = 100;
  c.batch_size = 8;
  c.lr = 1e-2f;
  c.warmup_steps = 10;
  c.peak_gflops = 100;
  c.quiet = true;
  auto h = train::train(c, comm::world());
  ASSERT_EQ(h.size(), 100u);
  EXPECT_GT(h.front().loss, 6.0f);  // ln(500) = 6.2 at init
  EXPECT_LT(h.back().loss, 3.5f) << "the loss did not fall";
  EXPECT_GT(h.front().tokens_per_s, 0);
  EXPECT_GT(h.front().mfu, 0);
}

TEST(Train, RejectsBadConfiguration) {
  auto bad = [](auto mutate) {
    train::TrainConfig c;
    c.peak_gflops = 100;
    c.quiet = true;
    c.steps = 1;
    mutate(c);
    EXPECT_THROW(train::train(c, comm::world()), InvalidArgument);
  };
  bad([](auto& c) { c.batch_size = 0; });
  bad([](auto& c) { c.seq_len = -3; });
  bad([](auto& c) { c.steps = 0; });
  bad([](auto& c) { c.seq_len = 65; });  // gpt2-tiny has maxT 64
  bad([](auto& c) { c.grad_clip = -1; });
  bad([](auto& c) { c.lr_schedule = "linear"; });
  bad([](auto& c) { c.kernels = "tpu"; });
  bad([](auto& c) { c.gemm = "mkl"; });
  bad([](auto& c) { c.model = "gpt9"; });
  bad([](auto& c) { c.channels = 66; });  // not divisible by 4 heads
  bad([](auto& c) {
    c.init = AXONN_REFERENCE_DIR "/gpt2-tiny/model.bin";
    c.layers = 3;
  });
}
