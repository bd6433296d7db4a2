#include "axonn/report/run_contents.hpp"

#include <algorithm>
#include <filesystem>

#include "axonn/core/error.hpp"

namespace axonn::report {

RunDirContents scan_run_dir(const train::RunDir& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  AXONN_CHECK_IO(fs::exists(dir.root(), ec), "run directory '", dir.root(),
                 "' does not exist; give the directory of a run (or the files: --metrics, --trace, --plan)");
  AXONN_CHECK_IO(fs::is_directory(dir.root(), ec), "'", dir.root(), "' is not a directory; give a run directory");
  RunDirContents c;
  auto file = [&](const std::string& p) -> std::optional<std::string> {
    return fs::is_regular_file(p, ec) ? std::optional(p) : std::nullopt;
  };
  c.config = file(dir.config());
  c.run_info = file(dir.run_info());
  c.metrics = file(dir.metrics());
  c.plan_validate = file(dir.plan_validate());
  c.samples = file(dir.samples());
  if (fs::is_directory(dir.checkpoints(), ec)) c.checkpoints = dir.checkpoints();
  for (const fs::directory_entry& e : fs::directory_iterator(dir.root(), ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && name.starts_with(train::kTracePrefix) && name.ends_with(".json"))
      c.traces.push_back(dir.path(name.c_str()));
  }
  AXONN_CHECK_IO(!ec, "cannot list run directory '", dir.root(), "': ", ec.message());
  // trace.json first, then by name
  std::sort(c.traces.begin(), c.traces.end(), [&](const std::string& a, const std::string& b) {
    const bool a_main = a == dir.trace(), b_main = b == dir.trace();
    return a_main != b_main ? a_main : a < b;
  });
  return c;
}

}  // namespace axonn::report
