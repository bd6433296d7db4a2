// A checkpoint's manifest is not trusted beyond what it can prove: a manifest whose model was
// changed (with a valid checksum of its own, as a tool could write it) is refused against the model
// its shard files record, by --resume and by convert's loader; adam_steps and the guard's record are
// parsed strictly (the fault probe's "abc" and "1e30").
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/train/trainer.hpp"
#include "common/reference_run.hpp"

using namespace axonn;
namespace fs = std::filesystem;
namespace ck = checkpoint;

namespace {

std::string io_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.what();
  }
  return "(no IoError)";
}

class ManifestTrust : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (fs::temp_directory_path() / ("axonn-trust-" + std::to_string(::getpid()))).string();
    c_ = test::reference_config();
    c_.steps = 2;
    c_.checkpoint_dir = root_;
    (void)train::train(c_, comm::world());
    step_ = ck::step_dir(root_, 2);
    original_ = ck::read_manifest(step_);
  }
  void TearDown() override { fs::remove_all(root_); }
  // Rewrites the manifest of step 2 as written, changed by `edit`, with a valid checksum of its own.
  void rewrite(const std::function<void(ck::Manifest&)>& edit) {
    ck::Manifest m = original_;
    edit(m);
    ck::write_file_atomic(step_ + "/manifest.json", ck::manifest_to_json(m));
  }
  std::string resume_error() {
    train::TrainConfig r = c_;
    r.steps = 3;
    r.resume = true;
    r.init.clear();  // the model comes from the checkpoint
    return io_error_of([&] { (void)train::train(r, comm::world()); });
  }
  std::string root_, step_;
  train::TrainConfig c_;
  ck::Manifest original_;
};

}  // namespace

TEST_F(ManifestTrust, ModelCrossCheckedAgainstTheShards) {
  rewrite([](ck::Manifest& m) { m.model.num_heads = 2; });  // still a valid model: C=64 splits into 2 heads
  const std::string r = resume_error();
  EXPECT_NE(r.find("records num_heads = 4, but the manifest says 2"), std::string::npos) << r;
  Arena full("full");
  const std::string e = io_error_of([&] { (void)ck::load_consolidated_params(root_, full); });
  EXPECT_NE(e.find("the manifest was edited or belongs to another checkpoint"), std::string::npos) << e;
}

TEST_F(ManifestTrust, AdamStepsParsedStrictly) {
  for (const char* bad : {"abc", "1e30", "-1", "3"}) {  // 3: more optimizer steps than steps
    rewrite([&](ck::Manifest& m) { m.extra["adam_steps"] = bad; });
    const std::string e = resume_error();
    EXPECT_NE(e.find(std::string("records adam_steps = '") + bad + "'"), std::string::npos) << e;
  }
  rewrite([](ck::Manifest& m) { m.extra["guard_norms"] = "1.5,x"; });
  const std::string g = resume_error();
  EXPECT_NE(g.find("records guard_norms = '1.5,x'"), std::string::npos) << g;
  rewrite([](ck::Manifest& m) { m.extra["lr"] = "fast"; });
  EXPECT_NE(resume_error().find("records lr = 'fast': not a number"), std::string::npos);
}
