// train/run_dir.cpp — the run directory (run_dir.hpp, run_dir_write.hpp): its outputs' paths, made and
// checked before the run, and its record of the run (config.toml, run.json) written before step 1.
#include "axonn/train/run_dir.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/host.hpp"
#include "axonn/core/version.hpp"
#include "axonn/data/prepare.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/train/config_file.hpp"
#include "hooks.hpp"
#include "run_dir_write.hpp"

namespace axonn::train {

namespace fs = std::filesystem;

TrainConfig with_run_dir_outputs(const TrainConfig& c) {
  TrainConfig r = c;
  if (c.run_dir.empty()) return r;
  const RunDir dir(c.run_dir);
  if (r.metrics.empty()) r.metrics = dir.metrics();
  if (r.trace.empty()) r.trace = dir.trace();
  if (r.checkpoint_dir.empty()) r.checkpoint_dir = dir.checkpoints();
  return r;
}

namespace detail {

namespace {

std::string compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "GCC " __VERSION__;
#else
  return "unknown";
#endif
}

}  // namespace

void make_run_dir(const std::string& dir) {
  std::error_code ec;
  AXONN_CHECK_IO(!fs::exists(dir, ec) || fs::is_directory(dir, ec), "--run-dir '", dir,
                 "' is a file, not a directory; give the path of a directory (it is made if it does not exist)");
  fs::create_directories(dir, ec);
  AXONN_CHECK_IO(!ec, "cannot make --run-dir '", dir, "': ", ec.message(),
                 "; give a directory this job can write (checked before training, so no step is lost)");
  probe_writable(dir + "/.probe-" + std::to_string(::getpid()), "--run-dir", dir);
}

// What every rank allocates, by part, as the model's arenas reserve it (model::Gpt::memory_need, pure:
// rank 0 counts every rank's without communicating); AdamW's two moments mirror the gradients.
nlohmann::ordered_json memory_per_rank(const Session& s) {
  const parallel::GridShape& g = s.grid().shape();
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (int r = 0; r < g.size(); r++) {
    const model::GptMemory m =
        model::Gpt::memory_need(s.model_config(), g, parallel::grid_coords(g, r), s.micro_batch_size(),
                                s.config().seq_len, s.compute().backend, s.gpt().run_options());
    ranks.push_back({{"params", m.params}, {"grads", m.grads}, {"optimizer", 2 * m.grads},
                     {"activations", m.activations}, {"comm buffers", m.comm_buffers}});
  }
  return ranks;
}

std::string run_info_json(const Session& s) {
  const parallel::GridShape& g = s.grid().shape();
  const nlohmann::ordered_json j = {
      {"axonn", version()},
      {"git_commit", git_commit()},
      {"started", utc_now()},
      {"host", host_name()},
      {"cpu", cpu_model()},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"cpu_threads", kernels::cpu_threads()},
      {"world_size", s.world().size()},
      {"grid", ::axonn::detail::concat(g.gx, ",", g.gy, ",", g.gz, ",", g.gdata)},
      {"grid_degrees", planner::grid_degrees(g.gx, g.gy, g.gz, g.gdata)},  // in TP / FSDP / DP words
      // what was trained, for the report's summary
      {"model", s.model_config().str()},
      {"parameters", s.model_config().num_parameters()},
      {"precision", s.config().dtype},
      {"data", s.config().data.empty() ? "the built-in synthetic corpus" : s.config().data},
      // the tokenizer that prepared the data (prepare's copy, which every checkpoint carries), if any
      {"tokenizer", data::prepared_tokenizer(s.config().data).value_or("")},
      {"batch", ::axonn::detail::concat(s.config().batch_size, " sequences x ", s.config().seq_len, " tokens")},
      // MFU's denominator, fixed at the start: its value and where it came from
      {"mfu_peak", ::axonn::detail::concat(std::round(s.mfu_peak().gflops_per_rank * 10) / 10, " GFLOP/s per rank (",
                                           s.mfu_peak().source, ")")},
      {"memory_per_rank", memory_per_rank(s)},
      {"mpi", comm::mpi_library_version()},
      {"onednn", kernels::onednn_version()},
      {"openblas", kernels::openblas_version()},
      {"tomlplusplus", ::axonn::detail::concat(TOML_LIB_MAJOR, ".", TOML_LIB_MINOR, ".", TOML_LIB_PATCH)},
      {"compiler", compiler()},
  };
  return j.dump(1) + "\n";
}

void write_run_dir(const Session& s, const TrainConfig& as_given) {
  const RunDir dir(as_given.run_dir);
  checkpoint::write_file_atomic(dir.config(), config_toml(as_given));
  checkpoint::write_file_atomic(dir.run_info(), run_info_json(s));
}

}  // namespace detail

}  // namespace axonn::train
