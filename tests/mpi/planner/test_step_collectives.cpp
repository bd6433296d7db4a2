// One source of truth: the planner's list of a step's collectives (planner::model_collectives, derived
// from the model's tensor list) against the collectives a traced training step of the model actually
// issued, for GPT-2 and Llama, on four grids of 4 ranks that use X, Y, Z and data, with micro-batches,
// recompute, the gathered-weight cache, overlap and bf16: every (group, kind, bytes) issued exactly as
// often as the planner says.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/trace.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/planner/step_collectives.hpp"
#include "common/test_models.hpp"
#include "tensor_expect.hpp"

namespace axonn {
namespace {

namespace ap = planner;
using Key = std::tuple<ap::CommGroup, ap::CollectiveKind, int64_t>;  // group, kind, message bytes

struct Case {
  parallel::GridShape grid;
  int micro_batches = 1;
  bool recompute = false, cache = false, bf16 = false;
  const char* overlap = "none";
};

// The trace's track ("z2 all_gather", "z reduce_scatter #2") as the planner's group and kind.
bool parse_track(const std::string& track, ap::CommGroup* g, ap::CollectiveKind* k) {
  const std::string group = track.substr(0, track.find(' '));
  std::string kind = track.substr(track.find(' ') + 1);
  kind = kind.substr(0, kind.find(' '));
  static const std::map<std::string, ap::CommGroup> groups = {
      {"x", ap::CommGroup::kX},       {"y", ap::CommGroup::kY},         {"z", ap::CommGroup::kZ},
      {"z2", ap::CommGroup::kZ},      {"data", ap::CommGroup::kData},   {"xy", ap::CommGroup::kXY},
      {"zdata", ap::CommGroup::kZData}, {"xyz", ap::CommGroup::kXYZ}};
  static const std::map<std::string, ap::CollectiveKind> kinds = {{"all_reduce", ap::CollectiveKind::kAllReduce},
                                                                  {"all_gather", ap::CollectiveKind::kAllGather},
                                                                  {"reduce_scatter", ap::CollectiveKind::kReduceScatter}};
  if (!groups.count(group) || !kinds.count(kind)) return false;
  *g = groups.at(group);
  *k = kinds.at(kind);
  return true;
}

long group_size(ap::CommGroup g, const parallel::GridShape& s) { return axonn::layout::grid_group_size(s, g); }

std::string describe(const Key& k) {
  return std::string(ap::to_string(std::get<0>(k))) + " " +
         (std::get<1>(k) == ap::CollectiveKind::kAllReduce  ? "all-reduce"
          : std::get<1>(k) == ap::CollectiveKind::kAllGather ? "all-gather"
                                                             : "reduce-scatter") +
         " of " + std::to_string(std::get<2>(k)) + " bytes";
}

// Runs one traced step (after an untraced one, so that it is a step like every other) and compares.
void expect_trace_matches_planner(const model::GptConfig& cfg, const Case& k) {
  auto world = comm::world();
  parallel::Grid grid(k.grid, world);
  SCOPED_TRACE(grid.str() + " " + cfg.str());
  const int B = 8, T = 7, B_local = B / (k.grid.gz * k.grid.gdata), micro = B_local / k.micro_batches;
  model::GptRunOptions run;
  run.precision = k.bf16 ? DType::kBF16 : DType::kF32;
  run.overlap = parallel::parse_overlap(k.overlap);
  run.recompute = k.recompute;
  run.cache_gathered_weights = k.cache;
  model::Gpt gpt(cfg, grid, micro, T, kernels::Backend::kCpu, run);
  gpt.init_random(3);
  Trace trace;
  gpt.set_trace(&trace);
  const auto in = test::randint(B * T, cfg.vocab_size, 1), tg = test::randint(B * T, cfg.vocab_size, 2);
  const int64_t first = (static_cast<int64_t>(grid.coords().d) * k.grid.gz + grid.coords().z) * B_local * T;
  for (int step = 0; step < 2; step++) {
    trace.set_recording(step == 1);
    gpt.zero_grad();
    for (int m = 0; m < k.micro_batches; m++) {
      const int64_t at = first + static_cast<int64_t>(m) * micro * T;
      gpt.forward(in.data() + at, tg.data() + at);
      gpt.backward({1.0 / k.micro_batches, m == k.micro_batches - 1});
    }
    gpt.sync_gradients();
    (void)gpt.grad_norm();
    gpt.weights_updated();  // (the optimizer would have run)
  }
  trace.set_recording(false);

  std::map<Key, double> traced, planned;
  for (const Trace::Span& s : trace.spans()) {
    if (s.kind != SpanKind::kComm) continue;
    ap::CommGroup g;
    ap::CollectiveKind kind;
    ASSERT_TRUE(parse_track(s.track, &g, &kind)) << "a collective on an unknown track: " << s.track;
    // an all-gather's span counts what this rank sends; the planner, the gathered message
    const int64_t message = kind == ap::CollectiveKind::kAllGather ? s.bytes * group_size(g, k.grid) : s.bytes;
    traced[{g, kind, message}] += 1;
  }
  ap::StepShape shape;
  shape.tokens = static_cast<double>(micro) * T;
  shape.micro_batches = k.micro_batches;
  shape.recompute = k.recompute;
  shape.cache_gathered_weights = k.cache;
  shape.activation_bytes = k.bf16 ? 2 : 4;
  const ap::GridShape g{k.grid.gx, k.grid.gy, k.grid.gz, k.grid.gdata};
  std::map<Key, std::vector<std::string>> names;
  for (const ap::ModelCollective& c : ap::model_collectives(gpt.spec(), g, shape)) {
    const Key key{c.group, c.kind, static_cast<int64_t>(c.message_bytes)};
    EXPECT_EQ(static_cast<double>(std::get<2>(key)), c.message_bytes) << c.what << ": a fractional message";
    planned[key] += c.calls;
    names[key].push_back(c.what);
  }
  for (const auto& [key, n] : planned) {
    std::string what;
    for (const auto& w : names[key]) what += (what.empty() ? "" : ", ") + w;
    EXPECT_EQ(traced.count(key) ? traced.at(key) : 0.0, n) << describe(key) << " (" << what << ")";
  }
  for (const auto& [key, n] : traced)
    EXPECT_TRUE(planned.count(key)) << "the step issued " << n << " x " << describe(key)
                                    << ", which the planner does not list";
}

const Case kCases[] = {
    {{2, 2, 1, 1}},                                                 // X, Y, X*Y, X*Y*Z
    {{1, 2, 2, 1}, 2, true, false, false, "none"},                  // Y, Z, Z*data; micro-batches, recompute
    {{2, 1, 1, 2}, 1, false, false, true, "all"},                   // X, data; bf16, every overlap
    {{1, 1, 2, 2}, 2, true, true, false, "all"},                    // Z, data; the gathered-weight cache
};

TEST(StepCollectives, PlannerListsWhatATracedGpt2StepIssued) {
  for (const Case& k : kCases) expect_trace_matches_planner(test::tiny_gpt2(), k);
}

TEST(StepCollectives, PlannerListsWhatATracedLlamaStepIssued) {
  for (const Case& k : kCases) expect_trace_matches_planner(test::tiny_llama_gqa(), k);
}

}  // namespace
}  // namespace axonn
