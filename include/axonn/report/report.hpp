// report/report.hpp — `axonn report`: one self-contained HTML page about a run (docs/report.md).
//
// The page has inline CSS and inline SVG charts only: no script, font, image or stylesheet is
// fetched, and a Content-Security-Policy meta tag (default-src 'none') forbids the browser to fetch
// anything. Charts (each only when its data is there, otherwise the page says what is missing):
// train and validation loss against step and against tokens; learning rate; gradient norm; step
// time; tokens/s; MFU; per-rank memory; per trace, per rank, the share of communication hidden under
// compute (train/trace_summary.hpp); for a planner validation run, predicted against measured step
// time per grid.
//
//   report::ReportSources s = report::find_sources("runs/a", {});   // what the run directory holds
//   report::RunData run = report::load_run(s);                      // parses everything (throws)
//   checkpoint::write_file_atomic("runs/a/report.html", report::report_html(run));
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "axonn/report/chart.hpp"
#include "axonn/report/metrics.hpp"
#include "axonn/train/trace_summary.hpp"

namespace axonn {
class Progress;
}

namespace axonn::report {

// The files a report reads; empty (or no traces) = not there.
struct ReportSources {
  std::string run_dir;  // empty for a report from explicit files only
  std::string config, run_info, metrics, plan, checkpoints, samples;
  std::vector<std::string> traces;
};

// What `run_dir` holds (scan_run_dir; IoError if it is not a directory), each part replaced by the
// explicit file given for it in `given` (its metrics, traces, plan). run_dir may be empty; then only
// the explicit files are read, and at least one must be given (InvalidArgument otherwise).
ReportSources find_sources(const std::string& run_dir, const ReportSources& given);

struct TraceData {
  std::string path;
  std::string grid, steps;                      // the trace's "otherData" (train --trace), if any
  std::vector<train::TraceRankSummary> ranks;   // one per rank
};

struct PlanGrid {
  std::string grid;
  double measured_s = 0, predicted_s = 0;
};
struct PlanData {  // bench_plan_validate --json
  std::string path;
  std::vector<PlanGrid> grids;
  double spearman = 0, mean_relative_error = 0, measured_best_predicted_place = 0;
};
// Throws IoError if the file cannot be read, InvalidArgument naming the file if it is not
// bench_plan_validate's JSON (an object with a "grids" array of {grid, measured_s, predicted_s}).
PlanData read_plan_validate(const std::string& path);

struct RunData {
  ReportSources sources;
  std::vector<MetricsRecord> metrics;                       // empty without a metrics file
  std::string config_text;                                  // config.toml as written
  std::string samples_text;                                 // samples.txt (axonn generate --run-dir), if any
  std::vector<std::pair<std::string, std::string>> run_info;  // run.json's top-level keys and values
  // run.json's "memory_per_rank": each rank's bytes by part ("params", "grads", ...), in rank order
  std::vector<std::vector<std::pair<std::string, double>>> memory_per_rank;
  std::vector<TraceData> traces;
  std::optional<PlanData> plan;
};

// Reads and checks every source (throws on the first bad one, naming it); one tick of `progress` per
// file read.
RunData load_run(const ReportSources& sources, Progress* progress = nullptr);

struct NamedChart {
  std::string id;       // the <svg>'s id: "chart-loss-step", ...
  std::string section;  // "loss", "optimizer", "throughput", "memory", "overlap", "planner"
  Chart chart;
  std::string caption;  // how to read it
};
// Every chart the page shows, in page order (those whose data is there).
std::vector<NamedChart> report_charts(const RunData& run);
// Train (and validation) loss against step: the page's first chart and the PNG. Requires metrics.
Chart loss_chart(const RunData& run);

// The whole page.
std::string report_html(const RunData& run);

}  // namespace axonn::report
