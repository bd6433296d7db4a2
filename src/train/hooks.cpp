// train/hooks.cpp — the loop's built-in hooks (hooks.hpp).
#include "hooks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/gguf.hpp"
#include "axonn/checkpoint/hf.hpp"
#include "axonn/checkpoint/llmc.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/progress.hpp"
#include "axonn/parallel/overlap.hpp"
#include "axonn/text/tokenizer.hpp"

namespace axonn::train::detail {

namespace fs = std::filesystem;

void probe_writable(const std::string& probe, const char* flag, const std::string& given) {
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  AXONN_CHECK_IO(fd >= 0, "cannot write ", flag, " '", given, "': ", std::strerror(errno),
                 "; give a path in a directory this job can write (checked before training, so no step is lost)");
  ::close(fd);
  ::unlink(probe.c_str());
}

namespace {

// Slurm's default KillWait: the seconds between SIGTERM and SIGKILL.
constexpr double kKillWaitSeconds = 30;
// What the stop-time estimate assumes of the disk (docs/checkpoints.md measured 190-850 MiB/s here).
constexpr double kAssumedDiskMiBs = 200;


// Rank 0 probes the trace file's directory now, so that an unwritable path fails every rank at the
// start; the file itself is written only when its window ends (an existing one is never emptied).
void check_trace_writable(const std::string& path, comm::Communicator& world) {
  int32_t bad = 0;
  if (world.rank() == 0) {
    try {
      probe_writable(path + ".probe-" + std::to_string(::getpid()), "--trace", path);
    } catch (const IoError&) {
      bad = 1;
    }
  }
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
  f.close();  // the buffered rest goes out here: check after it
  AXONN_CHECK_IO(!f.fail(), "cannot write trace file '", path, "': ", std::strerror(errno));
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
  const bool window_given = !s.config().given || s.config().given->count("--trace-steps") > 0;
  if (window_.second <= s.first_step() && window_given)
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
  try {  // collective; then rank 0 writes: a failure there is raised on every rank after the step
    write_trace(c.trace, *trace_, s.grid(), meta, s.world());
  } catch (const IoError&) {
    s.defer_error(std::current_exception());
  }
  trace_->clear();
  log_info("trace     steps %d-%d written to %s", window_.first, window_.second, c.trace.c_str());
}

// --- validation ----------------------------------------------------------------------------------

void ValidationHook::after_step(Session& s, StepMetrics& m) {
  const TrainConfig& c = s.config();
  const int done = m.step + 1;
  if ((c.val_every > 0 && done % c.val_every == 0) || done == c.steps) m.val_loss = s.validate();
}

// --- the guard -----------------------------------------------------------------------------------

void GuardHook::after_step(Session& s, StepMetrics& m) {
  if (m.verdict == Verdict::kUpdate) {
    in_a_row_ = 0;
  } else {
    s.count_skipped();
    in_a_row_++;
    const char* why = m.verdict == Verdict::kNonFinite    ? "its loss or gradient norm is not finite"
                      : m.verdict == Verdict::kLossOutlier ? "its loss is an outlier (--skip-loss-z)"
                                                           : "its gradient norm is an outlier (--skip-grad-z)";
    log_warn("guard     step %d skipped: %s (loss %g, norm %g); weights and optimizer untouched", m.step + 1, why,
             static_cast<double>(m.loss), m.grad_norm);
    const int limit = s.config().max_bad_steps;
    if (limit > 0 && in_a_row_ >= limit) {
      stop_ = true;
      log_error("guard     the last %d steps (to step %d) were all skipped: the run stops. The weights are those of "
                "step %d; lower --lr, check the data, or resume from the last good checkpoint",
                in_a_row_, m.step + 1, m.step + 1 - in_a_row_);
    }
  }
  m.skipped_steps = s.skipped_steps();
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
    char val[64] = "";
    if (m.val_loss) std::snprintf(val, sizeof val, " | val %.6f", static_cast<double>(*m.val_loss));
    if (m.verdict != Verdict::kUpdate) std::snprintf(val, sizeof val, " | SKIPPED (%s)", verdict_name(m.verdict));
    char goldfish[96] = "";  // the masked loss is `loss`; the mean over every and over the dropped targets
    if (m.goldfish)
      std::snprintf(goldfish, sizeof goldfish, " | all %.6f dropped %.6f (%.1f%%)",
                    static_cast<double>(m.goldfish->loss_all_tokens), static_cast<double>(m.goldfish->loss_dropped_tokens),
                    100.0 * m.goldfish->dropped_fraction);
    // elapsed since this run's first step began, and the time left at this run's mean step time
    const double elapsed_s = since_start_.seconds();
    const double eta_s = progress_eta_s(m.step + 1 - s.first_step(), s.config().steps - s.first_step(), elapsed_s);
    log_info("step %5d/%d | loss %.6f%s%s | lr %.2e | norm %.4f | %8.1f ms | %9.0f tok/s | MFU %5.1f%% | %s ETA %s",
             m.step + 1, s.config().steps, m.loss, goldfish, val, m.lr, m.grad_norm, m.step_ms, m.tokens_per_s,
             100.0 * m.mfu, format_duration(elapsed_s).c_str(), format_duration(eta_s).c_str());
  }
  if (metrics_) {
    nlohmann::json j = {{"step", m.step},       {"loss", m.loss},         {"lr", m.lr},
                        {"grad_norm", m.grad_norm}, {"step_ms", m.step_ms}, {"tokens_per_s", m.tokens_per_s},
                        {"mfu", m.mfu}};
    if (m.val_loss) j["val_loss"] = *m.val_loss;
    if (m.goldfish) {
      j["loss_all_tokens"] = m.goldfish->loss_all_tokens;
      j["loss_dropped_tokens"] = m.goldfish->loss_dropped_tokens;  // null when no target was dropped
      j["goldfish_dropped_fraction"] = m.goldfish->dropped_fraction;
    }
    if (m.verdict != Verdict::kUpdate) j["skipped"] = verdict_name(m.verdict);
    if (m.skipped_steps) j["skipped_steps"] = m.skipped_steps;
    *metrics_ << j.dump() << '\n';
    metrics_->flush();
    if (!metrics_->good()) {  // a full disk or /dev/full: said, and the run stops after this step
      s.defer_error(std::make_exception_ptr(IoError(::axonn::detail::concat(
          "cannot write metrics file '", s.config().metrics, "' after step ", m.step + 1, ": ", std::strerror(errno),
          "; free space or give another --metrics"))));
      metrics_.reset();
    }
  }
}

// --- checkpoints ---------------------------------------------------------------------------------

bool save_names_directory(const std::string& path) {
  std::error_code ec;
  return path.ends_with('/') || fs::is_directory(path, ec) || fs::path(path).extension().empty();
}

SaveFormat save_format(const std::string& path, model::Family family) {
  const std::string ext = fs::path(path).extension().string();
  SaveFormat f = SaveFormat::kHf;
  if (save_names_directory(path)) {
    f = SaveFormat::kHf;
  } else if (ext == ".bin") {
    f = SaveFormat::kLlmc;
  } else if (ext == ".gguf") {
    f = SaveFormat::kGguf;
  } else {
    throw InvalidArgument("--save '" + path + "': cannot tell the format from '" + ext + "'; give FILE.bin (llm.c, "
                          "GPT-2 only), FILE.gguf (GGUF) or a directory DIR/ (Hugging Face)");
  }
  AXONN_CHECK_ARG(f != SaveFormat::kLlmc || family == model::Family::kGpt2, "--save '", path, "': an llm.c file "
                  "(.bin) holds GPT-2 models only; for this model give FILE.gguf (GGUF) or a directory DIR/ "
                  "(Hugging Face safetensors)");
  return f;
}

namespace {

// The tokenizer --save writes beside or into the model: the run's (`tokenizer`: its directory, "" if none), loaded
// and checked against the model; null where the format holds none or the run has none. A GGUF file needs one:
// InvalidArgument without. CheckpointHook's constructor asks before step 1, write_save again at the end.
std::unique_ptr<text::Tokenizer> save_tokenizer(const std::string& path, const model::GptConfig& config,
                                                const Checkpointer& carried) {
  const SaveFormat f = save_format(path, config.family);
  if (f == SaveFormat::kLlmc) return nullptr;
  std::unique_ptr<text::Tokenizer> tok = carried.tokenizer();
  AXONN_CHECK_ARG(f != SaveFormat::kGguf || tok, "--save '", path, "': a GGUF file holds the model's tokenizer, and ",
                  "this run carries none (train on prepared --data, or save a directory DIR/ or, for GPT-2, FILE.bin)");
  if (tok) checkpoint::check_tokenizer_fits(*tok, config);
  return tok;
}

// Writes --save from the full tensors (rank 0), in the format its path names, with the run's tokenizer (the one
// its checkpoints carry) where the format holds one, as `axonn convert` does.
void write_save(const std::string& path, const model::GptConfig& config, const Arena& params,
                const Checkpointer& carried, int done) {
  const int64_t bad = count_nonfinite(params);
  AXONN_CHECK_IO(bad == 0, "the weights after step ", done, " hold ", bad, " non-finite values (Inf or NaN): the "
                 "run diverged; --save '", path, "' was not written. Lower --lr or enable --grad-clip");
  const std::unique_ptr<text::Tokenizer> tok = save_tokenizer(path, config, carried);  // before anything is written
  switch (save_format(path, config.family)) {
    case SaveFormat::kLlmc:
      checkpoint::save_llmc(path, config, params);
      break;
    case SaveFormat::kGguf:
      checkpoint::save_gguf(path, config, params, checkpoint::GgufType::kF32, *tok, fs::path(path).stem().string());
      break;
    case SaveFormat::kHf:
      checkpoint::save_hf_dir(path, config, params);
      if (tok) checkpoint::save_hf_tokenizer_files(path, config, *tok, carried.tokenizer_files());
      break;
  }
}

}  // namespace

CheckpointHook::CheckpointHook(Session& s)
    : checkpointer_(s.config(), s.model_config(), s.host_grid(), s.start()) {
  // the outputs are checked before step 1, not found unwritable after the last (the construction of
  // the hooks is agreed on: a failure here fails every rank)
  const TrainConfig& c = s.config();
  if (s.world().rank() != 0) return;
  if (!c.checkpoint_dir.empty()) {  // (its lock is the session's: outputs.hpp)
    probe_writable(c.checkpoint_dir + "/.probe-" + std::to_string(::getpid()), "--checkpoint-dir", c.checkpoint_dir);
  }
  if (!c.save.empty()) {
    save_tokenizer(c.save, s.model_config(), checkpointer_);  // one the format needs, and fits
    if (save_format(c.save, s.model_config().family) == SaveFormat::kHf) {
      std::error_code ec;
      fs::create_directories(c.save, ec);  // where the user pointed; each file is written into it atomically
      AXONN_CHECK_IO(!ec, "cannot create the --save directory '", c.save, "': ", ec.message());
      probe_writable((fs::path(c.save) / (".probe-" + std::to_string(::getpid()))).string(), "--save", c.save);
    } else {
      probe_writable(c.save + ".probe-" + std::to_string(::getpid()), "--save", c.save);
    }
  }
}

void CheckpointHook::after_step(Session& s, StepMetrics& m) {
  last_step_s_ = m.step_ms * 1e-3;
  if (!checkpointer_.due(m.step + 1)) return;
  try {
    save(s, m.step + 1);
  } catch (const IoError& e) {
    // save_sharded agrees on errors: every rank is here with the same error, and nothing of the failed
    // save was committed (`latest` still names the previous checkpoint)
    if (!s.config().continue_on_save_error) throw;
    log_warn("checkpoint at step %d failed, training on (--continue-on-save-error); the latest checkpoint is still %s: %s",
             m.step + 1, last_written_.empty() ? "the one the run started from, if any" : last_written_.c_str(), e.what());
  }
}

void CheckpointHook::save(Session& s, int done) {
  const checkpoint::SaveResult r = checkpointer_.save(done, s.loader(), s.gpt(), s.opt(), s.manifest_record());
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
  std::optional<Arena> host;
  if (gpt.device() != Device::kCpu) {
    host.emplace(gpt.params().clone_layout("parameters (host copy)", Device::kCpu));
    host->allocate();
    host->copy_from(gpt.params());  // download
  }
  // the full tensors on rank 0 (the other ranks send their shards), then rank 0 writes; its error, if
  // any, reaches every rank
  const parallel::Grid& grid = s.host_grid();
  const bool root = grid.rank() == 0;
  std::optional<Arena> full;
  if (root) full.emplace("parameters (full, for --save)");
  checkpoint::gather_full_params(grid, s.model_config(), host ? *host : gpt.params(), root ? &*full : nullptr);
  std::exception_ptr error;
  if (root) {
    try {
      write_save(c.save, s.model_config(), *full, checkpointer_, done);
    } catch (...) {
      error = std::current_exception();
    }
  }
  checkpoint::agree_on_errors(grid.world(), error);
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
  log_info("stop      %s: every rank stops after the current step%s, %s; a second signal stops at once%s%s",
           signals_.names().c_str(), s.has_validation() ? " (a validation pass at its next batch)" : "", cost.c_str(),
           c.exit_after_steps ? (", or after " + std::to_string(c.exit_after_steps) + " steps").c_str() : "",
           c.exit_after_minutes > 0 ? ::axonn::detail::concat(", or after ", c.exit_after_minutes, " minutes").c_str()
                                    : "");
}

void StopHook::after_step(Session& s, StepMetrics& m) {
  (void)m;
  const TrainConfig& c = s.config();
  steps_run_++;
  // the signal; the limit reached (1 steps, 2 minutes); an error a hook met on some rank (an output)
  int32_t flags[3] = {signals_.received(), 0, s.has_deferred_error() ? 1 : 0};
  if (c.exit_after_steps > 0 && steps_run_ >= c.exit_after_steps) flags[1] = 1;
  if (s.world().rank() == 0 && c.exit_after_minutes > 0 && since_start_.seconds() >= 60 * c.exit_after_minutes)
    flags[1] = std::max(flags[1], 2);
  s.world().all_reduce(flags, 3, DType::kI32, comm::ReduceOp::kMax);  // over world: every rank stops together
  if (flags[2]) s.raise_deferred_error();  // every rank throws the same error
  if (flags[0]) {
    stop_ = Stop::kSignal;
    signal_ = flags[0];
  } else if (flags[1]) {
    stop_ = flags[1] == 1 ? Stop::kExitAfterSteps : Stop::kExitAfterMinutes;
  }
}

}  // namespace axonn::train::detail
