// train/outputs.hpp (private to the train module) — what a run may write, claimed before it writes
// anything (docs/resilience.md, "What a command writes").
//
// The rule, stated here once: a run writes only to the outputs named for it (its flags, or its run
// directory's defaults: never paths a checkpoint's manifest records), never through a symbolic link,
// never to a file it reads, and never into what another run made unless asked to:
//   - a run that resumes in place (--resume) owns its run directory, checkpoint directory and files;
//   - any other run (fresh, or a branch with --resume-from) is refused an output that holds another
//     run's work (a checkpoint directory with steps, a run directory with its record, a file that is
//     not empty) unless --overwrite, which then deletes only another run's checkpoints and traces;
//   - every output is compared with every input by device and inode (and an output inside an input
//     directory is refused) before any work;
//   - the run directory and the checkpoint directory are locked for the whole run (rank 0's lock).
#pragma once

#include <memory>
#include <string>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/comm/communicator.hpp"
#include "axonn/train/config.hpp"
#include "checkpointing.hpp"

namespace axonn::train::detail {

// The run's directories (--run-dir, --checkpoint-dir, with the run directory's defaults applied) are not and do
// not lie in a data directory it reads (--data, --val-data), and the run directory is no other checkpoint
// directory than the run's own (they go to its checkpoints/): InvalidArgument otherwise. RunOutputs checks it
// with the rest; the trainer first, before it makes the run directory.
void check_run_directories(const TrainConfig& c);

// The outputs a run has claimed: rank 0 holds the locks until it is destroyed.
class RunOutputs {
 public:
  // Collective over `world`: rank 0 checks and claims the outputs of `c` (with its run directory's
  // defaults applied, its checkpoint's settings restored) for the start `start`; every rank throws
  // the same error if one is refused. --overwrite's deletions happen here, under the locks.
  RunOutputs(const TrainConfig& c, const StartPlan& start, comm::Communicator& world);
  ~RunOutputs();
  RunOutputs(const RunOutputs&) = delete;
  RunOutputs& operator=(const RunOutputs&) = delete;

  // Where the trace goes: --trace, or, when a resumed run would replace a trace the run wrote
  // before it, a new file beside it ("trace.json" -> "trace-from-step-11.json"; the report reads
  // every trace*.json). Empty: no trace.
  const std::string& trace() const { return trace_; }

 private:
  std::unique_ptr<checkpoint::DirectoryLock> run_dir_lock_, checkpoint_lock_;
  std::string trace_;
};

}  // namespace axonn::train::detail
