// train/stop.hpp (private to the train module) — stopping a run gracefully on a signal.
//
// Schedulers stop jobs with signals: Slurm sends SIGTERM and, after KillWait (30 s by default),
// SIGKILL; `sbatch --signal=USR1@120` sends SIGUSR1 two minutes before the time limit; Ctrl-C is
// SIGINT. While a StopSignals lives, the first of SIGTERM, SIGINT and the configurable signal only
// marks the process: the loop sees it after the current step, every rank agrees (trainer.cpp), and
// the run checkpoints and ends cleanly. A second stop signal ends the process at once, by that
// signal (its default action).
#pragma once

#include <string>

namespace axonn::train::detail {

// The signal of --stop-signal: "USR1" (default), "USR2", "HUP", with or without "SIG", or "none" (0).
// InvalidArgument otherwise.
int parse_stop_signal(const std::string& name);
// "SIGTERM" for SIGTERM, ...
std::string signal_name(int sig);

// The first stop signal received while a StopSignals lives (0: none): for long work inside a step
// (validation) that must end early on a stop.
int stop_signal_received();

class StopSignals {
 public:
  // Installs the handlers for SIGTERM, SIGINT and `extra` (0: none). One at a time per process.
  explicit StopSignals(int extra);
  ~StopSignals();  // restores the handlers that were there before
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first stop signal received since construction, 0 if none.
  int received() const;
  // "SIGTERM, SIGINT, SIGUSR1": the signals handled.
  std::string names() const;

 private:
  int extra_;
};

}  // namespace axonn::train::detail
