// train/run_dir.hpp — the run directory: where one training run keeps what it makes (docs/report.md).
//
// `axonn train --run-dir DIR` (TrainConfig::run_dir) writes config.toml and run.json before step 1 and by
// default its metrics, trace and checkpoints there; `axonn report DIR` reads it (report/run_contents.hpp).
//
//   RUN_DIR/
//     config.toml          the effective configuration (axonn train --print-config)
//     run.json             git commit, machine, world size, grid, library versions (one JSON object)
//     metrics.jsonl        one JSON object per step (train/trainer.hpp; keys in report/metrics.hpp)
//     trace*.json          Chrome trace events of the traced steps (axonn train --trace); trace.json first
//     checkpoints/         sharded checkpoints (docs/checkpoints.md)
//     plan_validate.json   optional: bench_plan_validate --json (predicted against measured step time)
//     samples.txt          optional: `axonn generate --run-dir RUN_DIR` appends its prompt and samples
//     report.html          written by `axonn report RUN_DIR`
//     loss.png             written by `axonn report RUN_DIR`
//
// Every name is stated here once; writers (the trainer) and readers (the report) take it from here.
//
//   train::RunDir dir("runs/gpt2-tiny");
//   std::ofstream metrics(dir.metrics());
#pragma once

#include <string>
#include <utility>

namespace axonn::train {

inline constexpr const char* kConfigFile = "config.toml";
inline constexpr const char* kRunInfoFile = "run.json";
inline constexpr const char* kMetricsFile = "metrics.jsonl";
inline constexpr const char* kTraceFile = "trace.json";        // what the trainer writes
inline constexpr const char* kTracePrefix = "trace";            // the report reads every trace*.json
inline constexpr const char* kCheckpointsDir = "checkpoints";
inline constexpr const char* kPlanValidateFile = "plan_validate.json";
inline constexpr const char* kSamplesFile = "samples.txt";
inline constexpr const char* kReportFile = "report.html";
inline constexpr const char* kLossPngFile = "loss.png";

// The paths of a run directory's parts (whether they exist or not).
class RunDir {
 public:
  explicit RunDir(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  std::string path(const char* name) const { return root_ + "/" + name; }
  std::string config() const { return path(kConfigFile); }
  std::string run_info() const { return path(kRunInfoFile); }
  std::string metrics() const { return path(kMetricsFile); }
  std::string trace() const { return path(kTraceFile); }
  std::string checkpoints() const { return path(kCheckpointsDir); }
  std::string plan_validate() const { return path(kPlanValidateFile); }
  std::string samples() const { return path(kSamplesFile); }
  std::string report() const { return path(kReportFile); }
  std::string loss_png() const { return path(kLossPngFile); }

 private:
  std::string root_;
};

struct TrainConfig;

// The configuration a run with a run directory (TrainConfig::run_dir) trains with: --metrics, --trace and
// --checkpoint-dir, when empty, are the directory's metrics.jsonl, trace.json and checkpoints/. Without a
// run directory, `c` itself. (train::run applies it; the config file written is `c`, not this, so that
// the same file with another --run-dir writes there.)
TrainConfig with_run_dir_outputs(const TrainConfig& c);

}  // namespace axonn::train
