// report/report.hpp and run_dir.hpp: what a run directory holds, the sources a report reads, and the
// HTML page (self-contained; a chart per metric, what is missing said).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "axonn/core/error.hpp"
#include "axonn/report/report.hpp"
#include "axonn/report/run_contents.hpp"

namespace axonn::report {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "axonn-report-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = path + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
};

template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) n++;
  return n;
}

std::string metrics_text(int steps, bool val = false, bool memory = false) {
  std::string t;
  for (int s = 0; s < steps; s++) {
    t += "{\"step\":" + std::to_string(s) + ",\"loss\":" + std::to_string(6.0 - 0.1 * s) +
         ",\"lr\":0.001,\"grad_norm\":1.5,\"step_ms\":10,\"tokens_per_s\":12800,\"mfu\":0.05";
    if (memory) t += ",\"memory_bytes\":[1048576,2097152]";
    t += "}\n";
    if (val && s % 5 == 4) t += "{\"step\":" + std::to_string(s) + ",\"val_loss\":" + std::to_string(6.1 - 0.1 * s) + "}\n";
  }
  return t;
}

// Two ranks: rank 0's collective lies wholly under compute, rank 1's half of it.
// The chart `id` among `charts`, or null.
const NamedChart* find_chart(const std::vector<NamedChart>& charts, const std::string& id) {
  for (const NamedChart& c : charts)
    if (c.id == id) return &c;
  return nullptr;
}

const char* kTrace = R"({"traceEvents":[
  {"ph":"M","name":"process_name","pid":0,"args":{"name":"rank 0"}},
  {"ph":"X","name":"matmul","cat":"compute","pid":0,"tid":0,"ts":0,"dur":100},
  {"ph":"X","name":"all_reduce","cat":"comm","pid":0,"tid":1,"ts":20,"dur":40,"args":{"track":"x all_reduce"}},
  {"ph":"X","name":"matmul","cat":"compute","pid":1,"tid":0,"ts":0,"dur":50},
  {"ph":"X","name":"all_reduce","cat":"comm","pid":1,"tid":1,"ts":30,"dur":40,"args":{"track":"x all_reduce"}}
 ], "otherData":{"grid":"2x1x1x1","steps":[2,4]}})";

const char* kPlan = R"({"spearman":0.9,"mean_relative_error":0.12,"measured_best_predicted_place":1,
  "grids":[{"grid":"1,1,1,2","measured_s":0.02,"predicted_s":0.018},{"grid":"2,1,1,1","measured_s":0.03,"predicted_s":0.033}]})";

TEST(RunDir, ScanFindsWhatIsThereTraceJsonFirst) {
  TempDir d;
  d.write(train::kMetricsFile, metrics_text(2));
  d.write("trace-b.json", kTrace);
  d.write("trace-a.json", kTrace);
  d.write(train::kTraceFile, kTrace);
  d.write("tracer.txt", "not a trace");
  fs::create_directory(d.path + "/" + train::kCheckpointsDir);
  const train::RunDir dir(d.path);
  const RunDirContents c = scan_run_dir(dir);
  EXPECT_EQ(c.metrics, dir.metrics());
  EXPECT_EQ(c.checkpoints, dir.checkpoints());
  EXPECT_FALSE(c.config);
  EXPECT_FALSE(c.run_info);
  EXPECT_FALSE(c.plan_validate);
  EXPECT_EQ(c.traces, (std::vector<std::string>{dir.trace(), d.path + "/trace-a.json", d.path + "/trace-b.json"}));
  EXPECT_EQ(dir.report(), d.path + "/report.html");
  EXPECT_EQ(dir.loss_png(), d.path + "/loss.png");
}

TEST(RunDir, BadDirectories) {
  EXPECT_NE(error_of([] { scan_run_dir(train::RunDir("/nonexistent-run")); })
                .find("run directory '/nonexistent-run' does not exist"),
            std::string::npos);
  TempDir d;
  const std::string file = d.write("f", "x");
  EXPECT_NE(error_of([&] { scan_run_dir(train::RunDir(file)); }).find("is not a directory"), std::string::npos);
  EXPECT_NE(error_of([] { find_sources("", {}); }).find("nothing to report"), std::string::npos);
}

TEST(Report, ExplicitFilesOverrideTheRunDirectorys) {
  TempDir d;
  d.write(train::kMetricsFile, metrics_text(2));
  const std::string other = d.write("other.jsonl", metrics_text(3));
  ReportSources given;
  given.metrics = other;
  EXPECT_EQ(find_sources(d.path, given).metrics, other);
  EXPECT_EQ(find_sources(d.path, {}).metrics, train::RunDir(d.path).metrics());
  EXPECT_EQ(find_sources("", given).metrics, other);
  EXPECT_TRUE(find_sources("", given).run_dir.empty());
}

TEST(Report, APageFromMetricsOnly) {
  TempDir d;
  d.write(train::kMetricsFile, metrics_text(20));
  const RunData run = load_run(find_sources(d.path, {}));
  const std::string html = report_html(run);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
                      "'unsafe-inline'; img-src data:\">"),
            std::string::npos);
  for (const char* id : {"chart-loss-step", "chart-loss-tokens", "chart-lr", "chart-grad-norm", "chart-step-ms",
                         "chart-tokens-per-s", "chart-mfu"})
    EXPECT_NE(html.find(std::string("<svg id=\"") + id + "\" class=\"chart\""), std::string::npos) << id;
  EXPECT_EQ(count(html, "<svg "), 7u);
  EXPECT_EQ(count(html, "<path class=\"data\" d=\"M"), 7u);
  // what is missing is said where the run can record it; a planner validation, which a training run
  // never writes, is left out, and so is the Goldfish section of a run without the Goldfish loss
  EXPECT_NE(html.find("No per-rank memory:"), std::string::npos);
  EXPECT_NE(html.find("No trace"), std::string::npos);
  EXPECT_EQ(html.find("planner"), std::string::npos);
  EXPECT_EQ(html.find("<section id=\"goldfish\">"), std::string::npos);
  EXPECT_NE(html.find("No config.toml"), std::string::npos);
  EXPECT_GE(count(html, "<td class=\"missing\">missing</td>"), 4u);  // config, run.json, traces, checkpoints, plan
  // self-contained
  for (const char* bad : {"http:", "https:", "src=", "<script", "<link", "url(", "@import", "<img", "<iframe"})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  // the summary: 20 steps, tokens 20 x 128
  EXPECT_NE(html.find("20 (step 1 to 20)"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">2,560</td>"), std::string::npos);  // counts grouped by thousands
  EXPECT_NE(html.find("median MFU</td><td class=\"num\">5.00 %"), std::string::npos);
}

TEST(Report, ValidationMemoryTracesAndThePlanner) {
  TempDir d;
  d.write(train::kMetricsFile, metrics_text(20, true, true));
  d.write(train::kTraceFile, kTrace);
  d.write(train::kPlanValidateFile, kPlan);
  d.write(train::kConfigFile, "[model]\nname = \"gpt2-tiny\" # <tiny>\n");
  d.write(train::kRunInfoFile, R"({"git_commit":"abc123","world_size":2,"grid":{"gx":2}})");
  const RunData run = load_run(find_sources(d.path, {}));
  ASSERT_EQ(run.traces.size(), 1u);
  ASSERT_EQ(run.traces[0].ranks.size(), 2u);
  EXPECT_NEAR(run.traces[0].ranks[0].hidden_fraction, 1.0, 1e-12);
  EXPECT_NEAR(run.traces[0].ranks[1].hidden_fraction, 0.5, 1e-12);
  EXPECT_EQ(run.traces[0].grid, "2x1x1x1");
  EXPECT_EQ(run.traces[0].steps, "2-4");
  ASSERT_TRUE(run.plan);
  EXPECT_EQ(run.plan->grids.size(), 2u);

  const auto charts = report_charts(run);
  auto find = [&](const std::string& id) { return find_chart(charts, id); };
  const NamedChart* loss = find("chart-loss-step");
  ASSERT_TRUE(loss);
  ASSERT_EQ(loss->chart.series.size(), 2u);
  EXPECT_EQ(loss->chart.series[1].name, "validation");
  EXPECT_EQ(loss->chart.series[1].y.size(), 4u);  // only the validation lines: no gaps
  const NamedChart* memory = find("chart-memory");
  ASSERT_TRUE(memory);
  ASSERT_EQ(memory->chart.series.size(), 2u);
  EXPECT_DOUBLE_EQ(memory->chart.series[1].y[0], 2.0);  // MiB
  const NamedChart* overlap = find("chart-overlap-0");
  ASSERT_TRUE(overlap);
  EXPECT_EQ(overlap->chart.categories, (std::vector<std::string>{"rank 0", "rank 1"}));
  EXPECT_NEAR(overlap->chart.series[0].y[0], 100, 1e-9);
  EXPECT_NEAR(overlap->chart.series[0].y[1], 50, 1e-9);
  const NamedChart* plan = find("chart-plan");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->chart.series[0].name, "predicted");
  EXPECT_DOUBLE_EQ(plan->chart.series[0].y[0], 18);
  EXPECT_DOUBLE_EQ(plan->chart.series[1].y[1], 30);

  const std::string html = report_html(run);
  EXPECT_EQ(count(html, "<svg "), 10u);
  EXPECT_NE(html.find("gpt2-tiny&quot; # &lt;tiny&gt;"), std::string::npos);  // the config, escaped
  EXPECT_NE(html.find("<td>git_commit</td><td class=\"num\">abc123</td>"), std::string::npos);
  EXPECT_NE(html.find("Spearman rank correlation 0.900, mean relative error 12.0 %"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">50.0 %</td>"), std::string::npos);  // rank 1's hidden share
  EXPECT_EQ(html.find("No per-rank memory"), std::string::npos);
  EXPECT_EQ(html.find("http:"), std::string::npos);
  EXPECT_EQ(html.find("https:"), std::string::npos);
}

TEST(Report, BadInputsNameTheirFile) {
  TempDir d;
  const std::string m = d.write("m.jsonl", "{\"step\":0}\n{oops\n");
  ReportSources s;
  s.metrics = m;
  EXPECT_NE(error_of([&] { load_run(s); }).find("metrics file '" + m + "', line 2: not valid JSON"), std::string::npos);
  ReportSources t;
  t.traces = {d.write("t.json", "{\"nope\":1}")};
  EXPECT_NE(error_of([&] { load_run(t); }).find("trace file '" + t.traces[0] + "': the trace has no \"traceEvents\""),
            std::string::npos);
  ReportSources p;
  p.plan = d.write("p.json", "{\"spearman\":1}");
  EXPECT_NE(error_of([&] { load_run(p); }).find("has no \"grids\" array"), std::string::npos);
  p.plan = d.write("p2.json", R"({"grids":[{"grid":"1,1,1,1","measured_s":1}]})");
  EXPECT_NE(error_of([&] { load_run(p); }).find("lacks \"grid\", \"measured_s\" or \"predicted_s\""), std::string::npos);
  p.plan = "/nonexistent.json";
  EXPECT_NE(error_of([&] { load_run(p); }).find("cannot read planner validation file '/nonexistent.json'"),
            std::string::npos);
  ReportSources e;
  e.metrics = d.write("empty.jsonl", "");
  EXPECT_NE(error_of([&] { load_run(e); }).find("is empty"), std::string::npos);
}

// The Goldfish loss's curves, the memory per rank by part from run.json, and no communication section
// for a run that communicated nothing (issue 35: a 1-rank run's empty chart).
TEST(Report, GoldfishCurvesMemoryByPartAndNoEmptySections) {
  TempDir d;
  std::string m;
  for (int s = 0; s < 6; s++)
    m += "{\"step\":" + std::to_string(s) + ",\"loss\":" + std::to_string(5.0 - 0.1 * s) +
         ",\"loss_all_tokens\":" + std::to_string(5.1 - 0.1 * s) + ",\"loss_dropped_tokens\":" +
         std::to_string(5.6 - 0.05 * s) + ",\"goldfish_dropped_fraction\":0.25,\"step_ms\":10}\n";
  d.write(train::kMetricsFile, m);
  d.write(train::kRunInfoFile, R"({"world_size":2,"memory_per_rank":[
    {"params":1048576,"grads":1048576,"optimizer":2097152,"activations":3145728,"comm buffers":0},
    {"params":2097152,"grads":2097152,"optimizer":4194304,"activations":3145728,"comm buffers":524288}]})");
  // one rank: its trace has no collective
  d.write(train::kTraceFile, R"({"traceEvents":[
    {"ph":"M","name":"process_name","pid":0,"args":{"name":"rank 0"}},
    {"ph":"X","name":"matmul","cat":"compute","pid":0,"tid":0,"ts":0,"dur":100}]})");
  const RunData run = load_run(find_sources(d.path, {}));
  ASSERT_EQ(run.memory_per_rank.size(), 2u);
  EXPECT_EQ(run.memory_per_rank[1][4].first, "comm buffers");
  const auto charts = report_charts(run);
  auto find = [&](const std::string& id) { return find_chart(charts, id); };
  const NamedChart* goldfish = find("chart-goldfish-loss");
  ASSERT_TRUE(goldfish);
  ASSERT_EQ(goldfish->chart.series.size(), 3u);
  EXPECT_EQ(goldfish->chart.series[2].name, "dropped");
  EXPECT_NEAR(goldfish->chart.series[2].y[0], 5.6, 1e-6);
  const NamedChart* dropped = find("chart-goldfish-dropped");
  ASSERT_TRUE(dropped);
  EXPECT_DOUBLE_EQ(dropped->chart.series[0].y[3], 25.0);  // percent
  const NamedChart* parts = find("chart-memory-parts");
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->chart.categories, (std::vector<std::string>{"rank 0", "rank 1"}));
  ASSERT_EQ(parts->chart.series.size(), 5u);
  EXPECT_EQ(parts->chart.series[2].name, "optimizer");
  EXPECT_DOUBLE_EQ(parts->chart.series[2].y[1], 4.0);  // MiB
  EXPECT_FALSE(find("chart-overlap-0"));  // nothing communicated: no chart of what was hidden
  const std::string html = report_html(run);
  EXPECT_NE(html.find("<section id=\"goldfish\">"), std::string::npos);
  EXPECT_NE(html.find("<section id=\"memory\">"), std::string::npos);
  EXPECT_EQ(html.find("<section id=\"overlap\">"), std::string::npos);
  EXPECT_EQ(html.find("No per-rank memory"), std::string::npos);
}

}  // namespace
}  // namespace axonn::report

