// train/trainer.hpp — the training loop: a Session, the step, and the hooks around it.
//
//   train::TrainConfig cfg;           // every field has the default `axonn train --help` shows
//   cfg.init = "model.bin"; cfg.data = "tokens.bin";
//   auto history = train::train(cfg, comm::world());   // one StepMetrics per step
//
// Per step the loop loads the batch, runs train::train_step (step.hpp) and then the hooks, in order:
// the timeline trace (--trace), validation (--val-data), the progress line and the metrics file
// (--metrics), the checkpoints (--checkpoint-dir, and --save at the end). A caller may add its own.
#pragma once

#include <optional>
#include <string>
#include <memory>
#include <vector>

#include "axonn/comm/communicator.hpp"
#include "axonn/train/config.hpp"
#include "axonn/train/guard.hpp"
#include "axonn/train/session.hpp"

namespace axonn::train {

struct StepMetrics {
  int step = 0;           // 0-based, counted from the start of training (a resumed run goes on)
  float loss = 0.0f;      // mean loss of this step's forward, before its update
  float lr = 0.0f;
  double grad_norm = 0.0; // before clipping
  double step_ms = 0.0;
  double tokens_per_s = 0.0;
  double mfu = 0.0;       // model FLOPs / step time / peak
  std::optional<float> val_loss;  // after this step's update, on the steps that validate (--val-data)
  std::optional<GoldfishLosses> goldfish;  // --goldfish-k: `loss` is over the kept targets; these the rest
  Verdict verdict = Verdict::kUpdate;  // else the guard skipped the update (guard.hpp)
  int64_t skipped_steps = 0;           // skipped since the run began, this one included
};

// Something the loop runs around every step. Hooks run in the order they were added; every rank
// runs them (a hook that communicates does so collectively).
class LoopHook {
 public:
  virtual ~LoopHook() = default;
  virtual void before_step(Session& s, int step) {
    (void)s;
    (void)step;
  }
  // After the update of step m.step; may add to m (it is recorded after every hook has run).
  virtual void after_step(Session& s, StepMetrics& m) {
    (void)s;
    (void)m;
  }
  // Asked after every step's after_step (on every rank alike): true ends the run after this step.
  virtual bool stop_requested() const { return false; }
  // After the last step this run trained (`done` steps in all, counted from 0), whether the run
  // finished or stopped early.
  virtual void at_end(Session& s, int done) {
    (void)s;
    (void)done;
  }
};

// How a run ended.
enum class Stop {
  kFinished,          // --steps done
  kSignal,            // SIGTERM, SIGINT or --stop-signal
  kExitAfterSteps,    // --exit-after-steps
  kExitAfterMinutes,  // --exit-after-minutes
  kBadSteps,          // --max-bad-steps skipped steps in a row
};

struct TrainResult {
  std::vector<StepMetrics> history;  // the steps this run trained
  Stop stop = Stop::kFinished;
  int signal = 0;          // kSignal: which
  std::string checkpoint;  // the step directory of the last checkpoint this run wrote (empty: none)
};

// Validates the configuration (InvalidArgument with what to change), builds the Session over
// `world`, trains until --steps or a stop (a signal, --exit-after-*), and returns the metrics of the
// steps it ran (the same on every rank) and how it ended.
// Collective over world. Progress goes to the log (rank 0); the metrics file is written by rank 0.
// `extra` hooks run after the built-in ones.
TrainResult run(const TrainConfig& config, std::shared_ptr<comm::Communicator> world,
               std::vector<std::unique_ptr<LoopHook>> extra = {});
// run(...).history
std::vector<StepMetrics> train(const TrainConfig& config, std::shared_ptr<comm::Communicator> world,
                               std::vector<std::unique_ptr<LoopHook>> extra = {});

}  // namespace axonn::train
