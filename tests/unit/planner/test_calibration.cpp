// axonn calibrate's half without MPI: the fits recover the parameters they are given, the profile
// JSON round-trips through the planner's parser (per-collective rules, α, measured samples), and the
// axonn-cpp step model counts this implementation's collectives and GEMMs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "axonn/core/error.hpp"
#include "axonn/planner/calibration.hpp"
#include "axonn/planner/cost_model.hpp"
#include "axonn/planner/planner.hpp"

namespace ap = axonn::planner;
using ap::CollectiveKind;

namespace {

// t(M) of the planner's ring formula for a collective of p ranks.
double ring_seconds(CollectiveKind k, long p, double alpha_us, double gbs, double bytes) {
  const double c = k == CollectiveKind::kAllReduce ? 2.0 : 1.0, pd = static_cast<double>(p);
  return c * (pd - 1) * alpha_us * 1e-6 + c * (pd - 1) / pd * bytes / (gbs * 1e9);
}

std::vector<ap::CollectiveSample> samples_of(CollectiveKind k, long p, double alpha_us, double gbs) {
  std::vector<ap::CollectiveSample> s;
  for (double bytes : {8.0, 512.0, 32768.0, 1048576.0, 4194304.0}) s.push_back({bytes, ring_seconds(k, p, alpha_us, gbs, bytes)});
  return s;
}

// A calibration of 4 ranks on one node, every position a 4-rank grid has, exact α-β samples.
ap::Calibration four_rank_calibration() {
  ap::Calibration c;
  c.date = "2026-01-01T00:00:00Z";
  c.host = "testhost";
  c.cpu = "Test CPU";
  c.ranks = 4;
  c.nodes = 1;
  c.ranks_per_node = 4;
  c.threads_per_rank = 1;
  c.gemm_backend = "onednn";
  c.memory_gib = 5.5;
  c.stream_gbs = 6.0;
  c.gemm = {{1024, 1024, 1024, 2.0 * 1024 * 1024 * 1024 / 40e9 + 3e-6}, {64, 64, 32, 2.0 * 64 * 64 * 32 / 40e9 + 3e-6}};
  c.gemm_fit = ap::fit_gemm(c.gemm);
  const struct {
    long ip, p;
    double scale;
  } positions[] = {{1, 2, 1.0}, {2, 2, 0.8}, {1, 4, 0.6}};
  for (const auto& pos : positions)
    for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
      const double gbs = 2.0 * pos.scale * (k == CollectiveKind::kReduceScatter ? 0.5 : 1.0);
      c.collectives.push_back(ap::fit_collective(k, pos.ip, pos.p, samples_of(k, pos.p, 5.0, gbs)));
    }
  return c;
}

ap::Workload small_gpt(long batch = 8) {
  ap::Workload w;
  w.model = ap::gpt_shape("", 4, 256, 4, 2048);
  w.seq_len = 64;
  w.batch_size = batch;
  return w;
}

}  // namespace

TEST(PlannerCalibration, FitRecoversAlphaAndBeta) {
  for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter})
    for (long p : {2L, 4L, 8L}) {
      const auto f = ap::fit_collective(k, 1, p, samples_of(k, p, 7.5, 3.25));
      EXPECT_NEAR(f.latency_us, 7.5, 1e-6) << ap::to_string(k) << " p=" << p;
      EXPECT_NEAR(f.gbs, 3.25, 1e-6) << ap::to_string(k) << " p=" << p;
      EXPECT_LT(f.max_rel_error, 1e-9);
    }
}

TEST(PlannerCalibration, FitClampsToPhysicalValues) {
  // time falls with size (noise): no negative bandwidth, all fixed cost
  auto f = ap::fit_collective(CollectiveKind::kAllReduce, 1, 2, {{8, 2e-5}, {4096, 1e-5}});
  EXPECT_GT(f.gbs, 0);
  EXPECT_GT(f.latency_us, 0);
  // time proportional to size: no negative latency
  f = ap::fit_collective(CollectiveKind::kAllGather, 1, 2, {{1000, 1e-6}, {2000, 2e-6}, {4000, 4e-6}});
  EXPECT_GE(f.latency_us, 0);
  EXPECT_NEAR(f.gbs, 0.5 * 1000 / 1e-6 * 1e-9, 1e-9);
  // a single size still gives a profile
  f = ap::fit_collective(CollectiveKind::kReduceScatter, 2, 2, {{4096, 1e-5}});
  EXPECT_GT(f.gbs, 0);
}

TEST(PlannerCalibration, FitRejectsBadSamples) {
  EXPECT_THROW(ap::fit_collective(CollectiveKind::kAllReduce, 1, 2, {}), axonn::InvalidArgument);
  EXPECT_THROW(ap::fit_collective(CollectiveKind::kAllReduce, 1, 2, {{0, 1e-6}}), axonn::InvalidArgument);
  EXPECT_THROW(ap::fit_collective(CollectiveKind::kAllReduce, 1, 1, {{8, 1e-6}}), axonn::InvalidArgument);
  EXPECT_THROW(ap::fit_gemm({}), axonn::InvalidArgument);
}

TEST(PlannerCalibration, GemmFitRecoversRateAndCallCost) {
  std::vector<ap::GemmSample> s;
  for (long n : {32L, 128L, 512L, 1024L}) {
    const auto x = static_cast<double>(n);
    s.push_back({n, n, n, 2.0 * x * x * x / 55e9 + 4e-6});
  }
  const auto f = ap::fit_gemm(s);
  EXPECT_NEAR(f.gflops, 55, 1e-6);
  EXPECT_NEAR(f.call_us, 4, 1e-6);
}

// What `axonn calibrate` writes, the planner reads: every field, every rule, the samples.
TEST(PlannerCalibration, ProfileRoundTrip) {
  const ap::Calibration c = four_rank_calibration();
  const std::string json = ap::calibration_profile_json(c);
  const ap::MachineProfile m = ap::parse_machine_profile(json, "local.json");
  EXPECT_EQ(m.name, "local");
  EXPECT_EQ(m.implementation, ap::Implementation::kAxonnCpp);
  EXPECT_EQ(m.gpus_per_node, 4);
  EXPECT_EQ(m.calibrated_ranks, 4);
  EXPECT_NEAR(m.memory_gib, 5.5, 1e-9);
  EXPECT_NEAR(m.hbm_gbs, 6.0, 1e-9);
  EXPECT_NEAR(m.gemm_flops_per_s(), 40e9, 40e9 * 1e-3);  // 4 significant digits written
  EXPECT_NEAR(m.gemm_call_us, 3.0, 3e-3);
  ASSERT_EQ(m.bandwidth_table.size(), c.collectives.size());
  for (const auto& f : c.collectives) {
    EXPECT_NEAR(m.bandwidth_gbs(f.kind, f.ip, f.size), f.gbs, f.gbs * 1e-3) << ap::to_string(f.kind);
    EXPECT_NEAR(m.latency_s(f.kind, f.ip, f.size), 5e-6, 5e-9) << ap::to_string(f.kind);
    // the measured curve: exact at the samples (4 digits), linear in between, + M/β beyond
    for (const auto& s : f.samples) {
      auto t = m.measured_seconds(f.kind, f.ip, f.size, s.bytes);
      ASSERT_TRUE(t.has_value());
      EXPECT_NEAR(*t, s.seconds, s.seconds * 1e-3);
    }
    const double mid = 0.5 * (f.samples[2].bytes + f.samples[3].bytes);
    EXPECT_NEAR(*m.measured_seconds(f.kind, f.ip, f.size, mid), 0.5 * (f.samples[2].seconds + f.samples[3].seconds),
                f.samples[3].seconds * 1e-3);
    EXPECT_NEAR(*m.measured_seconds(f.kind, f.ip, f.size, 2.0), f.samples[0].seconds, f.samples[0].seconds * 1e-3);
    const double big = 8.0 * 1048576;
    const double want = ring_seconds(f.kind, f.size, 5.0, f.gbs, big);
    EXPECT_NEAR(*m.measured_seconds(f.kind, f.ip, f.size, big), want, want * 2e-3);
  }
  // positions not measured use the fallback: the widest intra-node all-reduce ring
  EXPECT_NEAR(m.intra_node_gbs, c.collectives[6].gbs, c.collectives[6].gbs * 1e-3);
  EXPECT_EQ(m.intra_node_gbs, m.inter_node_gbs);  // one node: not measured
  EXPECT_FALSE(m.measured_seconds(CollectiveKind::kAllReduce, 1, 8, 1024).has_value());
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(CollectiveKind::kAllReduce, 1, 8), m.inter_node_gbs / 1);
  // the raw record is there for people
  const auto doc = nlohmann::json::parse(json);
  EXPECT_EQ(doc["calibration"]["ranks"], 4);
  EXPECT_EQ(doc["calibration"]["gemm"].size(), 2u);
  EXPECT_EQ(doc["network"]["bandwidth_gbs"][0]["samples"].size(), 5u);
}

// MFU's peak (train/peak.hpp) travels in the profile with what it was measured on, and is absent from
// a calibration that did not measure it (the run then measures its own).
TEST(PlannerCalibration, MfuPeakRoundTrip) {
  ap::Calibration c = four_rank_calibration();
  EXPECT_EQ(ap::parse_machine_profile(ap::calibration_profile_json(c), "local.json").calibrated_peak.fp32_gflops, 0);
  c.mfu_peak_fp32_gflops = 41.25;
  c.mfu_peak_bf16_gflops = 97.5;
  c.bf16_gemm = "oneDNN matmul brg:avx512_core_amx_bf16";
  const ap::MachineProfile m = ap::parse_machine_profile(ap::calibration_profile_json(c), "local.json");
  const ap::MachineProfile::CalibratedPeak& p = m.calibrated_peak;
  EXPECT_DOUBLE_EQ(p.fp32_gflops, 41.25);
  EXPECT_DOUBLE_EQ(p.bf16_gflops, 97.5);
  EXPECT_EQ(p.cpu, "Test CPU");
  EXPECT_EQ(p.date, "2026-01-01T00:00:00Z");
  EXPECT_EQ(p.ranks_per_node, 4);
  EXPECT_EQ(p.threads_per_rank, 1);
  // a peak that is not a positive rate is refused, naming the field
  auto doc = nlohmann::json::parse(ap::calibration_profile_json(c));
  doc["calibration"]["mfu_peak"]["bf16_gflops_per_rank"] = -1;
  try {
    ap::parse_machine_profile(doc.dump(), "local.json");
    FAIL() << "a negative peak was accepted";
  } catch (const axonn::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("calibration.mfu_peak"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bf16_gflops_per_rank"), std::string::npos) << e.what();
  }
}

// On two nodes of 2 ranks: (1,2) inside a node, (2,2) and (1,4) across. The profile's two-level
// fallback: intra from (1,2), inter from the narrowest inter-node all-reduce (1,4), and the latency
// of each level (the median α of its positions).
TEST(PlannerCalibration, TwoNodesGiveTheTwoLevels) {
  ap::Calibration c = four_rank_calibration();
  c.nodes = 2;
  c.ranks_per_node = 2;
  c.collectives.clear();
  const struct {
    long ip, p;
    bool intra;
    double gbs, alpha_us;
  } positions[] = {{1, 2, true, 3.0, 5.0}, {2, 2, false, 0.06, 900.0}, {1, 4, false, 0.1, 600.0}};
  for (const auto& pos : positions)
    for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
      auto f = ap::fit_collective(k, pos.ip, pos.p, samples_of(k, pos.p, pos.alpha_us, pos.gbs));
      f.intra_node = pos.intra;
      c.collectives.push_back(f);
    }
  const ap::MachineProfile m = ap::parse_machine_profile(ap::calibration_profile_json(c), "local.json");
  EXPECT_EQ(m.gpus_per_node, 2);
  EXPECT_NEAR(m.intra_node_gbs, 3.0, 3e-3);
  EXPECT_NEAR(m.inter_node_gbs, 0.1, 1e-4);
  ASSERT_TRUE(m.intra_node_latency_us && m.inter_node_latency_us);
  EXPECT_NEAR(*m.intra_node_latency_us, 5.0, 5e-3);
  EXPECT_NEAR(*m.inter_node_latency_us, 900.0, 0.9);  // the median of 600 (x3) and 900 (x3)
  // a position it did not measure across nodes gets the inter-node latency
  EXPECT_NEAR(m.latency_s(CollectiveKind::kAllReduce, 1, 8), 900e-6, 1e-9);
}

// The profile, written where `axonn calibrate` writes it, is found by name (`--machine local`).
TEST(PlannerCalibration, LocalProfileFoundByName) {
  const auto dir = std::filesystem::temp_directory_path() / ("axonn_calib_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "local.json") << ap::calibration_profile_json(four_rank_calibration());
  }
  const char* old = std::getenv("AXONN_PROFILE_PATH");
  const std::string saved = old ? old : "";
  ::setenv("AXONN_PROFILE_PATH", dir.c_str(), 1);
  EXPECT_EQ(ap::find_machine_profile_file("local"), (dir / "local.json").string());
  const ap::MachineProfile m = ap::load_machine_profile("local");
  EXPECT_EQ(m.implementation, ap::Implementation::kAxonnCpp);
  EXPECT_FALSE(ap::find_machine_profile_file("no-such-profile").has_value());
  if (old)
    ::setenv("AXONN_PROFILE_PATH", saved.c_str(), 1);
  else
    ::unsetenv("AXONN_PROFILE_PATH");
  std::filesystem::remove_all(dir);
}

TEST(PlannerCalibration, JsonNeedsAMeasuredRate) {
  ap::Calibration c = four_rank_calibration();
  c.gemm_fit = {};
  EXPECT_THROW(ap::calibration_profile_json(c), axonn::InvalidArgument);
  c = four_rank_calibration();
  c.stream_gbs = 0;
  EXPECT_THROW(ap::calibration_profile_json(c), axonn::InvalidArgument);
}

namespace {
std::string parse_error(const std::string& network_extra, const std::string& top_extra = "") {
  const std::string json = R"({"name": "t", "gpus_per_node": 4,)" + top_extra +
                           R"( "gpu": {"memory_gib": 8, "peak_tflops": 1, "gemm_efficiency": 1, "hbm_gbs": 10},
      "network": {"intra_node_gbs": 1, "inter_node_gbs": 1)" +
                           network_extra + "}}";
  try {
    ap::parse_machine_profile(json, "bad.json");
  } catch (const axonn::InvalidArgument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(PlannerCalibration, BadCalibratedFieldsAreNamed) {
  EXPECT_NE(parse_error(R"(, "bandwidth_gbs": [{"op": "broadcast", "ip": 1, "size": 2, "gbs": 1}])")
                .find("network.bandwidth_gbs[0].op' must be \"all-reduce\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"(, "bandwidth_gbs": [{"ip": 1, "size": 2, "gbs": 1, "samples": [[8, 1e-6]]}])")
                .find("bandwidth_gbs[0].samples' needs an \"op\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"(, "bandwidth_gbs": [{"op": "all-reduce", "ip": 1, "size": 2, "gbs": 1,
                                                "samples": [[64, 1e-6], [8, 2e-6]]}])")
                .find("must be sorted by bytes"),
            std::string::npos);
  EXPECT_NE(parse_error(R"(, "bandwidth_gbs": [{"op": "all-reduce", "ip": 1, "size": 2, "gbs": 1,
                                                "samples": [[64, -1]]}])")
                .find("[bytes, seconds] pairs of positive numbers"),
            std::string::npos);
  EXPECT_NE(parse_error(R"(, "bandwidth_gbs": [{"op": "all-reduce", "ip": 1, "size": 2, "gbs": 1, "latency_us": -3}])")
                .find("bandwidth_gbs[0].latency_us' must be >= 0"),
            std::string::npos);
  EXPECT_NE(parse_error("", R"( "implementation": "pytorch",)").find("field 'implementation' must be"),
            std::string::npos);
  EXPECT_EQ(parse_error("", R"( "implementation": "axonn-cpp",)"), "");
}

// A rule restricted to one collective applies to it alone; op-less rules to all (and to the
// op-agnostic lookup that the as-coded variant uses).
TEST(PlannerCalibration, PerCollectiveRules) {
  const auto m = ap::parse_machine_profile(
      R"({"name": "t", "gpus_per_node": 4,
          "gpu": {"memory_gib": 8, "peak_tflops": 1, "gemm_efficiency": 1, "hbm_gbs": 10},
          "network": {"latency_us": 2, "intra_node_gbs": 1, "inter_node_gbs": 1, "bandwidth_gbs": [
            {"op": "reduce-scatter", "ip": 1, "size": 2, "gbs": 3, "latency_us": 9},
            {"ip": 1, "size": 2, "gbs": 7}]}})",
      "t.json");
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(CollectiveKind::kReduceScatter, 1, 2), 3);
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(CollectiveKind::kAllReduce, 1, 2), 7);
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(1, 2), 7);
  EXPECT_DOUBLE_EQ(m.latency_s(CollectiveKind::kReduceScatter, 1, 2), 9e-6);
  EXPECT_DOUBLE_EQ(m.latency_s(CollectiveKind::kAllGather, 1, 2), 2e-6);
  EXPECT_TRUE(m.in_table(1, 2));
  EXPECT_FALSE(m.in_table(2, 2));
}

TEST(PlannerAxonnCpp, SettingsFollowTheProfile) {
  ap::MachineProfile m;
  EXPECT_EQ(ap::settings_for(m).implementation, ap::Implementation::kMegatronAxonn);
  EXPECT_TRUE(ap::settings_for(m).recompute);
  m.implementation = ap::Implementation::kAxonnCpp;
  const ap::CostSettings s = ap::settings_for(m);
  EXPECT_EQ(s.implementation, ap::Implementation::kAxonnCpp);
  EXPECT_FALSE(s.recompute);
  EXPECT_FALSE(s.overlap);
  EXPECT_TRUE(s.regather_in_backward);
  EXPECT_EQ(s.comm_bytes, 4);
  EXPECT_EQ(s.weight_bytes + s.grad_bytes + s.optimizer_bytes, 16);
}

// One rank: no communication; GEMM time = FLOPs / rate + calls × per-call cost, FLOPs as counted
// for the trainer's kernels (linear 3 passes, attention 12·N·T·C, LM head 3 GEMMs).
TEST(PlannerAxonnCpp, OneRankComputeOnly) {
  ap::MachineProfile m = ap::parse_machine_profile(ap::calibration_profile_json(four_rank_calibration()), "l.json");
  const ap::Workload w = small_gpt();
  const auto s = ap::settings_for(m);
  const auto e = ap::estimate(m, w, {1, 1, 1, 1}, s);
  EXPECT_EQ(e.comm_s, 0);
  const double N = 8 * 64, C = 256, L = 4, T = 64, V = 2048, heads = 4;
  const double flops = L * 3 * 2 * N * 12 * C * C + L * 12 * N * T * C + 3 * 2 * N * C * V;
  const double calls = L * 12 + L * 6 * (N / T) * heads + 3;
  EXPECT_NEAR(e.gemm_s, flops / m.gemm_flops_per_s() + calls * m.gemm_call_us * 1e-6, 1e-12);
  EXPECT_GT(e.memory_bound_s, 0);
  EXPECT_DOUBLE_EQ(e.total_s, e.compute_s);
}

// Pure data parallelism: the loss and one all-reduce per parameter tensor over data, nothing else.
// Data parallelism sums the gradients as the model's GradientSync does (src/model/grad_sync.hpp): each
// linear's weight shard over data, layer by layer; over Z*data one packed bucket of the norms and biases
// per block and one for the final norm, and each embedding in place.
TEST(PlannerAxonnCpp, DataParallelSyncsAsTheModelBuckets) {
  ap::MachineProfile m = ap::parse_machine_profile(ap::calibration_profile_json(four_rank_calibration()), "l.json");
  const ap::Workload w = small_gpt();
  const auto e = ap::estimate(m, w, {1, 1, 1, 4}, ap::settings_for(m));
  EXPECT_EQ(e.comm.x + e.comm.y + e.comm.z, 0);
  const double C = 256, L = 4, V = 2048, T = 64;
  auto ar = [&](double bytes) { return *m.measured_seconds(CollectiveKind::kAllReduce, 1, 4, bytes); };
  double want = ar(4);  // the loss
  for (double n : {3 * C * C, C * C, 4 * C * C, 4 * C * C}) want += L * ar(4 * n);  // weight shards per layer
  EXPECT_NEAR(e.comm.data, want, want * 1e-12);
  // Z*data: the final norm's w and b; per block ln1, ln2 (w, b) and the biases (3C, C, 4C, C); wte, wpe
  const double zdata = ar(4 * 2 * C) + L * ar(4 * (4 * C + 9 * C)) + ar(4 * V * C) + ar(4 * T * C);
  EXPECT_NEAR(e.comm.embedding, zdata, zdata * 1e-12);
  EXPECT_DOUBLE_EQ(e.exposed_comm_s, e.comm_s);  // blocking
}

// Tensor parallelism over X issues the LayerNorm statistics and the embedding / LM head traffic of
// docs/parallelism.md; over Y neither LayerNorm nor the hidden gathers.
TEST(PlannerAxonnCpp, TensorParallelCollectives) {
  ap::MachineProfile m = ap::parse_machine_profile(ap::calibration_profile_json(four_rank_calibration()), "l.json");
  const ap::Workload w = small_gpt();
  const auto s = ap::settings_for(m);
  const auto x = ap::estimate(m, w, {4, 1, 1, 1}, s);
  const auto y = ap::estimate(m, w, {1, 4, 1, 1}, s);
  EXPECT_GT(x.comm.x, 0);
  EXPECT_EQ(x.comm.y, 0);
  EXPECT_GT(y.comm.y, 0);
  EXPECT_EQ(y.comm.x, 0);
  const double N = 8 * 64, C = 256, L = 4;
  auto ar = [&](double bytes) { return *m.measured_seconds(CollectiveKind::kAllReduce, 1, 4, bytes); };
  auto ag = [&](double bytes) { return *m.measured_seconds(CollectiveKind::kAllGather, 1, 4, bytes); };
  // X: per layer 4 LayerNorm fwd (N floats) + 2 bwd (2N); QKV/FC1 forward outputs over X (3C, 4C),
  // out-proj/FC2 backward dX over X (C, 4C); + final LayerNorm; + LM head and embedding all-gathers.
  const double layer = 4 * ar(4 * N) + 2 * ar(8 * N) + ar(4 * N * 3 * C) + ar(4 * N * 4 * C) + ar(4 * N * C) +
                       ar(4 * N * 4 * C);
  const double want_x = L * layer + 2 * ar(4 * N) + ar(8 * N) + 2 * ag(4 * N * C);
  EXPECT_NEAR(x.comm.x, want_x, want_x * 1e-12);
  // X·Y: embedding forward and LM head backward rows, cross-entropy max and sums, gradient norm
  const double want_xy = 2 * ar(4 * N * C) + ar(4 * N) + ar(8 * N) + ar(8);
  EXPECT_NEAR(x.comm.embedding, want_xy, want_xy * 1e-12);
  EXPECT_NEAR(y.comm.embedding, want_xy, want_xy * 1e-12);
  // replicated work: attention over X, so the X grid computes more GEMM FLOPs than the Y grid
  EXPECT_GT(x.gemm_s, y.gemm_s);
}

// Z shards weights: per layer and linear, two all-gathers (forward, backward) and a reduce-scatter
// of the Gx·Gy block; the replicated tensors are all-reduced over Z.
// Over Z each linear's weight is gathered before each use unless WeightGather still holds it (the
// backward's first two, the forward's last), and its gradient reduce-scattered once per layer.
TEST(PlannerAxonnCpp, DepthAxisGathersAsTheWeightGatherDoes) {
  ap::MachineProfile m = ap::parse_machine_profile(ap::calibration_profile_json(four_rank_calibration()), "l.json");
  const ap::Workload w = small_gpt();
  const auto z = ap::estimate(m, w, {1, 1, 4, 1}, ap::settings_for(m));
  const double C = 256, L = 4;
  auto ar = [&](double bytes) { return *m.measured_seconds(CollectiveKind::kAllReduce, 1, 4, bytes); };
  auto ag = [&](double bytes) { return *m.measured_seconds(CollectiveKind::kAllGather, 1, 4, bytes); };
  auto rs = [&](double bytes) { return *m.measured_seconds(CollectiveKind::kReduceScatter, 1, 4, bytes); };
  double want = ar(4);  // the loss over Z
  const double blocks[] = {3 * C * C, C * C, 4 * C * C, 4 * C * C};
  for (int k = 0; k < 4; k++) want += (2 * L - (k >= 2 ? 1 : 0)) * ag(4 * blocks[k]) + L * rs(4 * blocks[k]);
  EXPECT_NEAR(z.comm.z, want, want * 1e-12);
}

// `axonn train --grid auto`'s error when no grid is admissible says what to change in its terms.
TEST(PlannerAxonnCpp, NoAdmissibleGridWording) {
  ap::MachineProfile m = ap::parse_machine_profile(ap::calibration_profile_json(four_rank_calibration()), "l.json");
  ap::PlanRequest req;
  req.workload = small_gpt(4);
  req.gpus = 3;
  req.settings = ap::settings_for(m);
  req.unit = "ranks";
  req.advice = "Change mpirun -np";
  try {
    ap::plan(m, req);
    FAIL() << "3 ranks cannot run C=256, 4 heads, B=4";
  } catch (const axonn::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no 4D grid of 3 ranks can run this model and batch"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Change mpirun -np"), std::string::npos) << e.what();
  }
}

// network.sync_us: what a blocking collective costs between computations beyond its own time, once
// per call (written by calibrate, read back, charged per collective).
TEST(PlannerAxonnCpp, SyncCostPerCall) {
  ap::Calibration c = four_rank_calibration();
  const ap::MachineProfile plain = ap::parse_machine_profile(ap::calibration_profile_json(c), "a.json");
  c.sync_us = 250;
  const ap::MachineProfile synced = ap::parse_machine_profile(ap::calibration_profile_json(c), "b.json");
  EXPECT_DOUBLE_EQ(synced.sync_us, 250);
  const ap::Workload w = small_gpt();
  // data parallelism: the loss, 4 weight shards per layer (16), a bucket per block (4), the final
  // norm's bucket, wte and wpe: 24 all-reduces
  const auto a = ap::estimate(plain, w, {1, 1, 1, 4}, ap::settings_for(plain));
  const auto b = ap::estimate(synced, w, {1, 1, 1, 4}, ap::settings_for(synced));
  EXPECT_NEAR(b.comm_s - a.comm_s, 24 * 250e-6, 1e-12);
}

// With the trainer's --overlap (all, its default), OAR, ORS, OAG and the gradient sums hide behind
// the GEMMs as docs/perf-model.md §10 says: the same collectives and compute, less exposed; the
// forward all-reduces and LayerNorm statistics still block. Without overlap everything blocks.
TEST(PlannerAxonnCpp, OverlapHidesTheAsynchronousCollectives) {
  ap::MachineProfile m = ap::parse_machine_profile(ap::calibration_profile_json(four_rank_calibration()), "l.json");
  const ap::Workload w = small_gpt();
  EXPECT_FALSE(ap::settings_for(m, false).overlap);
  EXPECT_TRUE(ap::settings_for(m, true).overlap);
  // (1,4,1,1 has no gradient sums over Z or data: only each linear's OAR under its dW GEMMs can hide)
  for (const ap::GridShape g : {ap::GridShape{1, 1, 1, 4}, ap::GridShape{1, 1, 4, 1}, ap::GridShape{1, 2, 2, 1},
                                ap::GridShape{1, 4, 1, 1}}) {
    const auto none = ap::estimate(m, w, g, ap::settings_for(m, false));
    const auto all = ap::estimate(m, w, g, ap::settings_for(m, true));
    EXPECT_DOUBLE_EQ(none.exposed_comm_s, none.comm_s) << ap::to_string(g);
    EXPECT_DOUBLE_EQ(all.comm_s, none.comm_s) << ap::to_string(g);
    EXPECT_DOUBLE_EQ(all.compute_s, none.compute_s) << ap::to_string(g);
    EXPECT_LT(all.exposed_comm_s, none.exposed_comm_s) << ap::to_string(g);
    EXPECT_GE(all.exposed_comm_s, 0) << ap::to_string(g);
  }
  // pure data parallelism: only the loss all-reduce blocks; the gradient sums hide wherever the
  // backward of the other layers is long enough
  const auto dp = ap::estimate(m, w, {1, 1, 1, 4}, ap::settings_for(m, true));
  const double loss = *m.measured_seconds(CollectiveKind::kAllReduce, 1, 4, 4);
  EXPECT_GE(dp.exposed_comm_s, loss - 1e-15);
}

// The trainer issues what can overlap non-blocking; calibrate times that form apart ("async" rules),
// and the axonn-cpp model prices each collective in the form the trainer issues it: the forward
// all-reduces blocking, the backward dX all-reduce, weight gathers and gradient sums non-blocking.
TEST(PlannerCalibration, NonBlockingFormIsTimedApart) {
  ap::Calibration c = four_rank_calibration();
  const size_t blocking = c.collectives.size();
  for (size_t i = 0; i < blocking; ++i) {  // the same positions, non-blocking: 3x the bandwidth
    ap::CollectiveFit f = c.collectives[i];
    auto fast = ap::fit_collective(f.kind, f.ip, f.size, samples_of(f.kind, f.size, 5.0, 3 * f.gbs));
    fast.async = true;
    c.collectives.push_back(fast);
  }
  const std::string json = ap::calibration_profile_json(c);
  const ap::MachineProfile m = ap::parse_machine_profile(json, "local.json");
  ASSERT_EQ(m.bandwidth_table.size(), 2 * blocking);
  const double M = 1048576;
  const auto slow = m.measured_seconds(CollectiveKind::kAllReduce, 1, 4, M);
  const auto fast = m.measured_seconds(CollectiveKind::kAllReduce, 1, 4, M, true);
  ASSERT_TRUE(slow && fast);
  EXPECT_LT(*fast, *slow / 2);
  EXPECT_NEAR(m.bandwidth_gbs(CollectiveKind::kAllReduce, 1, 4, true), 3 * m.bandwidth_gbs(CollectiveKind::kAllReduce, 1, 4),
              1e-3);
  // the fallbacks stay the blocking ones
  EXPECT_NEAR(m.intra_node_gbs, c.collectives[6].gbs, 1e-3 * c.collectives[6].gbs);
  // a profile without async rules answers the async lookups with its blocking ones
  const ap::MachineProfile old = ap::parse_machine_profile(ap::calibration_profile_json(four_rank_calibration()), "o");
  EXPECT_EQ(*old.measured_seconds(CollectiveKind::kAllReduce, 1, 4, M, true),
            *old.measured_seconds(CollectiveKind::kAllReduce, 1, 4, M));
  // the model: over Y on a 1x4x1x1 grid, forward all-reduces blocking, dX all-reduces non-blocking
  const auto s = ap::settings_for(m);
  const auto with = ap::estimate(m, small_gpt(), {1, 4, 1, 1}, s);
  const auto without = ap::estimate(old, small_gpt(), {1, 4, 1, 1}, s);
  EXPECT_LT(with.comm.y, without.comm.y);
  EXPECT_GT(with.comm.y, without.comm.y / 3);  // the forward all-reduces did not get faster
  // the "async" field must be a boolean with an "op"
  std::string bad = json;
  bad.replace(bad.find("\"async\": true"), 13, "\"async\": 1");
  EXPECT_THROW(ap::parse_machine_profile(bad, "bad.json"), axonn::InvalidArgument);
}

// network.intra_node_overlap / inter_node_overlap: the share of a non-blocking collective that the
// computation running meanwhile covers, by where it runs. Of a collective that can hide, that share
// hides and the rest blocks: share 1 is the model without the field, share 0 the model without
// overlap, and each level's share applies to the collectives on it. Calibrate measures the shares and
// records them (calibration.overlap) without writing them into the network.
TEST(PlannerAxonnCpp, OverlapShareOfEachLevel) {
  ap::Calibration c = four_rank_calibration();
  c.nodes = 2;
  c.ranks_per_node = 2;  // (1,2) groups inside a node, (2,2) and (1,4) across
  c.intra_node_overlap = 0.25;
  c.inter_node_overlap = 0.75;
  const std::string json = ap::calibration_profile_json(c);
  const nlohmann::json doc = nlohmann::json::parse(json);
  EXPECT_EQ(doc["calibration"]["overlap"]["intra_node"], 0.25);
  EXPECT_EQ(doc["calibration"]["overlap"]["inter_node"], 0.75);
  EXPECT_FALSE(doc["network"].contains("intra_node_overlap"));
  const ap::MachineProfile unset = ap::parse_machine_profile(json, "u.json");
  EXPECT_FALSE(unset.intra_node_overlap.has_value());
  EXPECT_EQ(unset.overlap_share(true), 1.0);
  auto with = [&](double intra, double inter) {
    nlohmann::json d = doc;
    d["network"]["intra_node_overlap"] = intra;
    d["network"]["inter_node_overlap"] = inter;
    return ap::parse_machine_profile(d.dump(), "s.json");
  };
  const ap::MachineProfile full = with(1.0, 1.0), none = with(0.0, 0.0), half = with(0.5, 0.5);
  EXPECT_EQ(half.intra_node_overlap, 0.5);
  EXPECT_EQ(half.inter_node_overlap, 0.5);
  const ap::Workload w = small_gpt();
  for (const ap::GridShape g : {ap::GridShape{1, 1, 1, 4}, ap::GridShape{1, 1, 2, 2}, ap::GridShape{1, 2, 2, 1}}) {
    const auto on = ap::settings_for(unset, true), off = ap::settings_for(unset, false);
    const double base = ap::estimate(unset, w, g, on).exposed_comm_s;
    EXPECT_DOUBLE_EQ(ap::estimate(full, w, g, on).exposed_comm_s, base) << ap::to_string(g);
    EXPECT_NEAR(ap::estimate(none, w, g, on).exposed_comm_s, ap::estimate(unset, w, g, off).exposed_comm_s, 1e-12)
        << ap::to_string(g);
    const double mid = ap::estimate(half, w, g, on).exposed_comm_s;
    EXPECT_GT(mid, base) << ap::to_string(g);
    EXPECT_LT(mid, ap::estimate(none, w, g, on).exposed_comm_s) << ap::to_string(g);
    // without overlap the share changes nothing
    EXPECT_DOUBLE_EQ(ap::estimate(none, w, g, off).exposed_comm_s, ap::estimate(unset, w, g, off).exposed_comm_s);
  }
  // 1x1x2x2: Z inside the nodes, data across. Only the intra-node share exposes Z's gathers and
  // reduce-scatters; only the inter-node one the data sums.
  const ap::GridShape zd{1, 1, 2, 2};
  const auto on = ap::settings_for(unset, true);
  const double base = ap::estimate(unset, w, zd, on).exposed_comm_s;
  const double intra_blocks = ap::estimate(with(0.0, 1.0), w, zd, on).exposed_comm_s;
  const double inter_blocks = ap::estimate(with(1.0, 0.0), w, zd, on).exposed_comm_s;
  EXPECT_GT(intra_blocks, base);
  EXPECT_GT(inter_blocks, base);
  EXPECT_NEAR(intra_blocks + inter_blocks - base, ap::estimate(none, w, zd, on).exposed_comm_s,
              1e-9 + 1e-9 * base);  // the two levels' collectives are disjoint here
  // a share is 0 to 1
  EXPECT_THROW(with(1.5, 1.0), axonn::InvalidArgument);
  EXPECT_THROW(with(0.5, -0.1), axonn::InvalidArgument);
}

// The gradient sums over data (and Z·data) run under the rest of the last micro-batch's backward:
// all of the other blocks' backward work, not only their linear layers' GEMMs. A slower memory-bound
// part (the same GEMMs) leaves less of them exposed; without overlap it changes nothing.
TEST(PlannerAxonnCpp, GradientSumsHideUnderTheWholeBackward) {
  ap::Calibration fast = four_rank_calibration();
  for (auto& f : fast.collectives)  // a network slow enough that the sums outlast the backward
    f = ap::fit_collective(f.kind, f.ip, f.size, samples_of(f.kind, f.size, 5.0, f.gbs / 100));
  ap::Calibration slow = fast;
  slow.stream_gbs = fast.stream_gbs / 20;
  const ap::MachineProfile mf = ap::parse_machine_profile(ap::calibration_profile_json(fast), "f.json");
  const ap::MachineProfile ms = ap::parse_machine_profile(ap::calibration_profile_json(slow), "s.json");
  const ap::Workload w = small_gpt();
  const ap::GridShape dp{1, 1, 1, 4};
  const auto a = ap::estimate(mf, w, dp, ap::settings_for(mf, true));
  const auto b = ap::estimate(ms, w, dp, ap::settings_for(ms, true));
  EXPECT_GT(b.memory_bound_s, a.memory_bound_s);
  EXPECT_DOUBLE_EQ(b.gemm_s, a.gemm_s);
  EXPECT_DOUBLE_EQ(b.comm_s, a.comm_s);
  EXPECT_LT(b.exposed_comm_s, a.exposed_comm_s);
  EXPECT_DOUBLE_EQ(ap::estimate(ms, w, dp, ap::settings_for(ms, false)).exposed_comm_s,
                   ap::estimate(mf, w, dp, ap::settings_for(mf, false)).exposed_comm_s);
}
