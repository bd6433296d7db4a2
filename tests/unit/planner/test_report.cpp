// Output: the JSON schema of `axonn plan --format json` (issue 6) and the table.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "axonn/core/error.hpp"
#include "axonn/planner/planner.hpp"

namespace ap = axonn::planner;

namespace {

ap::PlanResult small_plan(ap::ModelVariant v) {
  ap::PlanRequest req;
  req.workload.model = *ap::find_model("20B");
  req.workload.batch_size = 512;
  req.gpus = 256;
  req.min_tp = 16;
  req.settings.variant = v;
  return ap::plan(ap::load_machine_profile("perlmutter"), req);
}

}  // namespace

TEST(PlannerReport, JsonSchemaBestFirst) {
  auto r = small_plan(ap::ModelVariant::kCorrected);
  auto doc = nlohmann::json::parse(ap::to_json(r, 5));
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc.size(), 1u);
  ASSERT_TRUE(doc["configs"].is_array());
  ASSERT_EQ(doc["configs"].size(), 5u);
  const std::vector<std::string> keys = {"gx",        "gy",      "gz",      "gdata", "comm_s",
                                         "compute_s", "total_s", "mem_gib", "fits"};
  double prev = 0;
  for (std::size_t i = 0; i < 5; ++i) {
    const auto& c = doc["configs"][i];
    EXPECT_EQ(c.size(), keys.size());
    for (const auto& k : keys) EXPECT_TRUE(c.contains(k)) << k;
    for (const auto& k : {"gx", "gy", "gz", "gdata"}) EXPECT_TRUE(c[k].is_number_integer()) << k;
    for (const auto& k : {"comm_s", "compute_s", "total_s", "mem_gib"}) EXPECT_TRUE(c[k].is_number_float()) << k;
    EXPECT_TRUE(c["fits"].is_boolean());
    EXPECT_EQ(c["gx"].get<long>() * c["gy"].get<long>() * c["gz"].get<long>() * c["gdata"].get<long>(), 256);
    EXPECT_EQ(c["gz"].get<long>(), r.configs[i].grid.gz);
    EXPECT_DOUBLE_EQ(c["total_s"].get<double>(), r.configs[i].total_s);
    EXPECT_GE(c["total_s"].get<double>(), prev);
    prev = c["total_s"].get<double>();
  }
  EXPECT_EQ(nlohmann::json::parse(ap::to_json(r, 0))["configs"].size(), r.configs.size());
}

TEST(PlannerReport, JsonCommIsTheChosenVariants) {
  auto r = small_plan(ap::ModelVariant::kAsCoded);
  auto doc = nlohmann::json::parse(ap::to_json(r, 1));
  EXPECT_EQ(doc["configs"][0]["gz"], 256);
  EXPECT_NEAR(doc["configs"][0]["comm_s"].get<double>(), 1.3727417, 5e-7);  // spec §5.5
}

TEST(PlannerReport, TableHasHeaderAndRows) {
  auto r = small_plan(ap::ModelVariant::kCorrected);
  std::string t = ap::format_table(r, 3);
  for (const char* s : {"machine  perlmutter", "model    20B", "256 GPUs", "corrected model", "rank", "step_s",
                        "compute_s", "comm_s", "mem_GiB", "MFU", "more; --top 0 shows all"})
    EXPECT_NE(t.find(s), std::string::npos) << s << "\n" << t;
  std::size_t rows = 0;
  for (std::size_t p = t.find("\n   "); p != std::string::npos; p = t.find("\n   ", p + 1)) ++rows;
  EXPECT_EQ(rows, 3u) << t;
}

TEST(PlannerReport, TheSearchLineSaysWhatWasSearchedInWords) {
  // It read "Gx*Gy*Gz >= 16: N factorizations, M admissible": what the bound is and what admits a grid unsaid.
  auto r = small_plan(ap::ModelVariant::kCorrected);
  const std::string t = ap::format_table(r, 3);
  const std::string grids = std::to_string(r.factorizations) + " grids Gx*Gy*Gz*Gdata = 256; " +
                            std::to_string(r.admissible) + " admissible, " + std::to_string(r.fitting) + " of them fit";
  EXPECT_NE(t.find(grids), std::string::npos) << grids << "\n" << t;
  EXPECT_NE(t.find("admits   a grid where the model's shapes and the batch divide, and Gx*Gy*Gz, the ranks that share "
                   "one copy of the weights, is at least 16 (--min-tp)"),
            std::string::npos)
      << t;
}

TEST(PlannerReport, GridsInTheDegreesOfMegatronAndTorchtitan) {
  EXPECT_EQ(ap::grid_degrees(1, 1, 1, 1), "one rank");
  EXPECT_EQ(ap::grid_degrees(1, 4, 1, 1), "TP 4");
  EXPECT_EQ(ap::grid_degrees(4, 1, 1, 1), "TP 4 (over X)");
  EXPECT_EQ(ap::grid_degrees(2, 2, 8, 2), "2D TP 2x2, FSDP 8, DP 2");
  EXPECT_EQ(ap::grid_degrees(1, 1, 32, 2), "FSDP 32, DP 2");
  EXPECT_EQ(ap::grid_degrees(1, 1, 1, 8), "DP 8");
}

TEST(PlannerReport, TheExplanationNamesTheBestItsTermsAndTheLineToRun) {
  auto r = small_plan(ap::ModelVariant::kCorrected);
  const std::string why = ap::explain_plan(r);
  const ap::Estimate& best = r.configs.front();
  EXPECT_NE(why.find("#1 " + ap::to_string(best.grid) + " = " +
                     ap::grid_degrees(best.grid.gx, best.grid.gy, best.grid.gz, best.grid.gdata)),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("largest term "), std::string::npos) << why;
  EXPECT_NE(why.find("run      mpirun -np 256 axonn train --model 20B --batch-size 512"), std::string::npos) << why;
}

// fastest_fit: the fastest configuration of a grid that fits, over every micro-batch count that divides its
// sequences per rank and recompute off and on (a brute force over the same space agrees); none when even the
// smallest does not fit. With search_memory every grid of a plan is at its fastest_fit, so the best is no
// slower than the default plan's, and the line to run carries the chosen flags.
TEST(PlannerReport, SearchOverMicroBatchesAndRecomputeFindsTheFastestThatFits) {
  const ap::MachineProfile m = ap::load_machine_profile("perlmutter");
  ap::Workload w;
  w.model = *ap::find_model("gpt2-xl");
  w.batch_size = 4096;  // one micro-batch of 64 sequences per rank does not fit in 40 GiB
  const ap::CostSettings s;
  const ap::GridShape g{1, 1, 64, 1};
  ASSERT_FALSE(ap::estimate(m, w, g, s).fits);
  std::optional<ap::Estimate> brute;
  for (bool recompute : {false, true})
    for (long micro = 1; micro <= 64; micro++) {
      if (64 % micro != 0) continue;
      ap::Workload split = w;
      split.grad_accumulation = micro;
      ap::CostSettings with = s;
      with.recompute = recompute;
      const ap::Estimate e = ap::estimate(m, split, g, with);
      if (e.fits && (!brute || e.total_s < brute->total_s)) brute = e;
    }
  const std::optional<ap::Estimate> fit = ap::fastest_fit(m, w, g, s);
  ASSERT_TRUE(fit.has_value() && brute.has_value());
  EXPECT_TRUE(fit->fits);
  EXPECT_EQ(fit->total_s, brute->total_s);
  EXPECT_EQ(fit->micro_batches, brute->micro_batches);
  EXPECT_EQ(fit->recompute, brute->recompute);
  EXPECT_EQ(ap::micro_batch_size(w, *fit), 64 / fit->micro_batches);

  // a grid whose single sequence per rank does not fit has no fix by micro-batches
  ap::Workload huge = w;
  huge.model = *ap::find_model("80B");
  huge.batch_size = 1024;
  EXPECT_FALSE(ap::fastest_fit(m, huge, ap::GridShape{1, 1, 64, 16}, s).has_value());

  ap::PlanRequest req;
  req.workload = w;
  req.workload.batch_size = 512;
  req.gpus = 64;
  const ap::PlanResult plain = ap::plan(m, req);
  req.search_memory = true;
  const ap::PlanResult searched = ap::plan(m, req);
  ASSERT_TRUE(plain.configs.front().fits && searched.configs.front().fits);
  EXPECT_LT(searched.configs.front().total_s, plain.configs.front().total_s);
  for (const ap::Estimate& e : searched.configs)
    if (e.fits) {
      EXPECT_EQ(e.total_s, ap::fastest_fit(m, req.workload, e.grid, req.settings)->total_s);
    }
  const ap::Estimate& best = searched.configs.front();
  const std::string why = ap::explain_plan(searched);
  if (best.micro_batches > 1) {
    EXPECT_NE(why.find("--micro-batch-size " + std::to_string(ap::micro_batch_size(req.workload, best))),
              std::string::npos) << why;
  }
  EXPECT_EQ(why.find("--recompute") != std::string::npos, best.recompute) << why;
  // the as-coded model has its factors fixed: no search
  req.settings.variant = ap::ModelVariant::kAsCoded;
  EXPECT_THROW(ap::plan(m, req), axonn::InvalidArgument);
}
