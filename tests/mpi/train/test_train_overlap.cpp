// `axonn train`'s overlap features through train::train: the timeline trace of every grid of this
// world (one process per rank, the expected communication tracks, spans that nest per track, the
// summary consistent with the spans; no communication hidden without overlap, some hidden with it);
// micro-batches equal to the full batch; --overlap settings identical to none; bad flag
// combinations refused with a message that says what to change.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/train/trace_summary.hpp"
#include "axonn/train/trainer.hpp"
#include "common/grid_shapes.hpp"

namespace axonn {
namespace {

train::TrainConfig small(const std::string& grid) {
  train::TrainConfig c;
  c.model = "gpt2-tiny";
  c.seq_len = 16;
  c.batch_size = 8;
  c.steps = 4;
  c.synthetic_tokens = 20000;
  c.peak_gflops = 100;
  c.quiet = true;
  c.grid = grid;
  return c;
}

// A few grids of this world that exercise each axis (gpt2-tiny: C=64, 4 heads).
std::vector<parallel::GridShape> grids_of(int n) {
  if (n == 1) return {{1, 1, 1, 1}};
  if (n == 2) return {{2, 1, 1, 1}, {1, 2, 1, 1}, {1, 1, 2, 1}, {1, 1, 1, 2}};
  if (n == 4) return {{2, 2, 1, 1}, {1, 2, 2, 1}, {2, 1, 1, 2}, {1, 1, 2, 2}};
  return {{2, 2, 2, n / 8}};
}

std::string temp_path(const char* what) {
  auto world = comm::world();
  int32_t id = world->rank() == 0 ? static_cast<int32_t>(getpid()) : 0;
  world->broadcast(&id, 1, DType::kI32, 0);  // every rank names the same file
  return "/tmp/axonn-test-" + std::string(what) + "-" + std::to_string(id) + ".json";
}

std::vector<float> losses(const std::vector<train::StepMetrics>& h) {
  std::vector<float> v;
  for (const auto& m : h) v.push_back(m.loss);
  return v;
}

// Union length of intervals, in ms (an independent check of the summary).
double union_ms(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  double total = 0, lo = 0, hi = -1;
  for (auto [a, b] : v) {
    if (a > hi) {
      if (hi > lo) total += hi - lo;
      lo = a;
      hi = b;
    } else {
      hi = std::max(hi, b);
    }
  }
  if (hi > lo) total += hi - lo;
  return total * 1e-3;
}

void check_trace(const std::string& path, const parallel::GridShape& g, int world_size, bool overlapped) {
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << path;
  std::stringstream text;
  text << f.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << "the trace is not JSON";
  ASSERT_TRUE(doc.contains("traceEvents") && doc["traceEvents"].is_array());
  EXPECT_EQ(doc["otherData"]["grid"], g.str());

  std::map<int, std::set<std::string>> tracks;  // pid -> thread names
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;  // (pid, tid) -> spans
  std::map<int, std::vector<std::pair<double, double>>> comm;
  std::set<int> pids;
  for (const auto& e : doc["traceEvents"]) {
    const int pid = e["pid"];
    pids.insert(pid);
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks[pid].insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    const double ts = e["ts"], dur = e["dur"];
    EXPECT_GE(ts, 0.0);
    EXPECT_GE(dur, 0.0);
    const int step = e["args"]["step"];
    EXPECT_TRUE(step == 2 || step == 3) << "a span of step " << step << " outside --trace-steps 2:3";
    spans[{pid, e["tid"].get<int>()}].push_back({ts, ts + dur});
    if (e["cat"] == "comm") comm[pid].push_back({ts, ts + dur});
  }
  EXPECT_EQ(static_cast<int>(pids.size()), world_size) << "one process per rank";
  // the tracks of the grid's collectives
  std::vector<std::string> want = {"compute"};
  if (g.gx > 1) want.push_back("x all_reduce");
  if (g.gy > 1) want.push_back("y all_reduce");
  if (g.gz > 1) {
    want.push_back("z2 all_gather");
    want.push_back("z reduce_scatter");
  }
  if (g.gdata > 1) want.push_back("data all_reduce");
  if (g.gz * g.gdata > 1) want.push_back("zdata all_reduce");
  for (int pid : pids)
    for (const std::string& t : want) EXPECT_TRUE(tracks[pid].count(t)) << "rank " << pid << " lacks track " << t;
  // every thread's complete events nest (Chrome's format): each starts after the last open one ends, or inside it
  for (auto& [key, v] : spans) {
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<double> open;
    int bad = 0;
    for (auto [a, b] : v) {
      while (!open.empty() && open.back() <= a) open.pop_back();
      if (!open.empty() && b > open.back() + 1e-3 && bad++ < 2)
        ADD_FAILURE() << "rank " << key.first << " tid " << key.second << ": span [" << a << ", " << b
                      << "] crosses the end of its enclosing span " << open.back();
      open.push_back(b);
    }
  }
  // the summary: one line per rank, consistent with the spans
  const auto summary = train::summarize_trace_file(path);
  ASSERT_EQ(static_cast<int>(summary.size()), world_size);
  for (const auto& r : summary) {
    SCOPED_TRACE("rank " + std::to_string(r.pid));
    const double eps = 1e-6;
    EXPECT_GT(r.wall_ms, 0.0);
    EXPECT_GT(r.compute_ms, 0.0);
    EXPECT_LE(r.compute_ms, r.wall_ms + eps);
    EXPECT_LE(r.comm_ms, r.wall_ms + eps);
    EXPECT_LE(r.hidden_ms, std::min(r.compute_ms, r.comm_ms) + eps);
    EXPECT_NEAR(r.exposed_ms, r.comm_ms - r.hidden_ms, eps);
    EXPECT_LE(r.compute_ms + r.exposed_ms, r.wall_ms + eps) << "compute and exposed communication are disjoint";
    EXPECT_GE(r.hidden_fraction, 0.0);
    EXPECT_LE(r.hidden_fraction, 1.0);
    EXPECT_NEAR(r.comm_ms, union_ms(comm[r.pid]), 1e-6);
    double largest_track = 0, tracks_total = 0;
    for (const auto& [t, ms] : r.comm_ms_by_track) {
      largest_track = std::max(largest_track, ms);
      tracks_total += ms;
    }
    EXPECT_LE(largest_track, r.comm_ms + eps);
    EXPECT_GE(tracks_total, r.comm_ms - eps);
    EXPECT_EQ(r.comm_ms > 0.0, world_size > 1);
    if (!overlapped) {
      EXPECT_LT(r.hidden_fraction, 0.02) << "nothing overlaps with --overlap none";
    }
  }
  // with overlap, the backward's dx all-reduces (X or Y) run under the dW GEMMs: some is hidden
  if (overlapped && g.gx * g.gy > 1) {
    double hidden = 0;
    for (const auto& r : summary) hidden += r.hidden_ms;
    EXPECT_GT(hidden, 0.0);
  }
}

}  // namespace

TEST(TrainOverlap, TraceOfEveryGridAndItsSummary) {
  auto world = comm::world();
  const std::string path = temp_path("trace");
  for (const parallel::GridShape& g : grids_of(world->size())) {
    for (const char* overlap : {"none", "all"}) {
      SCOPED_TRACE(g.str() + std::string(", overlap ") + overlap);
      train::TrainConfig c = small(test::grid_text(g));
      c.overlap = overlap;
      c.trace = path;
      c.trace_steps = "2:3";
      c.overwrite = true;  // each grid's run replaces the previous one's trace
      const auto traced = losses(train::train(c, world));
      world->barrier();
      check_trace(path, g, world->size(), std::string(overlap) == "all");
      world->barrier();
      if (std::string(overlap) == "all") {
        // tracing changes nothing either
        c.trace.clear();
        c.trace_steps.clear();
        c.overlap = "none";
        EXPECT_EQ(losses(train::train(c, world)), traced);
      }
    }
  }
  if (world->rank() == 0) std::remove(path.c_str());
}

TEST(TrainOverlap, MicroBatchesRecomputeAndCacheThroughTheTrainer) {
  auto world = comm::world();
  const int n = world->size();
  const parallel::GridShape g = n == 1 ? parallel::GridShape{1, 1, 1, 1} : parallel::GridShape{1, 1, 2, n / 2};
  train::TrainConfig c = small(test::grid_text(g));
  c.steps = 6;
  const auto full = losses(train::train(c, world));
  c.micro_batch_size = 1;
  const auto micro = losses(train::train(c, world));
  c.overlap = "none";
  c.recompute = true;
  c.cache_gathered_weights = g.gz > 1;
  const auto micro_plain = losses(train::train(c, world));
  ASSERT_EQ(full.size(), micro.size());
  for (size_t i = 0; i < full.size(); i++) EXPECT_NEAR(micro[i], full[i], 2e-5 * full[i]) << "step " << i;
  EXPECT_EQ(micro, micro_plain) << "overlap all vs none with micro-batches, recompute and cache";
}

TEST(TrainOverlap, BadCombinationsAreRefused) {
  auto world = comm::world();
  auto refused = [&](train::TrainConfig c, const std::string& message) {
    try {
      train::train(c, world);
      ADD_FAILURE() << "no error, expected: " << message;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  const std::string grid = "1,1,1," + std::to_string(world->size());
  train::TrainConfig c = small(grid);
  c.overlap = "oar,fast";
  refused(c, "'fast' is none of them");
  c = small(grid);
  c.micro_batch_size = 3;
  refused(c, "--micro-batch-size 3 does not divide the");
  c = small(grid);
  c.micro_batch_size = -1;
  refused(c, "--micro-batch-size must be >= 0");
  c = small(grid);
  c.cache_gathered_weights = true;
  refused(c, "--cache-gathered-weights keeps the weights all-gathered over Z, but Gz = 1");
  c = small(grid);
  c.trace_steps = "2:3";
  refused(c, "--trace-steps chooses the steps written by --trace; give --trace FILE too");
  c = small(grid);
  c.trace = "/tmp/unused-trace.json";
  c.trace_steps = "3:9";
  refused(c, "--trace-steps wants A:B or A with 1 <= A <= B <= --steps (4), got '3:9'");
  c.trace_steps = "0";
  refused(c, "got '0'");
  c.trace_steps = "2:1";
  refused(c, "got '2:1'");
  c = small(grid);
  c.reduce_scatter_slots = 0;
  refused(c, "--reduce-scatter-slots must be >= 1");
  c = small(grid);
  c.trace = "/nonexistent-dir/trace.json";
  EXPECT_THROW(train::train(c, world), IoError);
  EXPECT_EQ(train::parse_trace_steps("", 10), (std::pair{2, 4}));
  EXPECT_EQ(train::parse_trace_steps("", 3), (std::pair{2, 3}));
  EXPECT_EQ(train::parse_trace_steps("", 1), (std::pair{1, 1}));
  EXPECT_EQ(train::parse_trace_steps("5", 10), (std::pair{5, 5}));
  EXPECT_EQ(train::parse_trace_steps("3:7", 10), (std::pair{3, 7}));
  EXPECT_THROW(train::summarize_trace("not json"), InvalidArgument);
  EXPECT_THROW(train::summarize_trace("{\"other\": 1}"), InvalidArgument);
  // fields of the wrong type are the trace's fault too (found by fuzz_trace_summary: nlohmann's type_error
  // escaped)
  EXPECT_THROW(train::summarize_trace(R"([{"ph": "X", "pid": "zero", "ts": 1, "dur": 1}])"), InvalidArgument);
  EXPECT_THROW(train::summarize_trace(R"([{"ph": "X", "pid": 0, "ts": 1, "dur": "long"}])"), InvalidArgument);
  EXPECT_THROW(train::summarize_trace(R"([{"ph": "M", "pid": 0, "name": 7}])"), InvalidArgument);
  // a pid no int can hold, or not a whole number (fuzz_trace_summary's finding: converting 6.7e86 to int was
  // undefined behaviour), is refused
  EXPECT_THROW(
      train::summarize_trace(R"([{"ph": "X", "pid": 6666666626699919999999999999999999999, "ts": 1, "dur": 1}])"),
      InvalidArgument);
  EXPECT_THROW(train::summarize_trace(R"([{"ph": "X", "pid": 4294967296, "ts": 1, "dur": 1}])"), InvalidArgument);
  EXPECT_THROW(train::summarize_trace(R"([{"ph": "X", "pid": 1.5, "ts": 1, "dur": 1}])"), InvalidArgument);
  EXPECT_THROW(train::summarize_trace_file("/nonexistent.json"), IoError);
}

}  // namespace axonn
