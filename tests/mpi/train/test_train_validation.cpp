// Validation (--val-data) through train::train on every grid of this world that gpt2-tiny admits:
// it is the forward half of the training step, so on the training shard with lr 0 (weights never
// change) the validation loss equals the training loss of the same batches, exactly, on every grid;
// it equals one rank's within the training tests' bound; and validating changes no training result:
// the losses with and without it are bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/train/trainer.hpp"
#include "common/grid_shapes.hpp"
#include "common/reference_run.hpp"

namespace axonn {
namespace {

train::TrainConfig config(const std::string& grid) {
  train::TrainConfig c = test::reference_config();
  c.grid = grid;
  c.steps = 6;
  c.val_data = c.data;
  c.val_every = 2;
  c.val_batches = 3;
  return c;
}

}  // namespace

TEST(Validation, IsTheStepsForwardOnEveryGrid) {
  auto world = comm::world();
  std::shared_ptr<comm::Communicator> self(world->split(world->rank(), 0, "self"));
  train::TrainConfig one = config("1,1,1,1");
  one.lr = 0;
  const std::vector<train::StepMetrics> alone = train::train(one, self);
  ASSERT_EQ(alone.size(), 6u);
  ASSERT_TRUE(alone[1].val_loss.has_value());
  for (const auto& s : test::tiny_gpt2_grids(world->size())) {
    SCOPED_TRACE("grid " + test::grid_text(s));
    train::TrainConfig c = config(test::grid_text(s));
    c.lr = 0;
    const std::vector<train::StepMetrics> h = train::train(c, world);
    ASSERT_EQ(h.size(), 6u);
    // the first three training steps saw the three validation batches, with the same weights
    const float want = static_cast<float>((static_cast<double>(h[0].loss) + h[1].loss + h[2].loss) / 3);
    for (const auto& m : h) {
      EXPECT_EQ(m.val_loss.has_value(), (m.step + 1) % 2 == 0) << "step " << m.step;
      if (!m.val_loss) continue;
      EXPECT_EQ(*m.val_loss, want) << "step " << m.step << ": validation is not the step's forward";
      EXPECT_NEAR(*m.val_loss, *alone[static_cast<size_t>(m.step)].val_loss, 2e-4) << "step " << m.step << " vs one rank";
    }
  }
}

TEST(Validation, ChangesNoTrainingResult) {
  auto world = comm::world();
  for (const auto& s : test::tiny_gpt2_grids(world->size())) {
    SCOPED_TRACE("grid " + test::grid_text(s));
    train::TrainConfig with = config(test::grid_text(s));
    with.micro_batch_size = 4 / (s.gz * s.gdata) > 1 ? 1 : 0;  // micro-batches where the rank has several
    with.dtype = s.gx > 1 ? "bf16" : "fp32";                   // both precisions over the grids
    train::TrainConfig without = with;
    without.val_data.clear();
    without.val_every = 0;
    const auto a = train::train(with, world), b = train::train(without, world);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); i++) {
      EXPECT_EQ(a[i].loss, b[i].loss) << "step " << i;
      EXPECT_EQ(a[i].grad_norm, b[i].grad_norm) << "step " << i;
      EXPECT_FALSE(b[i].val_loss.has_value());
    }
    EXPECT_TRUE(a.back().val_loss.has_value()) << "the last step validates";
  }
}

TEST(Validation, RefusesBadFlags) {
  auto world = comm::world();
  train::TrainConfig c = config("");
  c.val_data.clear();
  EXPECT_THROW(train::train(c, world), InvalidArgument);  // --val-every without --val-data
  c = config("");
  c.val_batches = 0;
  EXPECT_THROW(train::train(c, world), InvalidArgument);
  c = config("");
  c.val_data = "/nonexistent/val.bin";
  EXPECT_THROW(train::train(c, world), IoError);
}

}  // namespace axonn
