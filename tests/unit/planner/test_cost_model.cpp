// Cost model: the as-coded variant reproduces AxoNN's comm_model.py (spec §5.2, §5.5, §13.1.5);
// the corrected variant's volumes, factors and latency; compute (FLOPs incl. redundant attention,
// spec §3.4, §7.3, §13.1.6) and memory (spec §3.6).
#include <gtest/gtest.h>

#include <cmath>

#include "axonn/core/error.hpp"
#include "axonn/planner/cost_model.hpp"
#include "axonn/planner/planner.hpp"

namespace ap = axonn::planner;

namespace {

// GPT-2's block at hidden size H (the planner's linear layers come from the model's tensor list).
axonn::model::ModelSpec gpt_spec(long H) {
  ap::Workload w;
  w.model = ap::gpt_shape("", 1, H, H / 128, 50304);
  return w.spec();
}


const ap::MachineProfile& perlmutter() {
  static const ap::MachineProfile m = ap::load_machine_profile("perlmutter");
  return m;
}

// model_v2 of comm_model.py (spec §5.2), transcribed operation by operation, with get_bw replaced by
// the profile (whose table equals get_bw on powers of two, see test_machine.cpp).
double spec_model_v2(double B, double S, double K, double H, long gd, long gr, long gc, long gdata,
                     const ap::MachineProfile& m, bool transpose) {
  const double Gd = static_cast<double>(gd), Gr = static_cast<double>(gr), Gc = static_cast<double>(gc),
               Gdata = static_cast<double>(gdata);
  double dp_comm = 4.0 * (Gdata - 1) / Gdata * K * H * H / (Gc * Gr * Gd) * 2 / 1024 / 1024 / 1024;
  double depth_comm = 3.0 / 2 * 2 * (Gd - 1) / Gd * K * H * H / (Gc * Gr) * 2 / 1024 / 1024 / 1024;
  double row_comm, col_comm;
  if (!transpose) {
    row_comm = 2.0 * (Gr - 1) / Gr * (B / Gdata / Gd * S * H / Gc) * 2 / 1024 / 1024 / 1024;
    col_comm = 2.0 * 2 * (Gc - 1) / Gc * (B / Gdata / Gd * S * K * H / Gr) * 2 / 1024 / 1024 / 1024;
  } else {
    row_comm = 2.0 * 2 * (Gr - 1) / Gr * (B / Gdata / Gd * S * K * H / Gc) * 2 / 1024 / 1024 / 1024;
    col_comm = 2.0 * (Gc - 1) / Gc * (B / Gdata / Gd * S * H / Gr) * 2 / 1024 / 1024 / 1024;
  }
  double t = 0;
  long ip = 1;
  if (gc > 1) t += col_comm / m.bandwidth_gbs(ip, gc);
  ip *= gc;
  if (gr > 1) t += row_comm / m.bandwidth_gbs(ip, gr);
  ip *= gr;
  if (gd > 1) t += depth_comm / m.bandwidth_gbs(ip, gd);
  ip *= gd;
  if (gdata > 1) t += dp_comm / m.bandwidth_gbs(ip, gdata);
  return t;
}

ap::CostSettings as_coded() {
  ap::CostSettings s;
  s.variant = ap::ModelVariant::kAsCoded;
  return s;
}

ap::CostSettings corrected_bandwidth_only() {
  ap::CostSettings s;
  s.latency = false;
  s.embedding = false;
  return s;
}

double group_seconds(const std::vector<ap::CollectiveCost>& cs, ap::CommGroup g) {
  double t = 0;
  for (const auto& c : cs)
    if (c.group == g) t += c.seconds;
  return t;
}

const ap::LinearLayer kTypeA{"FC1", 12288, 4 * 12288, false};  // K = 4, normal
const ap::LinearLayer kTypeB{"FC2", 4 * 12288, 12288, true};   // K = 4, transposed

ap::Workload workload(const char* model, long batch, long seq = 2048) {
  ap::Workload w;
  w.model = *ap::find_model(model);
  w.batch_size = batch;
  w.seq_len = seq;
  return w;
}

}  // namespace

// Spec §5.5 / §13.1.5: single layer, Perlmutter, B=512, S=2048, H=12288, K=4,
// (Gz,Gy,Gx,Gdata) = (2,4,2,8): type A 0.0904502 s, type B (as coded) 0.2527858 s.
TEST(PlannerCostModel, AsCodedSingleLayerReference) {
  const ap::GridShape g{/*gx=*/2, /*gy=*/4, /*gz=*/2, /*gdata=*/8};
  const double tokens = 512.0 * 2048;
  double a = ap::total_seconds(ap::linear_layer_collectives(perlmutter(), kTypeA, tokens, 1, g, as_coded()));
  double b = ap::total_seconds(ap::linear_layer_collectives(perlmutter(), kTypeB, tokens, 1, g, as_coded()));
  EXPECT_NEAR(a, 0.0904502, 5e-8);
  EXPECT_NEAR(b, 0.2527858, 5e-8);
  EXPECT_NEAR(a, 0.09045, 5e-6);  // as printed in §5.5
  EXPECT_NEAR(b, 0.25279, 5e-6);
}

// The as-coded variant equals the transcribed formulas on every power-of-two grid of 64 GPUs, for
// all four layer kinds of the block.
TEST(PlannerCostModel, AsCodedEqualsCommModelPyOnAllGrids) {
  const double B = 64, S = 2048, H = 4096;
  int checked = 0;
  for (const auto& g : ap::factorizations(64)) {
    for (const auto& layer : ap::block_linear_layers(gpt_spec(4096))) {
      const double K = static_cast<double>(std::max(layer.in_features, layer.out_features)) / H;
      double want = spec_model_v2(B, S, K, H, g.gz, g.gy, g.gx, g.gdata, perlmutter(), layer.transposed);
      double got = ap::total_seconds(ap::linear_layer_collectives(perlmutter(), layer, B * S, 1, g, as_coded()));
      EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, want)) << ap::to_string(g) << " " << layer.name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 84 * 4);  // 64 = 2^6 has C(6+3, 3) = 84 ordered factorizations
}

// Corrected vs as-coded (spec §5.2 "discrepancy"): the same for normal layers and for out-proj
// (K = 1) up to the unit (AxoNN divides bytes by 2^30 for β in GB/s); for FC2 the forward Y term is
// 4× smaller and the backward X term 4× larger than coded.
TEST(PlannerCostModel, CorrectedFixesOnlyTransposedLayersWithWideInput) {
  const ap::GridShape g{2, 4, 2, 8};
  const double tokens = 512.0 * 2048, unit = 1e9 / (1024.0 * 1024 * 1024);
  for (const auto& layer : ap::block_linear_layers(gpt_spec(12288))) {
    auto coded = ap::linear_layer_collectives(perlmutter(), layer, tokens, 1, g, as_coded());
    auto fixed = ap::linear_layer_collectives(perlmutter(), layer, tokens, 1, g, corrected_bandwidth_only());
    const bool wide_transposed = layer.transposed && layer.in_features > layer.out_features;
    for (auto grp : {ap::CommGroup::kX, ap::CommGroup::kY, ap::CommGroup::kZ, ap::CommGroup::kData}) {
      double ratio = group_seconds(fixed, grp) / group_seconds(coded, grp) * unit;
      double want = 1;
      if (wide_transposed && grp == ap::CommGroup::kY) want = 0.25;
      if (wide_transposed && grp == ap::CommGroup::kX) want = 4;
      EXPECT_NEAR(ratio, want, 1e-12) << layer.name << " group " << ap::to_string(grp);
    }
  }
}

// Corrected volumes from first principles for FC2 (transposed, 4H → H): forward all-reduce over Y of
// the [T, H/Gx] output, twice (recompute); backward all-reduce over X of the [T, 4H/Gy] input grad.
TEST(PlannerCostModel, CorrectedTransposedLayerVolumes) {
  const ap::GridShape g{2, 4, 2, 8};
  const double T = 512.0 * 2048 / (8 * 2), H = 12288;
  auto cs = ap::linear_layer_collectives(perlmutter(), kTypeB, 512.0 * 2048, 1, g, corrected_bandwidth_only());
  ASSERT_EQ(cs.size(), 5u);
  EXPECT_EQ(cs[0].group, ap::CommGroup::kY);
  EXPECT_EQ(cs[0].kind, ap::CollectiveKind::kAllReduce);
  EXPECT_DOUBLE_EQ(cs[0].message_bytes, T * H / 2 * 2);
  EXPECT_DOUBLE_EQ(cs[0].calls, 2);
  EXPECT_EQ(cs[0].ip, 2);
  EXPECT_DOUBLE_EQ(cs[0].bandwidth_gbs, 40);  // β(ip=Gx=2, Gy=4)
  EXPECT_NEAR(cs[0].seconds, 2 * 2 * 0.75 * (T * H / 2 * 2) / 40e9, 1e-15);
  EXPECT_EQ(cs[1].group, ap::CommGroup::kX);
  EXPECT_DOUBLE_EQ(cs[1].message_bytes, T * 4 * H / 4 * 2);
  EXPECT_DOUBLE_EQ(cs[1].calls, 1);
  EXPECT_EQ(cs[1].hiding, ap::Hiding::kUnderDataGrad);
  EXPECT_EQ(cs[2].kind, ap::CollectiveKind::kAllGather);
  EXPECT_DOUBLE_EQ(cs[2].calls, 2);  // forward + recompute; Ŵ saved for backward (SC24)
  EXPECT_EQ(cs[3].kind, ap::CollectiveKind::kReduceScatter);
  EXPECT_EQ(cs[4].group, ap::CommGroup::kData);
  EXPECT_EQ(cs[4].ip, 2 * 4 * 2);
}

TEST(PlannerCostModel, RecomputeRegatherAndMicroBatchFactors) {
  const ap::GridShape g{2, 2, 4, 2};
  const double tokens = 64.0 * 2048;
  auto calls = [&](const ap::CostSettings& s, long micro, ap::CollectiveKind kind, ap::CommGroup grp) {
    for (const auto& c : ap::linear_layer_collectives(perlmutter(), kTypeA, tokens, micro, g, s))
      if (c.kind == kind && c.group == grp) return c.calls;
    return -1.0;
  };
  ap::CostSettings s = corrected_bandwidth_only();
  EXPECT_DOUBLE_EQ(calls(s, 1, ap::CollectiveKind::kAllReduce, ap::CommGroup::kX), 2);
  EXPECT_DOUBLE_EQ(calls(s, 1, ap::CollectiveKind::kAllGather, ap::CommGroup::kZ), 2);
  s.recompute = false;
  EXPECT_DOUBLE_EQ(calls(s, 1, ap::CollectiveKind::kAllReduce, ap::CommGroup::kX), 1);
  EXPECT_DOUBLE_EQ(calls(s, 1, ap::CollectiveKind::kAllGather, ap::CommGroup::kZ), 1);
  s.regather_in_backward = true;
  EXPECT_DOUBLE_EQ(calls(s, 1, ap::CollectiveKind::kAllGather, ap::CommGroup::kZ), 2);
  s.recompute = true;
  EXPECT_DOUBLE_EQ(calls(s, 1, ap::CollectiveKind::kAllGather, ap::CommGroup::kZ), 3);  // develop: 3 AG + 1 RS
  // Micro-batches: activation collectives split the tokens (same bandwidth time), weights are
  // re-gathered and gradients reduce-scattered per micro-batch, the data all-reduce stays once.
  s = corrected_bandwidth_only();
  auto one = ap::linear_layer_collectives(perlmutter(), kTypeA, tokens, 1, g, s);
  auto four = ap::linear_layer_collectives(perlmutter(), kTypeA, tokens, 4, g, s);
  EXPECT_NEAR(group_seconds(four, ap::CommGroup::kX), group_seconds(one, ap::CommGroup::kX), 1e-15);
  EXPECT_NEAR(group_seconds(four, ap::CommGroup::kY), group_seconds(one, ap::CommGroup::kY), 1e-15);
  EXPECT_NEAR(group_seconds(four, ap::CommGroup::kZ), 4 * group_seconds(one, ap::CommGroup::kZ), 1e-15);
  EXPECT_NEAR(group_seconds(four, ap::CommGroup::kData), group_seconds(one, ap::CommGroup::kData), 1e-15);
  // as-coded multiplies only the Z term by grad_acc, like comm_model.py.
  auto coded1 = ap::linear_layer_collectives(perlmutter(), kTypeA, tokens, 1, g, as_coded());
  auto coded4 = ap::linear_layer_collectives(perlmutter(), kTypeA, tokens, 4, g, as_coded());
  EXPECT_NEAR(ap::total_seconds(coded4) - ap::total_seconds(coded1), 3 * group_seconds(coded1, ap::CommGroup::kZ),
              1e-15);
}

TEST(PlannerCostModel, LatencyIsAlphaPerRingStep) {
  const ap::GridShape g{1, 1, 8, 1};
  ap::CostSettings with = corrected_bandwidth_only();
  with.latency = true;
  auto a = ap::linear_layer_collectives(perlmutter(), kTypeA, 8.0 * 2048, 1, g, with);
  auto b = ap::linear_layer_collectives(perlmutter(), kTypeA, 8.0 * 2048, 1, g, corrected_bandwidth_only());
  // 2 all-gathers + 1 reduce-scatter over Z (p = 8): 3 calls × 7 steps × 9 µs.
  EXPECT_NEAR(ap::total_seconds(a) - ap::total_seconds(b), 3 * 7 * 9e-6, 1e-15);
  // as-coded has no latency term.
  auto c = ap::linear_layer_collectives(perlmutter(), kTypeA, 8.0 * 2048, 1, g, as_coded());
  EXPECT_NEAR(ap::total_seconds(c) * (1024.0 * 1024 * 1024) / 1e9, ap::total_seconds(b), 1e-15);
}

// Spec §13.1.2: FC1 of the 80B/175B family (12288 → 49152) with Gx=4, Gy=8, Gz=2: gathered block
// 18,874,368 elements (37.7 MB bf16), shard 9,437,184, all-gather sends (1 − 1/2)·18,874,368.
TEST(PlannerCostModel, ShardSizes) {
  const ap::GridShape g{4, 8, 2, 1};
  auto cs = ap::linear_layer_collectives(perlmutter(), {"FC1", 12288, 49152, false}, 2048.0, 1, g,
                                         corrected_bandwidth_only());
  const ap::CollectiveCost* ag = nullptr;
  for (const auto& c : cs)
    if (c.kind == ap::CollectiveKind::kAllGather) ag = &c;
  ASSERT_NE(ag, nullptr);
  EXPECT_DOUBLE_EQ(ag->message_bytes, 18874368.0 * 2);
  EXPECT_NEAR(ag->message_bytes / 1e6, 37.7, 0.05);
  EXPECT_EQ(ag->ip, 32);
  // One call sends (1 − 1/2) of the block at β(32, 2) = 20 GB/s.
  EXPECT_NEAR(ag->seconds / ag->calls * 20e9 / 2, 0.5 * 18874368, 1e-6);
  // The per-rank shard is what the data-parallel all-reduce carries (fp32).
  cs = ap::linear_layer_collectives(perlmutter(), {"FC1", 12288, 49152, false}, 2048.0, 1, {4, 8, 2, 2},
                                    corrected_bandwidth_only());
  ASSERT_EQ(cs.back().group, ap::CommGroup::kData);
  EXPECT_DOUBLE_EQ(cs.back().message_bytes, 9437184.0 * 4);
}

// Spec §7.3 / §13.1.6: L=42, H=12288, S=2048, V=50304 → 1.289e15 FLOP per sequence per iteration.
TEST(PlannerCostModel, FlopFormula) {
  ap::Workload w = workload("80B", 1);
  EXPECT_NEAR(ap::gpt_hardware_flops(w) / 1e15, 1.289, 5e-4);
  // Model FLOPs drop the recompute pass: 72/96 of the GEMM terms, V/(12LH) for the head.
  const double B = 1, S = 2048, L = 42, H = 12288, V = 50304;
  EXPECT_DOUBLE_EQ(ap::gpt_model_flops(w), 72 * B * S * L * H * H * (1 + S / (6 * H) + V / (12 * L * H)));
  // 12·L·H² of spec §7.2.
  EXPECT_NEAR(12 * L * H * H / 1e9, 76.10, 5e-3);
  EXPECT_DOUBLE_EQ(w.parameters(), L * (12 * H * H + 13 * H) + V * H + S * H + 2 * H);
}

// GEMM work: on one GPU the model's GEMM FLOPs are exactly the hardware FLOP formula; sharding over
// Y, Z and data divides them; X replicates the attention core (spec §3.4), nothing else.
TEST(PlannerCostModel, ComputeCountsRedundantAttention) {
  ap::Workload w = workload("20B", 64);
  const auto& m = perlmutter();
  const double rate = m.peak_tflops * 1e12 * m.gemm_efficiency;
  const ap::CostSettings s;
  auto flops = [&](ap::GridShape g) { return ap::estimate(m, w, g, s).gemm_s * rate * static_cast<double>(g.size()); };
  const double hw = ap::gpt_hardware_flops(w);
  EXPECT_NEAR(flops({1, 1, 1, 1}), hw, 1e-9 * hw);
  EXPECT_NEAR(flops({1, 4, 2, 8}), hw, 1e-9 * hw);
  const double S = 2048, L = 32, H = 7168, B = 64;
  const double attention = 16 * B * S * S * L * H;  // 4 passes × 4·B·S²·H per layer
  EXPECT_NEAR(flops({2, 1, 1, 1}), hw + attention, 1e-9 * hw);
  EXPECT_NEAR(flops({4, 2, 2, 1}), hw + 3 * attention, 1e-9 * hw);
}

TEST(PlannerCostModel, OverlapHidesOnlyWhatTheScheduleAllows) {
  ap::Workload w = workload("20B", 512);
  const ap::GridShape g{2, 2, 16, 4};
  ap::CostSettings on, off;
  off.overlap = false;
  auto a = ap::estimate(perlmutter(), w, g, on);
  auto b = ap::estimate(perlmutter(), w, g, off);
  EXPECT_DOUBLE_EQ(a.comm_s, b.comm_s);
  EXPECT_DOUBLE_EQ(b.exposed_comm_s, b.comm_s);
  EXPECT_LT(a.exposed_comm_s, a.comm_s);
  // Blocking collectives are never hidden: forward all-reduces (X for QKV/FC1, Y for out-proj/FC2),
  // the data all-reduce and the embedding syncs.
  double blocking = a.comm.data + a.comm.embedding;
  for (const auto& layer : ap::block_linear_layers(w.spec()))
    for (const auto& c : ap::linear_layer_collectives(perlmutter(), layer, w.tokens(), 1, g, on))
      if (c.hiding == ap::Hiding::kNone && c.group != ap::CommGroup::kData)
        blocking += static_cast<double>(w.model.layers()) * c.seconds;
  EXPECT_GE(a.exposed_comm_s, blocking * (1 - 1e-12));
  EXPECT_DOUBLE_EQ(a.total_s, a.compute_s + a.exposed_comm_s);
  EXPECT_DOUBLE_EQ(a.compute_s, a.gemm_s + a.memory_bound_s);
  EXPECT_NEAR(a.mfu, ap::gpt_model_flops(w) / (a.total_s * 256 * 312e12), 1e-12);
}

TEST(PlannerCostModel, EmbeddingTermOnlyInCorrectedVariant) {
  ap::Workload w = workload("5B", 64);
  const ap::GridShape g{2, 2, 2, 2};
  auto corrected = ap::estimate(perlmutter(), w, g, ap::CostSettings{});
  auto coded = ap::estimate(perlmutter(), w, g, as_coded());
  EXPECT_GT(corrected.comm.embedding, 0);
  EXPECT_EQ(coded.comm.embedding, 0);
  EXPECT_TRUE(ap::embedding_collectives(perlmutter(), w, {1, 1, 1, 1}, ap::CostSettings{}).empty());
  // Z·data all-reduce of the replicated parameters: vocab-parallel embedding V·H/(Gx·Gy) + S·H
  // position embedding + norms and biases, in fp32.
  for (const auto& c : ap::embedding_collectives(perlmutter(), w, g, ap::CostSettings{})) {
    if (c.group != ap::CommGroup::kZData) continue;
    const double H = 4096, L = 24;
    const double params = 50304 * H / 4 + 2048 * H + L * (4 * H / 2 + 7 * H / 2 + 2 * H / 2) + 2 * H / 2;
    EXPECT_DOUBLE_EQ(c.message_bytes, 4 * params);
    EXPECT_EQ(c.ip, 4);
    EXPECT_EQ(c.group_size, 4);
  }
}

TEST(PlannerCostModel, MemoryModel) {
  ap::Workload w = workload("20B", 512);
  ap::CostSettings s;
  const double H = 7168, L = 32, V = 50304, S = 2048;
  auto mem = ap::estimate_memory(w, {2, 4, 8, 4}, s);
  // Local parameters: TP weights 12·H²·L/(Gx·Gy·Gz), norms/biases, embedding V·H/(Gx·Gy) + S·H.
  const double params = 12 * H * H * L / 64 + L * (4 * H / 2 + 7 * H / 4 + 2 * H / 2) + 2 * H / 2 + V * H / 8 + S * H;
  EXPECT_DOUBLE_EQ(mem.weights, 2 * params);
  EXPECT_DOUBLE_EQ(mem.grads, 4 * params);
  EXPECT_DOUBLE_EQ(mem.optimizer, 12 * params);
  // Activations with recompute: each layer's input [T, H/Gx] + 2 layers' working set.
  const double T = 512 * S / 32;
  const double layer = 2 * T * (4 * H / 2 + 12 * H / 4) + 4 * T * 56 / 4;
  EXPECT_DOUBLE_EQ(mem.activations, L * 2 * T * H / 2 + 2 * layer);
  EXPECT_DOUBLE_EQ(mem.logits, 4 * T * V / 8);
  EXPECT_DOUBLE_EQ(mem.gathered_weights, 3 * 2 * (4 * H * H / 8));  // FC1/FC2 block, ×(use, prefetch, dW)
  s.recompute = false;
  auto full = ap::estimate_memory(w, {2, 4, 8, 4}, s);
  EXPECT_DOUBLE_EQ(full.activations, (L + 1) * layer);
  EXPECT_GT(full.activations, mem.activations);
  // Without Z sharding there is nothing to gather: only the dW block.
  EXPECT_DOUBLE_EQ(ap::estimate_memory(w, {2, 4, 1, 32}, ap::CostSettings{}).gathered_weights, 2 * (4 * H * H / 8));
}

// The launcher's minimum tensor-parallel degrees (spec §3.6, A100-40GB) are feasible in the memory
// model: with one 2048-token sequence per rank, some grid with Gx·Gy·Gz = min_tp fits; for 80B
// nothing at min_tp/2 does (its weights and optimizer state alone exceed 36 GiB).
TEST(PlannerCostModel, MemoryAgreesWithAxonnMinTp) {
  auto fits = [](ap::Workload w, const ap::GridShape& g) {
    w.batch_size = g.gz;
    return !ap::inadmissible_reason(w, g, 1) && ap::estimate(perlmutter(), w, g, ap::CostSettings{}).fits;
  };
  for (const char* name : {"5B", "10B", "20B", "40B", "50B", "60B", "80B", "100B", "160B", "175B"}) {
    ap::Workload w = workload(name, 1);
    bool any = false;
    for (const auto& g : ap::factorizations(w.model.min_tp)) any = any || (g.gdata == 1 && fits(w, g));
    EXPECT_TRUE(any) << name << " fits no grid at its min_tp " << w.model.min_tp;
  }
  for (const auto& g : ap::factorizations(32)) EXPECT_FALSE(fits(workload("80B", 1), g)) << ap::to_string(g);
}

TEST(PlannerCostModel, InadmissibleGridIsRejected) {
  ap::Workload w = workload("20B", 512);
  EXPECT_THROW(ap::estimate(perlmutter(), w, {3, 1, 1, 1}, ap::CostSettings{}), axonn::InvalidArgument);
  EXPECT_THROW(ap::parse_model_variant("approximate"), axonn::InvalidArgument);
  EXPECT_EQ(ap::parse_model_variant("as-coded"), ap::ModelVariant::kAsCoded);
  EXPECT_EQ(ap::to_string(ap::ModelVariant::kCorrected), "corrected");
}
