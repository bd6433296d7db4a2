// `axonn train`'s loop on every 4D grid of this world's size that the model admits: the reference
// GPT-2 (tests/reference/gpt2-tiny, B=4) against llm.c's losses (test::kLlmcLossBound) and the single-rank run
// (<= 2e-4); grids whose Gz*Gdata does not divide 4 train B=8 against the single-rank B=8 run. On 3
// and 6 ranks, the odd-shaped model of tests/golden (C=48, NH=3, B=3) against PyTorch
// (test::kPyTorchLossBound) and one rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/train/trainer.hpp"
#include "common/data_dirs.hpp"
#include "common/grid_shapes.hpp"
#include "common/reference_run.hpp"

namespace axonn {
namespace {

std::vector<float> losses_of(const std::vector<train::StepMetrics>& h) {
  std::vector<float> v;
  for (const auto& m : h) v.push_back(m.loss);
  return v;
}

struct Case {
  train::TrainConfig config;
  std::vector<double> golden;  // llm.c's or PyTorch's losses for config.batch_size == golden_batch
  double golden_bound;         // |loss - golden| at every step
  int golden_batch;
  int heads, channels;
  int kv_heads = 0;  // Llama's (0: heads)
};

// Trains `c` on every admissible grid of the world; returns the number of grids.
int run_every_grid(const Case& k) {
  auto world = comm::world();
  std::shared_ptr<comm::Communicator> self(world->split(world->rank(), 0, "self"));
  int ran = 0;
  std::vector<float> single[2];  // single-rank losses for B = golden_batch and 2 * golden_batch
  for (const parallel::GridShape& s : test::grid_shapes(world->size())) {
    if (s.gx * s.gy * s.gz * s.gdata == 1) continue;
    if (k.channels % s.gx != 0 || k.heads % s.gy != 0) continue;  // refused by the model; tested elsewhere
    if (k.kv_heads && k.kv_heads % s.gy != 0) continue;
    train::TrainConfig c = k.config;
    const int groups = s.gz * s.gdata;
    const bool golden_batch = k.golden_batch % groups == 0;
    c.batch_size = golden_batch ? k.golden_batch : 2 * k.golden_batch;
    if (c.batch_size % groups != 0) continue;
    std::vector<float>& one = single[golden_batch ? 0 : 1];
    if (one.empty()) {
      train::TrainConfig c1 = c;
      c1.grid = "1,1,1,1";
      one = losses_of(train::train(c1, self));
    }
    c.grid = std::to_string(s.gx) + "," + std::to_string(s.gy) + "," + std::to_string(s.gz) + "," +
             std::to_string(s.gdata);
    SCOPED_TRACE("grid " + c.grid + ", batch " + std::to_string(c.batch_size));
    std::vector<float> got = losses_of(train::train(c, world));
    EXPECT_EQ(got.size(), one.size());
    double worst_single = 0, worst_golden = 0;
    for (size_t i = 0; i < got.size() && i < one.size(); i++) {
      EXPECT_NEAR(got[i], one[i], 2e-4) << "step " << i << " vs one rank";
      worst_single = std::max(worst_single, std::fabs((double)got[i] - one[i]));
      if (golden_batch) {
        EXPECT_NEAR(got[i], k.golden[i], k.golden_bound) << "step " << i << " vs the golden trajectory";
        worst_golden = std::max(worst_golden, std::fabs(got[i] - k.golden[i]));
      }
    }
    if (world->rank() == 0)
      std::printf("grid %-8s B=%d: max |loss - one rank| = %.2g%s\n", c.grid.c_str(), c.batch_size, worst_single,
                  golden_batch ? (", max |loss - golden| = " + std::to_string(worst_golden)).c_str() : "");
    ran++;
  }
  return ran;
}

train::TrainConfig quiet(train::TrainConfig c) {
  c.peak_gflops = 100;
  c.quiet = true;
  c.lr_schedule = "constant";
  c.weight_decay = 0;
  c.grad_clip = 0;
  return c;
}

}  // namespace

TEST(TrainOnGrid, ReferenceGpt2OnEveryGrid) {
  if (comm::world()->size() % 3 == 0) GTEST_SKIP() << "gpt2-tiny's 4 heads and 64 channels admit no grid of 3";
  train::TrainConfig c;
  c.init = test::reference_file("gpt2-tiny/model.bin");
  c.data = test::reference_file("gpt2-tiny/tokens.bin");
  c.seq_len = 32;
  c.steps = 30;
  c.lr = 3e-3f;
  int ran = run_every_grid({quiet(c), test::read_losses(test::reference_file("gpt2-tiny/losses.txt")),
                            test::kLlmcLossBound, 4, 4, 64});
  EXPECT_GT(ran, 0);
}

// The PyTorch oracle's Llama (grouped-query attention, untied head; tests/golden/gen_llama_golden.py) from
// its Hugging Face directory, on every grid the shape admits (C=48, 6 heads, 2 KV heads: Gy <= 2).
TEST(TrainOnGrid, LlamaOracleOnEveryGrid) {
  train::TrainConfig c = test::llama_oracle_config();
  int ran = run_every_grid({quiet(c), test::read_losses(test::golden_file("llama-gqa/losses.txt")),
                            test::kLlamaOracleLossBound, 3, 6, 48, 2});
  EXPECT_GT(ran, 0);
}

TEST(TrainOnGrid, OddShapesOnGridsOfThree) {
  if (comm::world()->size() % 3 != 0) GTEST_SKIP() << "for worlds of 3 and 6 ranks";
  train::TrainConfig c;
  c.init = test::golden_file("odd-shapes/model.bin");
  c.data = test::golden_file("odd-shapes/tokens.bin");
  c.seq_len = 13;
  c.steps = 20;
  c.lr = 3e-3f;
  int ran = run_every_grid({quiet(c), test::read_losses(test::golden_file("odd-shapes/losses.txt")),
                            test::kPyTorchLossBound, 3, 3, 48});
  EXPECT_GT(ran, 0);
}

}  // namespace axonn
