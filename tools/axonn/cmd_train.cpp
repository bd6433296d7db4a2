// axonn train — flags to TrainConfig, then train::train().
#include <memory>
#include <string>

#include "axonn/comm/factory.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/train/trainer.hpp"
#include "commands.hpp"

namespace axonn::tools {

void add_train_command(CLI::App& app, Action* action) {
  auto c = std::make_shared<train::TrainConfig>();
  auto* sub = app.add_subcommand("train", "train a GPT-2 or Llama model (llm.c, Hugging Face or axonn checkpoints; llm.c token shards)");
  sub->option_defaults()->always_capture_default();
  std::string models;
  for (const auto& n : model::gpt_preset_names()) models += (models.empty() ? "" : "|") + n;

  sub->add_option("--init", c->init,
                  "weights to start from: llm.c file (version 3 fp32 or 5 bf16), Hugging Face safetensors file or "
                  "model directory (GPT-2 or Llama), or a checkpoint directory (any grid; fresh optimizer)");
  sub->add_option("--model", c->model, "model shape for random init: " + models + " (default gpt2-tiny)");
  sub->add_option("--layers", c->layers, "override the number of layers (0: from --model)");
  sub->add_option("--heads", c->heads, "override the number of attention heads");
  sub->add_option("--channels", c->channels, "override the hidden size");
  sub->add_option("--vocab", c->vocab, "override the vocabulary size (padded to a multiple of 128)");
  sub->add_option("--max-seq-len", c->max_seq_len, "override the number of positions");
  sub->add_option("--data", c->data, "llm.c token shards: a file, a glob, or a directory (its *.bin without 'val', as "
                  "axonn prepare writes them); default: a built-in synthetic corpus");
  sub->add_flag("--shuffle", c->shuffle, "read the sequences in a new pseudo-random order every epoch (the same on "
                "every grid; resumable)");
  sub->add_option("--data-seed", c->data_seed, "seed of the --shuffle order");
  sub->add_option("--val-data", c->val_data, "llm.c token shards to validate on (a file, a glob, or a directory's "
                  "*.bin with 'val' in their names): val_loss in the progress line and the metrics, forwards only");
  sub->add_option("--val-every", c->val_every, "validate every N steps (0: after the last step only)");
  sub->add_option("--val-batches", c->val_batches, "batches of --batch-size x --seq-len tokens per validation, "
                  "from the start of --val-data");
  sub->add_option("--grid", c->grid, "4D grid GX,GY,GZ,GD (X: input features, Y: output features, Z: tokens "
                  "and weight shards, D: data); default 1,1,1,<ranks>; auto: the fastest grid the planner predicts "
                  "with --machine");
  sub->add_option("--grid-order", c->grid_order, "rank order of X, Y, Z, fastest first (e.g. z,x,y: Z groups on "
                  "consecutive ranks, so inside a node); default x,y,z, AxoNN's; with --grid auto the planner "
                  "chooses unless given");
  sub->add_option("--machine", c->machine, "machine profile for --grid auto: name or .json file (default: local, "
                  "written by axonn calibrate)");
  sub->add_option("--gx", c->gx, "Gx (instead of --grid; unset axes are 1, Gdata takes the remaining ranks)");
  sub->add_option("--gy", c->gy, "Gy");
  sub->add_option("--gz", c->gz, "Gz");
  sub->add_option("--gdata", c->gdata, "Gdata");
  sub->add_option("--batch-size", c->batch_size, "global batch, in sequences (split over Z and data)");
  sub->add_option("--seq-len", c->seq_len, "tokens per sequence");
  sub->add_option("--steps", c->steps, "training steps");
  sub->add_option("--lr", c->lr, "peak learning rate");
  sub->add_option("--lr-schedule", c->lr_schedule, "constant|cosine");
  sub->add_option("--warmup-steps", c->warmup_steps, "linear warmup steps");
  sub->add_option("--min-lr-frac", c->min_lr_frac, "cosine decays to this fraction of --lr");
  sub->add_option("--weight-decay", c->weight_decay, "AdamW weight decay (matrices only, unless --decay-all)");
  sub->add_flag("--decay-all", c->decay_all, "decay every tensor, as llm.c's CPU trainer does");
  sub->add_option("--beta1", c->beta1, "AdamW beta1");
  sub->add_option("--beta2", c->beta2, "AdamW beta2");
  sub->add_option("--eps", c->eps, "AdamW epsilon");
  sub->add_option("--grad-clip", c->grad_clip, "clip the global gradient norm to this (0 = off)");
  sub->add_option("--seed", c->seed, "random seed (initialisation, synthetic data)")
      ->check([](const std::string& v) {  // CLI11 would read -1 into the unsigned seed as 2^64-1
        return v.find('-') == std::string::npos ? std::string() : "must be >= 0 (an unsigned 64-bit number), got " + v;
      });
  // the Goldfish loss (docs/goldfish.md)
  sub->add_option("--goldfish-k", c->goldfish_k, "Goldfish loss: drop about 1/K of the targets from the loss, the "
                  "same ones wherever a passage repeats (K >= 2; default: off, the standard loss)");
  sub->add_option("--goldfish-h", c->goldfish_h, "Goldfish: the context width H, the targets hashed per decision "
                  "(the H-1 before a target and itself; its first H-1 targets are never dropped)");
  sub->add_option("--goldfish-strategy", c->goldfish_strategy, "Goldfish: hash-avalanche (integer hash of the "
                  "H-gram)|static (every K-th position from --goldfish-start)|hash-table (the authors' table, "
                  "--goldfish-table)");
  sub->add_option("--goldfish-start", c->goldfish_start, "Goldfish static: the first dropped position");
  sub->add_option("--goldfish-table", c->goldfish_table, "Goldfish hash-table: the table, a file of little-endian "
                  "float32 values in [0, 1) (docs/goldfish.md)");
  sub->add_option("--metrics", c->metrics, "write one JSON object per step to this file (JSON Lines)");
  sub->add_option("--save", c->save, "write the final weights as an llm.c checkpoint (version 3)");
  sub->add_option("--checkpoint-dir", c->checkpoint_dir,
                  "write sharded checkpoints here (one step-N directory each; also at the end of training)");
  sub->add_option("--checkpoint-every", c->checkpoint_every, "save every N steps (0: only at the end)");
  sub->add_option("--keep", c->keep, "keep the newest N checkpoints (0: all)");
  sub->add_flag("--resume", c->resume,
                "continue from the latest checkpoint in --checkpoint-dir (start at step 0 if it has none)");
  sub->add_option("--resume-from", c->resume_from,
                  "continue from this checkpoint (a root or a step directory), possibly written on another grid");
  sub->add_option("--kernels", c->kernels,
                  "cpu|ref|cuda (ref: the naive test-oracle kernels; cuda: the GPU, chosen by node-local rank, "
                  "needs a build with -DAXONN_CUDA=ON)");
  sub->add_option("--dtype", c->dtype,
                  "fp32|bf16: precision of the activations and of the weights the kernels read (bf16: mixed "
                  "precision with fp32 master weights, gradients and optimizer state; docs/precision.md)");
  sub->add_option("--comm", c->comm,
                  "mpi|nccl|mpi-staged: the grid's communicators (default: mpi; with --kernels cuda: nccl "
                  "when built with NCCL)");
  sub->add_option("--gemm", c->gemm, "CPU GEMM backend: onednn|openblas");
  sub->add_option("--gemm-tuning", c->gemm_tuning, "on|off: time each GEMM shape's layout variants the first time "
                  "it runs and keep the fastest (docs/gemm-tuning.md); the choices are reported at the end");
  sub->add_option("--gemm-tuning-report", c->gemm_tuning_report, "write the tuner's choices and timings to this "
                  "JSON file (rank 0's; needs --gemm-tuning on)");
  sub->add_option("--peak-gflops", c->peak_gflops,
                  "peak for MFU in GFLOP/s (0: measure at start: sgemm, or a dense bf16 GEMM with --kernels cuda)");
  sub->add_option("--synthetic-tokens", c->synthetic_tokens, "length of the built-in synthetic corpus");
  sub->add_flag("--quiet", c->quiet, "no per-step progress lines");
  // overlap, micro-batches, recompute, trace (docs/overlap.md)
  sub->add_option("--overlap", c->overlap, "collectives overlapped with computation: none|all|a list of "
                  "oar,ors,oag,dp (results are identical; all is the fastest measured, docs/overlap.md)");
  sub->add_option("--micro-batch-size", c->micro_batch_size, "sequences per rank per micro-batch; gradients "
                  "accumulate over the rank's sequences (0: one micro-batch of all of them)");
  sub->add_flag("--cache-gathered-weights", c->cache_gathered_weights, "keep the weights all-gathered over Z "
                "for the whole step (all micro-batches) instead of gathering them again; needs Gz > 1");
  sub->add_flag("--recompute", c->recompute, "keep only each block's input; recompute the block's forward "
                "(with its collectives) in the backward");
  sub->add_option("--reduce-scatter-slots", c->reduce_scatter_slots, "weight-gradient reduce-scatters in "
                  "flight at once under ORS");
  sub->add_option("--lm-head-chunk", c->lm_head_chunk, "run the LM head, softmax and cross-entropy on this many "
                  "tokens of the local batch at a time, never holding all their logits (0: all at once; "
                  "docs/performance.md)");
  sub->add_option("--trace", c->trace, "write a Chrome trace-event JSON timeline (Perfetto, chrome://tracing) "
                  "of the --trace-steps to this file; rank 0 writes every rank's spans (pid = rank)");
  sub->add_option("--trace-steps", c->trace_steps, "steps to trace, A:B or A, 1-based (default: 2:4 within "
                  "--steps)");
  sub->add_option("--stop-signal", c->stop_signal, "USR1|USR2|HUP|none: besides SIGTERM and SIGINT, the signal that "
                  "stops the run after the current step with a checkpoint (Slurm: sbatch --signal=USR1@120)");
  sub->add_option("--exit-after-steps", c->exit_after_steps, "stop after N steps of this run, with a checkpoint "
                  "(0: never)");
  sub->add_option("--exit-after-minutes", c->exit_after_minutes, "stop after the step that ends M minutes after the "
                  "start, with a checkpoint (0: never)");
  sub->add_option("--comm-timeout", c->comm_timeout, "seconds a rank may wait in one collective before the job is "
                  "aborted with a report of who did not arrive (0: no deadline)");
  sub->add_option("--skip-loss-z", c->skip_loss_z, "skip the update of a step whose loss has a z-score above this "
                  "over the last 128 steps, as llm.c's -sl (0: off; non-finite steps are always skipped)");
  sub->add_option("--skip-grad-z", c->skip_grad_z, "the same for the gradient norm, as llm.c's -sg (0: off)");
  sub->add_option("--max-bad-steps", c->max_bad_steps, "stop after this many skipped steps in a row (0: never)");
  sub->add_option("--fault-nonfinite-grad", c->fault_nonfinite_grad, "testing: put a NaN in a gradient of rank 0 at "
                  "these steps (1-based, comma-separated), for the guard's tests");
  sub->add_flag("--continue-on-save-error", c->continue_on_save_error,
                "a periodic checkpoint that cannot be written (full disk) is reported and the run trains on, instead of "
                "stopping; the previous checkpoint stays the latest, and the final save must still succeed");
  sub->add_flag("--allow-config-change", c->allow_config_change, "with --resume: continue with flags that change "
                "the recorded run (--data, --lr, --batch-size, ...), which are refused otherwise");
  sub->callback([c, action, sub] {
    // the flags on the command line: resuming restores the checkpoint's settings for all others
    c->given.emplace();
    for (const CLI::Option* o : sub->get_options())
      if (o->count() > 0) c->given->insert(o->get_name());
    *action = [c] {
      comm::CommOptions options;
      options.timeout_s = c->comm_timeout;
      const train::TrainResult r = train::run(*c, comm::world(options));
      // stopped by a signal with nothing saved: the conventional exit code of that signal, so that a
      // scheduler does not take the job for done
      if (r.stop == train::Stop::kBadSteps) return 1;  // the guard stopped a diverged run (said why)
      return r.stop == train::Stop::kSignal && r.checkpoint.empty() ? 128 + r.signal : 0;
    };
  });
}

}  // namespace axonn::tools
