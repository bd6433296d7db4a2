// train/hooks.cpp — the loop's built-in hooks (hooks.hpp).
#include "hooks.hpp"

#include <cmath>
#include <filesystem>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/llmc.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/parallel/overlap.hpp"

namespace axonn::train::detail {

namespace fs = std::filesystem;

namespace {

// Slurm's default KillWait: the seconds between SIGTERM and SIGKILL.
constexpr double kKillWaitSeconds = 30;
// What the stop-time estimate assumes of the disk (docs/checkpoints.md measured 190-850 MiB/s here).
constexpr double kAssumedDiskMiBs = 200;


// Rank 0 opens the trace file now, so that an unwritable path fails every rank at the start.
void check_trace_writable(const std::string& path, comm::Communicator& world) {
  int32_t bad = 0;
  if (world.rank() == 0) bad = std::ofstream(path, std::ios::trunc).good() ? 0 : 1;
  world.all_reduce(&bad, 1, DType::kI32, comm::ReduceOp::kMax);  // over world
  AXONN_CHECK_IO(!bad, "cannot write trace file '", path, "'");
}

// Every rank's trace events to rank 0, which writes one Chrome trace-event file: one process per
// rank (pid = world rank), its tracks as threads. Collective over world.
void write_trace(const std::string& path, const Trace& trace, const parallel::Grid& grid, const std::string& meta,
                 comm::Communicator& world) {
  // a common time origin: the earliest span of any rank
  const double mine = trace.earliest_us();
  int64_t neg_origin_ns = std::isfinite(mine) ? -static_cast<int64_t>(mine * 1e3) : INT64_MIN;
  world.all_reduce(&neg_origin_ns, 1, DType::kI64, comm::ReduceOp::kMax);  // over world
  const double origin_us = static_cast<double>(-neg_origin_ns) * 1e-3;
  const parallel::GridCoords& at = grid.coords();
  const std::string label = ::axonn::detail::concat("rank ", world.rank(), " (x,y,z,d)=(", at.x, ",", at.y, ",", at.z, ",", at.d, ")");
  std::string events = trace.chrome_events(world.rank(), label, origin_us);
  // gather the texts as 32-bit words
  events.resize((events.size() + 3) / 4 * 4, ' ');
  std::vector<int64_t> words(static_cast<size_t>(world.size()));
  const int64_t n = static_cast<int64_t>(events.size() / 4);
  world.all_gather(&n, words.data(), 1, DType::kI64);  // over world
  std::vector<size_t> counts(words.begin(), words.end());
  size_t total = 0;
  for (size_t w : counts) total += w;
  std::string all(total * 4, ' ');
  world.all_gather_v(events.data(), static_cast<size_t>(n), all.data(), counts, DType::kI32);  // over world
  if (world.rank() != 0) return;
  std::ofstream f(path, std::ios::trunc);
  f << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << meta << ",\"traceEvents\":[\n";
  size_t at_word = 0;
  bool first = true;
  for (size_t r = 0; r < counts.size(); r++) {
    std::string part = all.substr(at_word * 4, counts[r] * 4);
    at_word += counts[r];
    while (!part.empty() && part.back() == ' ') part.pop_back();
    if (part.empty()) continue;
    f << (first ? "" : ",\n") << part;
    first = false;
  }
  f << "\n]}\n";
  AXONN_CHECK_IO(f.good(), "cannot write trace file '", path, "'");
}

// A resumed run continues its metrics file: the lines of steps before `first_step` stay, those of
// the steps it runs again (trained after the checkpoint, before the run stopped) go, so that every
// step appears once. The file is rewritten whole (a temporary renamed over it).
void continue_metrics(const std::string& path, int first_step) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  std::ifstream in(path);
  AXONN_CHECK_IO(in.good(), "cannot read metrics file '", path, "' to continue it");
  std::string kept, line;
  int64_t dropped = 0, lines = 0;
  while (std::getline(in, line)) {
    lines++;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() < first_step)
      kept += line + "\n";
    else
      dropped++;
  }
  AXONN_CHECK_IO(!in.bad(), "cannot read metrics file '", path, "' to continue it");
  checkpoint::write_file_atomic(path, kept);
  log_info("metrics   %s continues after step %d: %lld line%s kept, %lld dropped (steps run again, or unreadable)",
           path.c_str(), first_step, static_cast<long long>(lines - dropped), lines - dropped == 1 ? "" : "s",
           static_cast<long long>(dropped));
}

}  // namespace

// --- trace ---------------------------------------------------------------------------------------

TraceHook::TraceHook(Session& s, Trace* trace)
    : trace_(trace), window_(parse_trace_steps(s.config().trace_steps, s.config().steps)) {
  check_trace_writable(s.config().trace, s.world());
  s.gpt().set_trace(trace_);
  if (window_.second <= s.first_step())
    log_warn("--trace-steps %d:%d lie before the resumed step %d: no trace is written", window_.first, window_.second,
             s.first_step() + 1);
}

void TraceHook::before_step(Session& s, int step) {
  (void)s;
  trace_->set_step(step + 1);
  trace_->set_recording(step + 1 >= window_.first && step + 1 <= window_.second);
}

void TraceHook::after_step(Session& s, StepMetrics& m) {
  trace_->set_recording(false);
  if (m.step + 1 != window_.second) return;
  const TrainConfig& c = s.config();
  const std::string meta = nlohmann::json({{"grid", s.grid().shape().str()},
                                           {"overlap", parallel::overlap_name(s.gpt().run_options().overlap)},
                                           {"micro_batch_size", s.micro_batch_size()},
                                           {"micro_batches", s.micro_batches()},
                                           {"recompute", c.recompute},
                                           {"cache_gathered_weights", c.cache_gathered_weights},
                                           {"steps", {window_.first, window_.second}},
                                           {"launch", nlohmann::json::parse(s.launch().json())}})
                               .dump();
  write_trace(c.trace, *trace_, s.grid(), meta, s.world());
  trace_->clear();
  log_info("trace     steps %d-%d written to %s", window_.first, window_.second, c.trace.c_str());
}

// --- validation ----------------------------------------------------------------------------------

void ValidationHook::after_step(Session& s, StepMetrics& m) {
  const TrainConfig& c = s.config();
  const int done = m.step + 1;
  if ((c.val_every > 0 && done % c.val_every == 0) || done == c.steps) m.val_loss = s.validate();
}

// --- progress and metrics ------------------------------------------------------------------------

ProgressHook::ProgressHook(Session& s) {
  const TrainConfig& c = s.config();
  if (c.metrics.empty() || s.world().rank() != 0) return;
  if (s.first_step() > 0) continue_metrics(c.metrics, s.first_step());
  metrics_.emplace(c.metrics, s.first_step() > 0 ? std::ios::app : std::ios::trunc);
  AXONN_CHECK_IO(metrics_->good(), "cannot write metrics file '", c.metrics, "'");
}

void ProgressHook::after_step(Session& s, StepMetrics& m) {
  if (!s.config().quiet) {
    char val[40] = "";
    if (m.val_loss) std::snprintf(val, sizeof val, " | val %.6f", static_cast<double>(*m.val_loss));
    log_info("step %5d/%d | loss %.6f%s | lr %.2e | norm %.4f | %8.1f ms | %9.0f tok/s | MFU %5.1f%%", m.step + 1,
             s.config().steps, m.loss, val, m.lr, m.grad_norm, m.step_ms, m.tokens_per_s, 100.0 * m.mfu);
  }
  if (metrics_) {
    nlohmann::json j = {{"step", m.step},       {"loss", m.loss},         {"lr", m.lr},
                        {"grad_norm", m.grad_norm}, {"step_ms", m.step_ms}, {"tokens_per_s", m.tokens_per_s},
                        {"mfu", m.mfu}};
    if (m.val_loss) j["val_loss"] = *m.val_loss;
    *metrics_ << j.dump() << '\n';
    metrics_->flush();
  }
}

// --- checkpoints ---------------------------------------------------------------------------------

CheckpointHook::CheckpointHook(Session& s)
    : checkpointer_(s.config(), s.model_config(), s.host_grid(), s.start()) {}

void CheckpointHook::after_step(Session& s, StepMetrics& m) {
  last_step_s_ = m.step_ms * 1e-3;
  if (checkpointer_.due(m.step + 1)) save(s, m.step + 1);
}

void CheckpointHook::save(Session& s, int done) {
  const checkpoint::SaveResult r = checkpointer_.save(done, s.loader(), s.gpt(), s.opt());
  last_written_ = r.dir;
  // a signal stops after a step and a save: both must fit in the scheduler's grace period
  if (!warned_ && last_step_s_ + r.seconds > kKillWaitSeconds) {
    warned_ = true;
    log_warn("stop      a step (%.1f s) and a checkpoint (%.1f s) take longer than Slurm's default KillWait of %.0f s: "
             "a SIGTERM would be followed by SIGKILL before the save ends. Ask for the signal earlier (sbatch "
             "--signal=USR1@120) or raise KillWait",
             last_step_s_, r.seconds, kKillWaitSeconds);
  }
}

void CheckpointHook::at_end(Session& s, int done) {
  const TrainConfig& c = s.config();
  if (!c.checkpoint_dir.empty() && checkpointer_.last_saved() != done) save(s, done);
  if (c.save.empty()) return;
  const model::Gpt& gpt = s.gpt();
  if (gpt.device() != Device::kCpu) {
    Arena host = gpt.params().clone_layout("parameters (host copy)", Device::kCpu);
    host.allocate();
    host.copy_from(gpt.params());  // download
    checkpoint::save_llmc(c.save, s.model_config(), host);
  } else {
    checkpoint::save_llmc(c.save, s.model_config(), gpt.params());
  }
  log_info("saved     %s", c.save.c_str());
}

// --- stopping early ------------------------------------------------------------------------------

StopHook::StopHook(Session& s) : signals_(parse_stop_signal(s.config().stop_signal)) {
  const TrainConfig& c = s.config();
  // what a stop costs: the rest of a step, then a checkpoint of every tensor-parallel file
  std::string cost = "no --checkpoint-dir: a stop saves nothing";
  if (!c.checkpoint_dir.empty()) {
    const parallel::GridShape& g = s.grid().shape();
    const double bytes = static_cast<double>(g.gx * g.gy * g.gz) *
                         static_cast<double>(s.gpt().params().bytes() + s.opt().state_bytes());
    const double seconds = bytes / (kAssumedDiskMiBs * 1024 * 1024);
    char text[128];
    std::snprintf(text, sizeof text, "then checkpoints (%.1f MiB, about %.0f s at %.0f MiB/s)",
                  bytes / (1024.0 * 1024.0), std::ceil(seconds), kAssumedDiskMiBs);
    cost = text;
    if (seconds > kKillWaitSeconds)
      log_warn("stop      a checkpoint of this model takes about %.0f s, more than Slurm's default KillWait of %.0f s: "
               "ask for the signal earlier (sbatch --signal=USR1@%d) or raise KillWait",
               seconds, kKillWaitSeconds, static_cast<int>(2 * seconds) + 60);
  }
  log_info("stop      %s: every rank stops after the current step, %s; a second signal stops at once%s%s",
           signals_.names().c_str(), cost.c_str(),
           c.exit_after_steps ? (", or after " + std::to_string(c.exit_after_steps) + " steps").c_str() : "",
           c.exit_after_minutes > 0 ? ::axonn::detail::concat(", or after ", c.exit_after_minutes, " minutes").c_str()
                                    : "");
}

void StopHook::after_step(Session& s, StepMetrics& m) {
  (void)m;
  const TrainConfig& c = s.config();
  steps_run_++;
  int32_t flags[2] = {signals_.received(), 0};  // the signal; the limit reached (1 steps, 2 minutes)
  if (c.exit_after_steps > 0 && steps_run_ >= c.exit_after_steps) flags[1] = 1;
  if (s.world().rank() == 0 && c.exit_after_minutes > 0 && since_start_.seconds() >= 60 * c.exit_after_minutes)
    flags[1] = std::max(flags[1], 2);
  s.world().all_reduce(flags, 2, DType::kI32, comm::ReduceOp::kMax);  // over world: every rank stops together
  if (flags[0]) {
    stop_ = Stop::kSignal;
    signal_ = flags[0];
  } else if (flags[1]) {
    stop_ = flags[1] == 1 ? Stop::kExitAfterSteps : Stop::kExitAfterMinutes;
  }
}

}  // namespace axonn::train::detail
