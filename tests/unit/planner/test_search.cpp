// Search: all factorizations, divisibility, the ranked configurations of spec §5.5 (as coded).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include "axonn/core/error.hpp"
#include "axonn/planner/planner.hpp"

namespace ap = axonn::planner;

namespace {

struct Expected {
  ap::GridShape grid;
  double comm_s;
};

ap::PlanRequest request(const char* model, long batch, long gpus, ap::ModelVariant v) {
  ap::PlanRequest r;
  r.workload.model = *ap::find_model(model);
  r.workload.batch_size = batch;
  r.workload.seq_len = 2048;
  r.gpus = gpus;
  r.min_tp = r.workload.model.min_tp;
  r.settings.variant = v;
  return r;
}

// Ranks 1..n of an as-coded plan are the expected grids with the expected communication time.
// (As AxoNN, the as-coded search ranks by communication alone; `fits` is reported, not used.)
// Values: comm_model.py's get_configs_for_transformer (grad_acc = 1) re-run; the spec prints them
// rounded to 3 decimals.
void expect_ranking(const ap::PlanResult& r, const std::vector<Expected>& want) {
  ASSERT_GE(r.configs.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(r.configs[i].grid, want[i].grid)
        << "rank " << i + 1 << ": got " << ap::to_string(r.configs[i].grid) << " want " << ap::to_string(want[i].grid);
    EXPECT_NEAR(r.configs[i].comm_s, want[i].comm_s, 5e-7) << "rank " << i + 1;
  }
}

}  // namespace

TEST(PlannerSearch, AllOrderedFactorizations) {
  auto f12 = ap::factorizations(12);
  EXPECT_EQ(f12.size(), 40u);  // 12 = 2²·3: C(2+3,3)·C(1+3,3) = 10·4
  std::set<std::tuple<long, long, long, long>> seen;
  for (const auto& g : f12) {
    EXPECT_EQ(g.size(), 12);
    seen.insert({g.gx, g.gy, g.gz, g.gdata});
  }
  EXPECT_EQ(seen.size(), 40u);
  EXPECT_TRUE(seen.count({3, 1, 4, 1}));
  EXPECT_TRUE(seen.count({1, 6, 1, 2}));
  EXPECT_EQ(f12.front(), (ap::GridShape{1, 1, 1, 12}));  // gx outermost, ascending, like AxoNN's loops
  EXPECT_EQ(f12.back(), (ap::GridShape{12, 1, 1, 1}));
  EXPECT_EQ(ap::factorizations(1).size(), 1u);
  EXPECT_EQ(ap::factorizations(7).size(), 4u);
  EXPECT_EQ(ap::factorizations(32768).size(), 816u);  // 2^15: C(18, 3)
  EXPECT_THROW(ap::factorizations(0), axonn::InvalidArgument);
}

TEST(PlannerSearch, DivisibilityReasons) {
  ap::Workload w;
  w.model = *ap::find_model("20B");  // H = 7168 = 2^10·7, 56 heads
  w.batch_size = 512;
  auto why = [&](ap::GridShape g, long min_tp = 1) { return ap::inadmissible_reason(w, g, min_tp).value_or(""); };
  EXPECT_EQ(why({1, 1, 16, 16}, 16), "");
  EXPECT_EQ(why({1, 7, 1, 1}), "");  // 7 divides H and the heads: non-powers of two are fine
  EXPECT_NE(why({1, 1, 8, 1}, 16).find("below the minimum tensor-parallel degree 16"), std::string::npos);
  EXPECT_NE(why({1, 1, 3, 1}).find("batch size 512 is not divisible by Gdata*Gz = 3"), std::string::npos);
  EXPECT_NE(why({3, 1, 1, 1}).find("channels 7168 are not divisible by Gx=3"), std::string::npos);
  EXPECT_NE(why({1, 3, 1, 1}).find("are not divisible by Gy=3"), std::string::npos);
  EXPECT_NE(why({1, 16, 1, 1}).find("heads 56 are not divisible by Gy=16"), std::string::npos);
  w.model.config.channels = 48;  // QKV block 48 × 144 / (Gx·Gy) over Gz
  w.model.config.num_heads = 4;
  w.batch_size = 4096;
  EXPECT_NE(why({1, 1, 4096, 1}).find("weight block"), std::string::npos);
  w.grad_accumulation = 4;
  w.model = *ap::find_model("20B");
  w.batch_size = 512;
  EXPECT_NE(why({1, 1, 256, 1}).find("Gdata*Gz*micro-batches = 1024"), std::string::npos);
}

// Spec §5.5: 80B (L=42, H=12288), B=1024, S=2048, G=1024 Perlmutter, min_tp=64.
TEST(PlannerSearch, Reference80BOn1024Perlmutter) {
  auto r = ap::plan(ap::load_machine_profile("perlmutter"), request("80B", 1024, 1024, ap::ModelVariant::kAsCoded));
  expect_ranking(r, {{{1, 1, 1024, 1}, 5.3104340},
                     {{1, 1, 512, 2}, 5.3329285},
                     {{1, 1, 256, 4}, 5.3779175},
                     {{1, 1, 128, 8}, 5.4678955},
                     {{1, 1, 64, 16}, 5.6478516},
                     {{4, 2, 128, 1}, 5.8395483},
                     {{4, 2, 64, 2}, 5.8464697},
                     {{4, 2, 32, 4}, 5.8603125}});
  EXPECT_NEAR(r.configs[0].comm_s, 5.310, 5e-4);  // as printed in the spec
  EXPECT_NEAR(r.configs[1].comm_s, 5.333, 5e-4);
  EXPECT_NEAR(r.configs[2].comm_s, 5.378, 5e-4);
  EXPECT_NEAR(r.configs[5].comm_s, 5.840, 5e-4);
  EXPECT_EQ(r.factorizations, 286);  // 2^10: C(13, 3)
}

// Spec §5.5: 20B (L=32, H=7168), B=512, S=2048, G=256 Perlmutter, min_tp=16.
TEST(PlannerSearch, Reference20BOn256Perlmutter) {
  auto r = ap::plan(ap::load_machine_profile("perlmutter"), request("20B", 512, 256, ap::ModelVariant::kAsCoded));
  expect_ranking(r, {{{1, 1, 256, 1}, 1.3727417},
                     {{1, 1, 128, 2}, 1.3960693},
                     {{1, 1, 64, 4}, 1.4427246},
                     {{1, 1, 32, 8}, 1.5360352},
                     {{1, 1, 16, 16}, 1.7226562},
                     {{1, 4, 64, 1}, 1.9165918},
                     {{1, 2, 128, 1}, 1.9199900},
                     {{1, 4, 32, 2}, 1.9237695}});
  EXPECT_NEAR(r.configs[0].comm_s, 1.373, 5e-4);
  EXPECT_NEAR(r.configs[1].comm_s, 1.396, 5e-4);
  EXPECT_NEAR(r.configs[2].comm_s, 1.443, 5e-4);
  EXPECT_NEAR(r.configs[5].comm_s, 1.917, 5e-4);
}

// Spec §5.5: 20B, B=512, S=2048, G=512 Frontier, min_tp=16.
TEST(PlannerSearch, Reference20BOn512Frontier) {
  auto r = ap::plan(ap::load_machine_profile("frontier"), request("20B", 512, 512, ap::ModelVariant::kAsCoded));
  expect_ranking(r, {{{1, 1, 512, 1}, 2.7508667},
                     {{1, 1, 256, 2}, 2.8029053},
                     {{1, 1, 128, 4}, 2.9069824},
                     {{1, 2, 256, 1}, 2.9082741},
                     {{1, 2, 128, 2}, 2.9549294},
                     {{2, 1, 256, 1}, 2.9625377},
                     {{2, 1, 128, 2}, 3.0091929},
                     {{1, 2, 64, 4}, 3.0482399}});
  EXPECT_NEAR(r.configs[0].comm_s, 2.751, 5e-4);
  EXPECT_NEAR(r.configs[1].comm_s, 2.803, 5e-4);
  EXPECT_NEAR(r.configs[2].comm_s, 2.907, 5e-4);
  EXPECT_NEAR(r.configs[3].comm_s, 2.908, 5e-4);
}

TEST(PlannerSearch, CorrectedRanksFittingGridsByStepTime) {
  auto r = ap::plan(ap::load_machine_profile("perlmutter"), request("20B", 512, 256, ap::ModelVariant::kCorrected));
  ASSERT_FALSE(r.configs.empty());
  EXPECT_EQ(r.admissible, static_cast<long>(r.configs.size()));
  for (std::size_t i = 1; i < r.configs.size(); ++i) {
    const auto &a = r.configs[i - 1], &b = r.configs[i];
    EXPECT_TRUE(a.fits || !b.fits) << "a grid that does not fit ranks above one that does";
    if (a.fits == b.fits) {
      EXPECT_LE(a.total_s, b.total_s);
    }
  }
}

TEST(PlannerSearch, NonPowerOfTwoGrids) {
  // gpt2-xl: 25 heads, H = 1600 = 2^6·5²; 20 GPUs.
  ap::PlanRequest req;
  req.workload.model = *ap::find_model("gpt2-xl");
  req.workload.batch_size = 40;
  req.workload.seq_len = 1024;
  req.gpus = 20;
  auto r = ap::plan(ap::load_machine_profile("alps"), req);
  bool five = false;
  for (const auto& e : r.configs) {
    EXPECT_EQ(e.grid.size(), 20);
    EXPECT_EQ(25 % e.grid.gy, 0);
    five = five || e.grid.gy == 5 || e.grid.gx == 5 || e.grid.gz == 5;
  }
  EXPECT_TRUE(five);
  EXPECT_EQ(r.factorizations, 40);
}

TEST(PlannerSearch, NothingAdmissibleSaysWhatToChange) {
  try {
    auto req = request("80B", 512, 7, ap::ModelVariant::kCorrected);  // H = 2^12·3, 96 heads
    req.min_tp = 1;
    ap::plan(ap::load_machine_profile("perlmutter"), req);
    FAIL() << "no error";
  } catch (const axonn::InvalidArgument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("no 4D grid of 7 GPUs"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--gpus"), std::string::npos) << msg;
  }
  auto req = request("20B", 512, 8, ap::ModelVariant::kCorrected);
  EXPECT_THROW(ap::plan(ap::load_machine_profile("perlmutter"), req), axonn::InvalidArgument);  // min_tp 16 > 8
  req.gpus = 0;
  EXPECT_THROW(ap::plan(ap::load_machine_profile("perlmutter"), req), axonn::InvalidArgument);
}

TEST(PlannerSearch, ModelThatFitsNowhereIsMarkedNotDropped) {
  auto req = request("175B", 64, 64, ap::ModelVariant::kCorrected);
  req.min_tp = 1;
  auto r = ap::plan(ap::load_machine_profile("perlmutter"), req);
  EXPECT_GT(r.admissible, 0);
  EXPECT_EQ(r.fitting, 0);
  for (const auto& e : r.configs) EXPECT_FALSE(e.fits);
}

TEST(PlannerSearch, KnownModels) {
  EXPECT_EQ(ap::find_model("80b")->hidden(), 12288);
  EXPECT_EQ(ap::find_model("GPT2-XL")->heads(), 25);
  EXPECT_FALSE(ap::find_model("llama-7b").has_value());
  EXPECT_EQ(ap::known_models().size(), 23u);  // every preset of model::gpt_preset (gpt2-tiny ... Llama-3.1-405B)
  // the Llama family: the shapes of the published configs (model::gpt_preset)
  const auto big = ap::find_model("Llama-3.1-405B");
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->layers(), 126);
  EXPECT_EQ(big->hidden(), 16384);
  EXPECT_EQ(big->config.kv_heads(), 8);
  EXPECT_EQ(big->config.mlp_hidden(), 53248);
  ap::Workload w;
  w.model = *big;
  EXPECT_NEAR(w.parameters(), 405.85e9, 0.01e9);  // Meta's "405B": 405,853,388,800 parameters
  w.model = *ap::find_model("llama-3.1-8b");
  EXPECT_NEAR(w.parameters(), 8.03e9, 0.005e9);
  w.model = *ap::find_model("tinyllama-1.1b");
  EXPECT_NEAR(w.parameters(), 1.10e9, 0.005e9);
  w.model = *ap::find_model("llama-3.2-1b");  // tied: 1.24B
  EXPECT_NEAR(w.parameters(), 1.236e9, 0.001e9);
}

TEST(PlannerSearch, TrainModelNamesAreAliases) {
  // `axonn train --model gpt2-1558m` and `axonn plan --model gpt2-xl` name the same model.
  const std::pair<const char*, const char*> names[] = {
      {"gpt2-124m", "gpt2"}, {"gpt2-350m", "gpt2-medium"}, {"gpt2-774m", "gpt2-large"}, {"GPT2-1558M", "gpt2-xl"}};
  for (const auto& [alias, name] : names) {
    const auto a = axonn::planner::find_model(alias), b = axonn::planner::find_model(name);
    ASSERT_TRUE(a.has_value()) << alias;
    ASSERT_TRUE(b.has_value()) << name;
    EXPECT_EQ(a->layers(), b->layers()) << alias;
    EXPECT_EQ(a->hidden(), b->hidden()) << alias;
    EXPECT_EQ(a->heads(), b->heads()) << alias;
  }
  EXPECT_FALSE(axonn::planner::find_model("gpt2-999m").has_value());
}
