// report/run_dir.hpp — what a run directory (train/run_dir.hpp: its layout, written by axonn train --run-dir)
// holds, as `axonn report` finds it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "axonn/train/run_dir.hpp"

namespace axonn::report {

// the layout's names, stated once in train/run_dir.hpp
using train::kCheckpointsDir;
using train::kConfigFile;
using train::kLossPngFile;
using train::kMetricsFile;
using train::kPlanValidateFile;
using train::kReportFile;
using train::kSamplesFile;
using train::kRunInfoFile;
using train::kTraceFile;
using train::kTracePrefix;
using train::RunDir;

// What a run directory holds now: each part's path if it exists.
struct RunDirContents {
  std::optional<std::string> config, run_info, metrics, plan_validate, checkpoints, samples;
  std::vector<std::string> traces;  // trace.json first, then the other trace*.json by name
};

// Throws IoError if `root` does not exist or is not a directory.
RunDirContents scan_run_dir(const RunDir& dir);

}  // namespace axonn::report
