// report/run_contents.hpp — what a run directory holds, as `axonn report` finds it. The directory's layout (its
// files' names, RunDir) is stated once, in train/run_dir.hpp, where axonn train --run-dir writes it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "axonn/train/run_dir.hpp"

namespace axonn::report {

// What a run directory holds now: each part's path if it exists.
struct RunDirContents {
  std::optional<std::string> config, run_info, metrics, plan_validate, checkpoints, samples;
  std::vector<std::string> traces;  // trace.json first, then the other trace*.json by name
};

// Throws IoError if `root` does not exist or is not a directory.
RunDirContents scan_run_dir(const train::RunDir& dir);

}  // namespace axonn::report
