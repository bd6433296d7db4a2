// train/session.hpp — everything a training run holds: the grid, the model's shards on it, the
// optimizer, the data, and where the run starts.
//
// Built from a TrainConfig over the world (collective): validates the configuration, resolves the
// grid (--grid auto asks the planner), sets the kernels and the communicators up, opens the data,
// builds the model and the optimizer, and sets the starting state (random, --init, or a resumed
// checkpoint). The loop (trainer.hpp) then alternates next_batch() and train::train_step().
//
//   train::Session s(config, comm::world());
//   for (int step = s.first_step(); step < config.steps; step++) {
//     train::StepResult r = train::train_step(s.gpt(), s.opt(), s.next_batch(), {s.lr(step), c.grad_clip});
//   }
#pragma once

#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/comm/communicator.hpp"
#include "axonn/data/token_dataset.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/launch/compute.hpp"
#include "axonn/train/config.hpp"
#include "axonn/train/guard.hpp"
#include "axonn/launch/job.hpp"
#include "axonn/train/peak.hpp"
#include "axonn/train/step.hpp"

namespace axonn::train {

namespace detail {
struct StartPlan;
class RunOutputs;
}

class Session {
 public:
  // Collective over world. Throws InvalidArgument / IoError (alike on every rank) for bad input.
  Session(const TrainConfig& config, std::shared_ptr<comm::Communicator> world);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const TrainConfig& config() const { return c_; }
  comm::Communicator& world() const { return *world_; }
  const parallel::Grid& grid() const { return *grid_; }
  // The grid whose communicators take host buffers (the checkpoints' collectives): grid() itself,
  // or, when the model's communicators take device buffers (NCCL, MPI-staged), a twin over the world.
  const parallel::Grid& host_grid() const { return host_grid_ ? *host_grid_ : *grid_; }
  const launch::Compute& compute() const { return compute_; }
  const launch::Launch& launch() const { return launch_; }  // launcher, Slurm job and step, hosts
  const model::GptConfig& model_config() const { return mc_; }
  model::Gpt& gpt() { return *gpt_; }
  const model::Gpt& gpt() const { return *gpt_; }
  optim::AdamW& opt() { return *opt_; }
  const data::BatchLoader& loader() const { return *loader_; }
  const detail::StartPlan& start() const { return *start_; }

  // The first step to run (0, or the step a resumed checkpoint stopped after).
  int first_step() const { return first_step_; }
  // The learning rate of `step` (0-based) under the schedule.
  float lr(int step) const;
  // Loads the next global batch and returns this rank's part of it (block d*Gz + z).
  LocalBatch next_batch();
  bool has_validation() const { return val_loader_ != nullptr; }
  // The mean loss of the first --val-batches batches of --val-data with the current weights (forwards
  // only; training is not changed by it). Collective over the grid.
  // nullopt when a stop signal arrived during the pass: it ends between two batches, every rank
  // agreeing, so that a stop never waits for a whole validation (docs/resilience.md).
  std::optional<float> validate();

  // The numerical guard (its outlier windows are training state: checkpointed, restored) and the
  // steps it skipped since the run began (a resumed run counts on).
  StepGuard& guard() { return guard_; }
  // The Goldfish loss's mask (--goldfish-k; docs/goldfish.md), or null for the standard loss.
  const model::GoldfishMask* goldfish() const { return goldfish_ ? &*goldfish_ : nullptr; }
  int64_t skipped_steps() const { return skipped_steps_; }
  void count_skipped() { skipped_steps_++; }
  // What a checkpoint records of that state and of the data (manifest extra): the guard's windows and
  // skipped steps, the data's fingerprint.
  std::map<std::string, std::string> manifest_record() const;

  // An error one rank met where the others cannot know (rank 0 writing the metrics or the trace): kept
  // until the ranks agree to raise it together (raise_deferred_error, collective), so that every rank
  // stops with the same message instead of the others waiting in their next collective.
  void defer_error(std::exception_ptr e) {
    if (!deferred_) deferred_ = std::move(e);
  }
  bool has_deferred_error() const { return deferred_ != nullptr; }
  // Collective over the world: throws the lowest failing rank's deferred error on every rank, if any.
  void raise_deferred_error();

  int micro_batch_size() const { return micro_; }  // sequences per rank per micro-batch
  int micro_batches() const { return micro_batches_; }
  int64_t tokens_per_step() const;               // global: batch_size * seq_len
  // MFU's denominator per rank, and where it came from (train/peak.hpp): fixed at the start
  MfuPeak& mfu_peak() { return peak_; }
  const MfuPeak& mfu_peak() const { return peak_; }

 private:
  void open_data();  // the training data (--data, or the built-in corpus), --val-data, their loaders
  // Refuses to resume on data whose fingerprint differs from the checkpoint's (--allow-data-change).
  void check_data_unchanged(const checkpoint::Manifest& m) const;
  std::string data_fingerprint_;  // of --data's shards; empty for the built-in corpus
  LocalBatch local_part();  // this rank's part of the batch in inputs_/targets_
  void log_setup() const;
  void restore_guard(const checkpoint::Manifest& m);

  TrainConfig c_;
  TrainChoices choices_;  // c_'s choices, parsed once
  std::shared_ptr<comm::Communicator> world_;
  parallel::GridShape shape_;
  std::unique_ptr<detail::StartPlan> start_;
  std::unique_ptr<detail::RunOutputs> outputs_;  // rank 0 holds the output directories' locks
  model::GptConfig mc_;
  std::unique_ptr<data::TokenCorpus> corpus_;
  std::unique_ptr<data::BatchLoader> loader_;
  std::unique_ptr<data::TokenCorpus> val_corpus_;
  std::unique_ptr<data::BatchLoader> val_loader_;
  launch::Compute compute_;
  launch::Launch launch_;
  std::unique_ptr<parallel::Grid> grid_, host_grid_;
  std::unique_ptr<model::Gpt> gpt_;
  std::unique_ptr<optim::AdamW> opt_;
  int first_step_ = 0;
  int B_local_ = 0, micro_ = 0, micro_batches_ = 0;
  int64_t block_offset_ = 0;
  MfuPeak peak_;
  std::vector<int> inputs_, targets_;
  StepGuard guard_{0, 0};
  std::exception_ptr deferred_;
  std::optional<model::GoldfishMask> goldfish_;
  int64_t skipped_steps_ = 0;
};

}  // namespace axonn::train
