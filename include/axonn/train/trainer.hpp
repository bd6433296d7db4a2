// train/trainer.hpp — the training loop: data, model, optimizer, metrics and progress.
//
//   train::TrainConfig cfg;           // every field has the default `axonn train --help` shows
//   cfg.init = "model.bin"; cfg.data = "tokens.bin";
//   auto history = train::train(cfg); // one StepMetrics per step
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "axonn/comm/communicator.hpp"

namespace axonn::train {

struct TrainConfig {
  // model: an llm.c checkpoint, HF GPT-2 safetensors or a checkpoint directory's weights, or a named
  // shape (random init) with optional overrides
  std::string init;                 // --init FILE|DIR
  std::string model;                // --model NAME (default gpt2-tiny when no --init)
  int layers = 0, heads = 0, channels = 0, vocab = 0, max_seq_len = 0;  // overrides; 0 = from --model
  // data: llm.c token shards (a file, a glob, or a directory's training shards); empty = a synthetic
  // Markov-chain corpus generated in memory
  std::string data;                 // --data FILE|GLOB|DIR
  bool shuffle = false;             // --shuffle: a new order of the sequences every epoch (data/token_dataset.hpp)
  uint64_t data_seed = 0;           // --data-seed: that order's seed
  int64_t synthetic_tokens = 200000;
  // the 4D grid: --grid "GX,GY,GZ,GD" or the four numbers (0 = unset); default 1,1,1,world size;
  // "auto": the planner's choice for this model, batch and job size
  std::string grid;
  std::string machine;  // --machine for --grid auto: profile name or file; empty = the calibrated `local`
  int gx = 0, gy = 0, gz = 0, gdata = 0;
  // batch
  int batch_size = 4;               // --batch-size B: global, in sequences (split over Z and data)
  int seq_len = 64;                 // --seq-len T
  int steps = 50;                   // --steps N
  // optimizer
  float lr = 3e-4f;
  std::string lr_schedule = "cosine";
  int warmup_steps = 0;
  float min_lr_frac = 0.0f;
  float weight_decay = 0.0f;
  bool decay_all = false;           // decay every tensor (llm.c's CPU trainer), not only matrices
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float grad_clip = 1.0f;           // 0 = off
  uint64_t seed = 1337;
  // run
  std::string kernels = "cpu";      // cpu | ref | cuda (the GPU chosen by node-local rank)
  std::string comm;                 // mpi | nccl | mpi-staged; empty = train::default_comm(kernels)
  std::string dtype = "fp32";       // fp32 | bf16 (mixed precision, docs/precision.md)
  std::string gemm = "onednn";      // onednn | openblas
  std::string gemm_tuning = "off";  // on | off: the GEMM layout tuner (docs/gemm-tuning.md)
  std::string gemm_tuning_report;   // JSON file of the tuner's choices, written by rank 0 (needs tuning on)
  double peak_gflops = 0.0;         // MFU denominator; 0 = measure at start (sgemm; GPU: bf16 GEMM)
  std::string metrics;              // JSON Lines file, one object per step
  std::string save;                 // llm.c checkpoint written at the end (empty: none)
  // sharded checkpoints (docs/checkpoints.md)
  std::string checkpoint_dir;       // --checkpoint-dir DIR: where checkpoints are written
  int checkpoint_every = 0;         // --checkpoint-every N: every N steps (0: only at the end)
  int keep = 0;                     // --keep N: the newest N checkpoints (0: all)
  bool resume = false;              // --resume: continue from the latest checkpoint in checkpoint_dir
  std::string resume_from;          // --resume-from DIR: continue from that checkpoint (any grid)
  bool quiet = false;               // no per-step progress lines
  // overlap, micro-batches, recompute and the timeline trace (docs/overlap.md)
  std::string overlap = "all";      // --overlap none|all|oar,ors,oag,dp (results are identical for all)
  int micro_batch_size = 0;         // sequences per rank per micro-batch (gradient accumulation); 0 = all
  bool cache_gathered_weights = false;  // keep the Z-gathered weights for the whole step (needs Gz > 1)
  bool recompute = false;           // activation recompute per transformer block
  int reduce_scatter_slots = 4;     // ORS: weight-gradient blocks in flight at once
  std::string trace;                // Chrome trace-event JSON of the traced steps, written by rank 0
  std::string trace_steps;          // "A:B" (1-based, inclusive) or "A"; default 2:4, within --steps
};

struct StepMetrics {
  int step = 0;           // 0-based, counted from the start of training (a resumed run goes on)
  float loss = 0.0f;      // mean loss of this step's forward, before its update
  float lr = 0.0f;
  double grad_norm = 0.0; // before clipping
  double step_ms = 0.0;
  double tokens_per_s = 0.0;
  double mfu = 0.0;       // model FLOPs / step time / peak
};

// The traced steps of --trace-steps: [first, last], 1-based. An empty text gives 2..min(4, steps)
// (step 1 warms up), or step 1 when there is only one. Throws InvalidArgument outside [1, steps].
std::pair<int, int> parse_trace_steps(const std::string& text, int steps);

// Validates the configuration (InvalidArgument with what to change), builds the grid over `world`
// and everything on it, trains, and returns the metrics of the steps it ran (the same on every rank).
// Collective over world. Progress goes to the log (rank 0); the metrics file is written by rank 0.
std::vector<StepMetrics> train(const TrainConfig& config, std::shared_ptr<comm::Communicator> world);

}  // namespace axonn::train
