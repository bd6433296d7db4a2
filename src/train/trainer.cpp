// train/trainer.cpp — the training loop (include/axonn/train/trainer.hpp): the Session, the step, the
// hooks.
#include "axonn/train/trainer.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "axonn/checkpoint/sharded.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/timer.hpp"
#include "axonn/core/trace.hpp"
#include "axonn/kernels/gemm_tuner.hpp"
#include "axonn/train/run_dir.hpp"
#include "hooks.hpp"
#include "outputs.hpp"
#include "run_dir_write.hpp"
#include "stop.hpp"

namespace axonn::train {

namespace {

// The GEMM tuner's choices (rank 0's) as JSON: one object per (engine, site, shape).
void write_gemm_tuning_report(const std::string& path) {
  nlohmann::json records = nlohmann::json::array();
  for (const auto& r : kernels::gemm_tuner().records()) {
    nlohmann::json candidates = nlohmann::json::array();
    for (const auto& cand : r.candidates)
      candidates.push_back(
          {{"variant", kernels::gemm_variant_name(cand.variant)}, {"layout", cand.layout}, {"ms", cand.seconds * 1e3}});
    records.push_back({{"engine", r.key.engine},
                       {"site", r.key.site},
                       {"m", r.key.m},
                       {"n", r.key.n},
                       {"k", r.key.k},
                       {"trans_a", r.key.trans_a},
                       {"trans_b", r.key.trans_b},
                       {"chosen", kernels::gemm_variant_name(r.chosen)},
                       {"speedup", r.speedup()},
                       {"candidates", candidates}});
  }
  std::ofstream f(path, std::ios::trunc);
  f << nlohmann::json({{"gemm_tuning", records}}).dump(1) << '\n';
  f.close();  // the buffered rest goes out here: check after it
  AXONN_CHECK_IO(!f.fail(), "cannot write --gemm-tuning-report file '", path, "': ", std::strerror(errno));
}

}  // namespace

namespace {

// A path as one shell word: as it is when it holds no character the shell reads, else in single quotes.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("_./:=,+-@%", ch) != nullptr;
  });
  if (plain) return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// The command that continues a stopped run, with the outputs it was given (`given`: the configuration as the
// user gave it, before the run directory's defaults): a resumed run writes only where its own flags and run
// directory say, never where the checkpoint's manifest recorded, so a bare --resume would drop --save and
// --metrics, and one without --run-dir the run directory's metrics.
std::string continue_command(const TrainConfig& given, int world) {
  std::string cmd = world > 1 ? "mpirun -np " + std::to_string(world) + " axonn train" : "axonn train";
  const auto flag = [&cmd](const char* name, const std::string& value) {
    if (!value.empty()) cmd += std::string(" ") + name + " " + shell_word(value);
  };
  flag("--run-dir", given.run_dir);
  flag("--checkpoint-dir", given.checkpoint_dir);
  flag("--metrics", given.metrics);
  flag("--trace", given.trace);
  flag("--save", given.save);
  return cmd + " --resume";
}

}  // namespace

TrainResult run(const TrainConfig& config, std::shared_ptr<comm::Communicator> world,
               std::vector<std::unique_ptr<LoopHook>> extra) {
  const TrainConfig resolved = with_run_dir_outputs(config);
  if (!config.run_dir.empty()) {  // made and checked on every rank before anything is built
    validate_config(resolved);  // a bad configuration makes no directory
    detail::check_run_directories(resolved);
    std::exception_ptr made;
    try {
      detail::make_run_dir(config.run_dir);
    } catch (...) {
      made = std::current_exception();
    }
    checkpoint::agree_on_errors(*world, made);
  }
  Session s(resolved, std::move(world));
  const TrainConfig& c = s.config();
  // the hooks, in the order they run after a step
  Trace trace;  // the timeline of --trace, recorded by the model and the step during the window
  std::vector<std::unique_ptr<LoopHook>> hooks;
  detail::CheckpointHook* checkpoints = nullptr;
  detail::StopHook* stop = nullptr;
  std::exception_ptr error;
  try {  // a hook that cannot work (an output it cannot write) fails every rank now, not after training
    if (!c.trace.empty()) hooks.push_back(std::make_unique<detail::TraceHook>(s, &trace));
    hooks.push_back(std::make_unique<detail::GuardHook>());
    if (s.has_validation()) hooks.push_back(std::make_unique<detail::ValidationHook>());
    hooks.push_back(std::make_unique<detail::ProgressHook>(s));
    hooks.push_back(std::make_unique<detail::CheckpointHook>(s));
    checkpoints = static_cast<detail::CheckpointHook*>(hooks.back().get());
    hooks.push_back(std::make_unique<detail::StopHook>(s));
    stop = static_cast<detail::StopHook*>(hooks.back().get());
    if (!config.run_dir.empty() && s.world().rank() == 0) detail::write_run_dir(s, config);  // config as given
  } catch (...) {
    error = std::current_exception();
  }
  checkpoint::agree_on_errors(s.world(), error);
  for (auto& h : extra) hooks.push_back(std::move(h));

  TrainResult result;
  const std::set<int> faults = fault_steps(c);
  const double flops = s.gpt().flops_per_step() * s.micro_batches();
  int done = s.first_step();
  for (int step = s.first_step(); step < c.steps; step++) {
    comm::set_activity(::axonn::detail::concat("step ", step + 1, "/", c.steps));  // for the watchdog's report
    for (auto& h : hooks) h->before_step(s, step);
    Timer timer;
    StepMetrics m;
    m.step = step;
    m.lr = s.lr(step);
    StepResult r;
    {
      TraceScope step_span(c.trace.empty() ? nullptr : &trace, "step", SpanKind::kGroup);
      const LocalBatch batch = s.next_batch();
      const StepOptions o{.lr = m.lr,
                          .grad_clip = c.grad_clip,
                          .trace = c.trace.empty() ? nullptr : &trace,
                          .guard = &s.guard(),
                          .agreement = &s.world(),
                          .inject_nonfinite_gradient = faults.count(step + 1) > 0,
                          .goldfish = s.goldfish()};
      r = train_step(s.gpt(), s.opt(), batch, o);
    }
    const double seconds = timer.seconds();
    m.loss = r.loss;
    m.grad_norm = r.grad_norm;
    m.verdict = r.verdict;
    m.goldfish = r.goldfish;
    m.step_ms = seconds * 1e3;
    m.tokens_per_s = static_cast<double>(s.tokens_per_step()) / seconds;
    m.mfu = s.mfu_peak().observe(flops, seconds, s.world().size(), step);
    for (auto& h : hooks) h->after_step(s, m);
    result.history.push_back(m);
    done = step + 1;
    bool stopping = false;
    for (auto& h : hooks) stopping = h->stop_requested() || stopping;
    if (stopping) {
      if (!stop->stop_requested()) result.stop = Stop::kBadSteps;  // the guard's
      break;
    }
  }
  comm::set_activity(::axonn::detail::concat("the end of the run, after step ", done));
  for (auto& h : hooks) h->at_end(s, done);
  if (result.stop != Stop::kBadSteps) result.stop = stop->stop();
  result.signal = stop->signal();
  if (s.skipped_steps() > 0)
    log_info("guard     %lld step%s skipped since the run began", static_cast<long long>(s.skipped_steps()),
             s.skipped_steps() > 1 ? "s" : "");
  result.checkpoint = checkpoints->last_written();
  if (result.stop != Stop::kFinished && result.stop != Stop::kBadSteps && done < c.steps) {
    const std::string why = result.stop == Stop::kSignal ? detail::signal_name(result.signal)
                            : result.stop == Stop::kExitAfterSteps
                                ? "--exit-after-steps " + std::to_string(c.exit_after_steps)
                                : ::axonn::detail::concat("--exit-after-minutes ", c.exit_after_minutes);
    if (!result.checkpoint.empty())
      log_info("stopped   by %s after step %d of %d; checkpoint %s. Continue with: %s", why.c_str(), done, c.steps,
               result.checkpoint.c_str(), continue_command(config, s.world().size()).c_str());
    else
      log_warn("stopped   by %s after step %d of %d; no --checkpoint-dir: nothing to resume from", why.c_str(), done,
               c.steps);
  }
  if (kernels::gemm_tuning()) {  // rank 0's choices (every rank tunes its own shapes)
    for (const auto& line : kernels::gemm_tuner().report_lines()) log_info("gemm-tuning %s", line.c_str());
    if (!c.gemm_tuning_report.empty() && s.world().rank() == 0) {
      try {
        write_gemm_tuning_report(c.gemm_tuning_report);
        log_info("gemm-tuning report written to %s", c.gemm_tuning_report.c_str());
      } catch (const IoError&) {
        s.defer_error(std::current_exception());
      }
    }
  }
  s.raise_deferred_error();  // collective: a write that failed on one rank fails every rank
  return result;
}

std::vector<StepMetrics> train(const TrainConfig& config, std::shared_ptr<comm::Communicator> world,
                               std::vector<std::unique_ptr<LoopHook>> extra) {
  return run(config, std::move(world), std::move(extra)).history;
}

}  // namespace axonn::train
