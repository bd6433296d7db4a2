// train/hooks.hpp (private to the train module) — the loop's built-in hooks, in the order it runs
// them after a step: the timeline trace, validation, the progress line and the metrics file, the checkpoints.
#pragma once

#include <fstream>
#include <memory>
#include <optional>
#include <utility>

#include "axonn/core/trace.hpp"
#include "axonn/train/trainer.hpp"
#include "axonn/core/timer.hpp"
#include "checkpointing.hpp"
#include "stop.hpp"

namespace axonn::train::detail {

// Creates and removes `probe`: the directory it is in takes new files (before step 1). IoError naming
// `flag` and its value `given` otherwise.
void probe_writable(const std::string& probe, const char* flag, const std::string& given);

// --trace: records the window's steps into `trace` (which the model and the step write to) and
// writes every rank's spans to one Chrome trace-event file after the window's last step.
class TraceHook final : public LoopHook {
 public:
  // Checks now, on every rank, that rank 0 can write the file.
  TraceHook(Session& s, Trace* trace);
  void before_step(Session& s, int step) override;
  void after_step(Session& s, StepMetrics& m) override;

 private:
  Trace* trace_;
  std::pair<int, int> window_;  // 1-based, inclusive
};

// --val-data: the validation loss after the update, every --val-every steps and after the last step.
class ValidationHook final : public LoopHook {
 public:
  void after_step(Session& s, StepMetrics& m) override;
};

// The progress line (rank 0's log, unless --quiet) and --metrics (rank 0 writes one JSON object per
// step and flushes it).
class ProgressHook final : public LoopHook {
 public:
  explicit ProgressHook(Session& s);
  void after_step(Session& s, StepMetrics& m) override;

 private:
  std::optional<std::ofstream> metrics_;
  Timer since_start_;  // elapsed and ETA in the progress line
};

// --checkpoint-dir: a sharded checkpoint every --checkpoint-every steps and at the end (however the run
// ended); --save: the model at the end, in the format save_format names.
// What --save writes, by its path: FILE.bin an llm.c file (GPT-2 only), FILE.gguf a GGUF file (F32, the
// tokenizer inside), a directory (save_names_directory) a Hugging Face model directory. Another extension:
// InvalidArgument naming the three. `family` refuses a Llama to an llm.c file.
enum class SaveFormat { kLlmc, kGguf, kHf };
SaveFormat save_format(const std::string& path, model::Family family);
// --save names a directory: a path ending in '/', an existing directory, or one without an extension.
bool save_names_directory(const std::string& path);

class CheckpointHook final : public LoopHook {
 public:
  explicit CheckpointHook(Session& s);
  void after_step(Session& s, StepMetrics& m) override;
  void at_end(Session& s, int done) override;
  const std::string& last_written() const { return last_written_; }  // step directory, empty if none

 private:
  void save(Session& s, int done);
  Checkpointer checkpointer_;
  std::string last_written_;
  double last_step_s_ = 0;  // for the stop-time check
  bool warned_ = false;
};

// The guard's bookkeeping: counts skipped steps, says why each was skipped, and stops the run after
// --max-bad-steps of them in a row (the weights are those of the last good step).
class GuardHook final : public LoopHook {
 public:
  void after_step(Session& s, StepMetrics& m) override;
  bool stop_requested() const override { return stop_; }

 private:
  int in_a_row_ = 0;
  bool stop_ = false;
};

// Stopping early: on SIGTERM, SIGINT or --stop-signal (StopSignals), after --exit-after-steps steps
// of this run or --exit-after-minutes since it started. After every step the ranks agree (one
// all-reduce over the world: a signal may reach some ranks only, and rank 0's clock decides the time).
class StopHook final : public LoopHook {
 public:
  explicit StopHook(Session& s);
  void after_step(Session& s, StepMetrics& m) override;
  bool stop_requested() const override { return stop_ != Stop::kFinished; }
  Stop stop() const { return stop_; }
  int signal() const { return signal_; }

 private:
  StopSignals signals_;
  Timer since_start_;
  int steps_run_ = 0;
  Stop stop_ = Stop::kFinished;
  int signal_ = 0;
};

}  // namespace axonn::train::detail
