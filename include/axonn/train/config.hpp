// train/config.hpp — what a training run is: every setting of `axonn train`, with its default.
//
//   train::TrainConfig cfg;           // every field has the default `axonn train --help` shows
//   cfg.init = "model.bin"; cfg.data = "tokens.bin";
//   train::validate_config(cfg);      // InvalidArgument naming the flag and what to change
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "axonn/core/dtype.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/model/goldfish.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/optim/adamw.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/parallel/overlap.hpp"

namespace axonn::train {

struct TrainConfig {
  // model: an llm.c checkpoint, HF GPT-2 safetensors or a checkpoint directory's weights, or a named
  // shape (random init) with optional overrides
  std::string init;                 // --init FILE|DIR
  std::string model;                // --model NAME (default gpt2-tiny when no --init)
  std::string model_config;         // --model-config config.json: a Hugging Face config as the shape
  int layers = 0, heads = 0, channels = 0, vocab = 0, max_seq_len = 0;  // overrides; 0 = from --model
  int kv_heads = 0, ffn = 0;        // Llama: --kv-heads, --ffn (intermediate size); 0 = from --model
  double rope_theta = 0.0;          // Llama: --rope-theta; 0 = from --model
  std::string tie_embeddings;       // Llama: --tie-embeddings on|off; empty = from --model
  // data: llm.c token shards (a file, a glob, or a directory's training shards: data::find_shards);
  // empty = a synthetic Markov-chain corpus generated in memory
  std::string data;                 // --data FILE|GLOB|DIR
  bool shuffle = false;             // --shuffle: a new order of the sequences every epoch (data/token_dataset.hpp)
  uint64_t data_seed = 0;           // --data-seed: that order's seed
  int64_t synthetic_tokens = 200000;
  // validation: the mean loss of the first --val-batches batches of --val-data (forwards only) every
  // --val-every steps and after the last step
  std::string val_data;             // --val-data FILE|GLOB|DIR (a directory's val shards; empty: no validation)
  int val_every = 0;                // --val-every N (0: after the last step only)
  int val_batches = 10;             // --val-batches M: batches of --batch-size x --seq-len tokens
  // the 4D grid: --grid "GX,GY,GZ,GD" or the four numbers (0 = unset); default 1,1,1,world size;
  // "auto": the planner's choice for this model, batch and job size
  std::string grid;
  std::string machine;  // --machine for --grid auto: profile name or file; empty = the calibrated `local`
  // --grid-order: the rank order of X, Y, Z, fastest first (docs/multi-host.md); empty = x,y,z, or with
  // --grid auto the planner's choice among every order
  std::string grid_order;
  int gx = 0, gy = 0, gz = 0, gdata = 0;
  // batch
  int batch_size = 4;               // --batch-size B: global, in sequences (split over Z and data)
  int seq_len = 64;                 // --seq-len T
  int steps = 50;                   // --steps N
  // optimizer
  float lr = 3e-4f;
  std::string lr_schedule = "cosine";
  int warmup_steps = 0;
  int lr_decay_steps = 0;           // the step by which the decay ends (0: --steps); lr_horizon() below
  float min_lr_frac = 0.0f;
  float weight_decay = 0.0f;
  bool decay_all = false;           // decay every tensor (llm.c's CPU trainer), not only matrices
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float grad_clip = 1.0f;           // 0 = off
  uint64_t seed = 1337;
  // the Goldfish loss (model/goldfish.hpp, docs/goldfish.md): about 1/k of the targets leave the loss
  int goldfish_k = 0;                              // --goldfish-k K >= 2 (0: off, the standard loss)
  int goldfish_h = 13;                             // --goldfish-h H: the hashed context width
  std::string goldfish_strategy = "hash-avalanche";  // --goldfish-strategy hash-avalanche|static|hash-table
  int goldfish_start = 0;                          // --goldfish-start P: static's first dropped position
  std::string goldfish_table;                      // --goldfish-table FILE: hash-table's table
  // run
  std::string kernels = "cpu";      // cpu | ref | cuda (the GPU chosen by node-local rank)
  std::string comm;                 // mpi | nccl | mpi-staged; empty = launch::default_comm(kernels)
  std::string dtype = "fp32";       // fp32 | bf16 (mixed precision, docs/precision.md)
  std::string gemm = "onednn";      // onednn | openblas
  std::string gemm_tuning = "off";  // on | off: the GEMM layout tuner (docs/gemm-tuning.md)
  std::string gemm_tuning_report;   // JSON file of the tuner's choices, written by rank 0 (needs tuning on)
  double peak_gflops = 0.0;         // MFU denominator; 0 = measure at start (sgemm; GPU: bf16 GEMM)
  // the run directory (train/run_dir.hpp): config.toml and run.json, and by default (when the flags are
  // not given) the metrics, the trace and the checkpoints; empty: none
  std::string run_dir;              // --run-dir DIR
  std::string metrics;              // JSON Lines file, one object per step
  std::string save;                 // llm.c checkpoint written at the end (empty: none)
  // sharded checkpoints (docs/checkpoints.md)
  std::string checkpoint_dir;       // --checkpoint-dir DIR: where checkpoints are written
  int checkpoint_every = 0;         // --checkpoint-every N: every N steps (0: only at the end)
  int keep = 0;                     // --keep N: the newest N checkpoints (0: all)
  // A periodic checkpoint that cannot be written (a full disk) stops the run with its error, the previous
  // checkpoint staying the latest; with this the run warns and trains on (the final save still must succeed).
  bool continue_on_save_error = false;  // --continue-on-save-error
  bool resume = false;              // --resume: continue from the latest checkpoint in checkpoint_dir
  std::string resume_from;          // --resume-from DIR: continue from that checkpoint (any grid)
  // Resuming restores the checkpoint's recorded configuration (train/resume.hpp) except the flags in
  // `given` (the ones on the command line, e.g. "--steps"); nullopt: every field counts as given (a
  // library caller's whole config). A given flag that would change the run's trajectory (--data, --lr,
  // --batch-size, ...) is refused unless allow_config_change; safe ones (--steps, --grid, ...) are reported.
  std::optional<std::set<std::string>> given;
  bool allow_config_change = false;  // --allow-config-change
  // --allow-data-change: resume although the data's files changed since the checkpoint (its
  // fingerprint: data::TokenCorpus::fingerprint); refused otherwise, naming what changed
  bool allow_data_change = false;
  // --overwrite: this run may replace what another run wrote into its outputs (train/outputs.hpp).
  // An ask of one command line, never written into config.toml.
  bool overwrite = false;
  bool quiet = false;               // no per-step progress lines
  // stopping early (docs/resilience.md): on SIGTERM, SIGINT or --stop-signal every rank stops after the
  // current step and checkpoints; a second signal stops at once. Also after N steps of this run or M
  // minutes since it started (0: never), as Megatron's exit interval and duration.
  std::string stop_signal = "USR1";  // --stop-signal USR1|USR2|HUP|none
  int exit_after_steps = 0;          // --exit-after-steps N
  double exit_after_minutes = 0.0;   // --exit-after-minutes M
  // the watchdog: a blocking wait of a collective longer than this aborts the job with a report of
  // which collective, group and step, and what every rank does (comm::CommOptions::timeout_s; set
  // where the world is made, tools/axonn/cmd_train.cpp)
  double comm_timeout = 600;         // --comm-timeout SECONDS (0: none)
  // the numerical guard (guard.hpp): steps with a non-finite loss or gradient norm are skipped;
  // optionally also outliers (z-score over the last 128 steps above the threshold; 0: off)
  float skip_loss_z = 0.0f;          // --skip-loss-z Z (llm.c's -sl)
  float skip_grad_z = 0.0f;          // --skip-grad-z Z (llm.c's -sg)
  int max_bad_steps = 10;            // --max-bad-steps N: stop after N skipped steps in a row (0: never)
  std::string fault_nonfinite_grad;  // testing: "3,7": a NaN gradient on world rank 0 at these steps (1-based)
  // overlap, micro-batches, recompute and the timeline trace (docs/overlap.md)
  std::string overlap = "all";      // --overlap none|all|oar,ors,oag,dp (results are identical for all)
  int micro_batch_size = 0;         // sequences per rank per micro-batch (gradient accumulation); 0 = all
  bool cache_gathered_weights = false;  // keep the Z-gathered weights for the whole step (needs Gz > 1)
  bool recompute = false;           // activation recompute per transformer block
  int reduce_scatter_slots = 4;     // ORS: weight-gradient blocks in flight at once
  int lm_head_chunk = 0;            // --lm-head-chunk ROWS: the LM head + cross-entropy by chunks (0: at once)
  std::string trace;                // Chrome trace-event JSON of the traced steps, written by rank 0
  std::string trace_steps;          // "A:B" (1-based, inclusive) or "A"; default 2:4, within --steps
};

// The traced steps of --trace-steps: [first, last], 1-based. An empty text gives 2..min(4, steps)
// (step 1 warms up), or step 1 when there is only one. Throws InvalidArgument outside [1, steps].
std::pair<int, int> parse_trace_steps(const std::string& text, int steps);

// The learning-rate schedule's horizon: --lr-decay-steps, or --steps when it is 0.
inline int lr_horizon(const TrainConfig& c) { return c.lr_decay_steps > 0 ? c.lr_decay_steps : c.steps; }

// The steps (1-based) of --fault-nonfinite-grad. InvalidArgument for a malformed list.
std::set<int> fault_steps(const TrainConfig& c);

// The shape flags (model::apply_shape's overrides).
model::ShapeOverrides shape_overrides(const TrainConfig& c);

// The Goldfish settings as the mask takes them (k = 0: off). The strategy must be valid (validate_config).
model::GoldfishConfig goldfish_config(const TrainConfig& c);

// The settings that name a choice, parsed once into what the code uses (a Session keeps them; nothing
// downstream reads their text again). InvalidArgument naming the flag and the values it takes.
struct TrainChoices {
  kernels::Backend backend = kernels::Backend::kCpu;  // --kernels
  kernels::GemmBackend gemm{};                        // --gemm
  bool gemm_tuning = true;                            // --gemm-tuning
  DType precision = DType::kF32;                      // --dtype
  parallel::Overlap overlap;                          // --overlap
  std::optional<parallel::GridOrder> grid_order;      // --grid-order; unset: x,y,z, or the planner's with --grid auto
  optim::LrSchedule lr_schedule{};                    // --lr-schedule
};
TrainChoices parse_choices(const TrainConfig& c);

// Checks every value that needs neither the world nor a file (InvalidArgument saying what to
// change). train::Session calls it; tools may call it before anything is built.
void validate_config(const TrainConfig& c);

}  // namespace axonn::train
