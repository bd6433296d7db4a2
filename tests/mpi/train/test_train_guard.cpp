// The numerical guard through train::run on every grid of this world that gpt2-tiny admits: a
// non-finite gradient (injected on world rank 0 before the gradient sums, --fault-nonfinite-grad)
// makes every rank skip that step, and the weights and both AdamW moments after it are bit for bit
// those before it (its checkpoint's tensors equal the previous step's), AdamW's t stays; the steps
// after it train on; --max-bad-steps stops a run whose steps are all skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/train/trainer.hpp"
#include "common/grid_shapes.hpp"
#include "common/reference_run.hpp"
#include "common/shared_tmp_dir.hpp"

namespace axonn {
namespace {

namespace ck = checkpoint;

// Every tensor of every file of two step directories: equal bytes.
void expect_same_state(const std::string& a, const std::string& b) {
  const ck::Manifest ma = ck::read_manifest(a), mb = ck::read_manifest(b);
  EXPECT_EQ(ma.extra.at("adam_steps"), mb.extra.at("adam_steps")) << "AdamW's t changed";
  ASSERT_EQ(ma.files.size(), mb.files.size());
  for (const ck::FileEntry& f : ma.files) {
    ck::SafetensorsFile fa(a + "/" + f.name), fb(b + "/" + f.name);
    ASSERT_EQ(fa.tensors().size(), 48u);  // params, adam_m, adam_v
    for (const ck::TensorInfo& t : fa.tensors()) {
      const ck::TensorInfo& u = fb.get(t.name);
      ASSERT_EQ(t.bytes(), u.bytes());
      EXPECT_EQ(std::memcmp(fa.data(t), fb.data(u), t.bytes()), 0) << f.name << " " << t.name << " changed";
    }
  }
}

}  // namespace

TEST(Guard, NonFiniteGradientSkippedOnEveryGrid) {
  auto world = comm::world();
  for (const auto& s : test::tiny_gpt2_grids(world->size())) {
    SCOPED_TRACE("grid " + test::grid_text(s));
    test::SharedTmpDir tmp;
    train::TrainConfig c = test::reference_config();
    c.grid = test::grid_text(s);
    c.steps = 5;
    c.grad_clip = 1.0f;
    c.weight_decay = 0.1f;
    c.checkpoint_dir = tmp / "ck";
    c.checkpoint_every = 1;
    c.fault_nonfinite_grad = std::string("3");  // (a temporary: GCC 12 -Wrestrict false positive otherwise)
    const train::TrainResult r = train::run(c, world);
    ASSERT_EQ(r.history.size(), 5u);
    EXPECT_EQ(r.stop, train::Stop::kFinished);
    for (const auto& m : r.history) {
      EXPECT_EQ(m.verdict == train::Verdict::kUpdate, m.step != 2) << "step " << m.step + 1;
      EXPECT_EQ(m.skipped_steps, m.step >= 2 ? 1 : 0) << "step " << m.step + 1;
    }
    if (world->rank() == 0) {
      expect_same_state(tmp / "ck/step-00000002", tmp / "ck/step-00000003");
      const ck::Manifest last = ck::read_manifest(tmp / "ck/step-00000005");
      EXPECT_EQ(last.extra.at("adam_steps"), "4");
      EXPECT_EQ(last.extra.at("skipped_steps"), "1");
    }
    // the step after the skipped one trains on the untouched state: its loss is finite and the update applied
    EXPECT_TRUE(std::isfinite(r.history[3].loss) && std::isfinite(r.history[3].grad_norm));
  }
}

TEST(Guard, MaxBadStepsStopsTheRun) {
  auto world = comm::world();
  train::TrainConfig c = test::reference_config();
  c.grid = "1,1,1,";
  c.grid += std::to_string(world->size());
  c.batch_size = 4 * world->size();
  c.steps = 10;
  c.fault_nonfinite_grad = "2,3,4";
  c.max_bad_steps = 3;
  const train::TrainResult r = train::run(c, world);
  EXPECT_EQ(r.stop, train::Stop::kBadSteps);
  ASSERT_EQ(r.history.size(), 4u) << "stops after the third skipped step in a row";
  c.max_bad_steps = 4;  // one short of the limit: trains on
  EXPECT_EQ(train::run(c, world).stop, train::Stop::kFinished);
}

}  // namespace axonn
