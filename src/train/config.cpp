// train/config.cpp — the checks of a TrainConfig that need neither the world nor a file.
#include "axonn/train/config.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "axonn/core/error.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/kernels/gemm_tuner.hpp"
#include "axonn/parallel/overlap.hpp"
#include "checkpointing.hpp"
#include "stop.hpp"

namespace axonn::train {

std::pair<int, int> parse_trace_steps(const std::string& text, int steps) {
  if (text.empty()) return steps == 1 ? std::pair{1, 1} : std::pair{2, std::min(4, steps)};
  int a = 0, b = 0;
  char extra = 0;
  const int got = std::sscanf(text.c_str(), "%d:%d%c", &a, &b, &extra);
  if (got == 1 && text.find(':') == std::string::npos) b = a;
  AXONN_CHECK_ARG((got == 2 || (got == 1 && b == a)) && a >= 1 && b >= a && b <= steps,
                  "--trace-steps wants A:B or A with 1 <= A <= B <= --steps (", steps, "), got '", text, "'");
  return {a, b};
}

std::set<int> fault_steps(const TrainConfig& c) {
  std::set<int> steps;
  const std::string& t = c.fault_nonfinite_grad;
  size_t at = 0;
  while (at < t.size()) {
    const size_t comma = t.find(',', at);
    const std::string item = t.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    AXONN_CHECK_ARG(!item.empty() && *end == '\0' && v >= 1 && v <= INT32_MAX,
                    "--fault-nonfinite-grad wants a comma-separated list of steps (1-based), got '", t, "'");
    steps.insert(static_cast<int>(v));
    at = comma == std::string::npos ? t.size() : comma + 1;
  }
  return steps;
}

model::GoldfishConfig goldfish_config(const TrainConfig& c) {
  model::GoldfishConfig g;
  g.k = c.goldfish_k;
  g.h = c.goldfish_h;
  g.strategy = model::parse_goldfish_strategy(c.goldfish_strategy);
  g.start = c.goldfish_start;
  g.table = c.goldfish_table;
  return g;
}

namespace {

void validate_goldfish(const TrainConfig& c) {
  const bool k_given = c.given && c.given->count("--goldfish-k") > 0;
  AXONN_CHECK_ARG(c.goldfish_k >= 2 || (c.goldfish_k == 0 && !k_given), "--goldfish-k must be >= 2 (about 1/K of "
                  "the targets leave the loss; leave the flag out for the standard loss), got ", c.goldfish_k);
  const model::GoldfishStrategy s = model::parse_goldfish_strategy(c.goldfish_strategy);
  AXONN_CHECK_ARG(c.goldfish_h >= 1, "--goldfish-h must be >= 1 (the hashed context width), got ", c.goldfish_h);
  AXONN_CHECK_ARG(c.goldfish_start >= 0, "--goldfish-start must be >= 0, got ", c.goldfish_start);
  const bool tuned = c.goldfish_h != 13 || s != model::GoldfishStrategy::kHashAvalanche || c.goldfish_start != 0 ||
                     !c.goldfish_table.empty();
  AXONN_CHECK_ARG(c.goldfish_k != 0 || !tuned, "--goldfish-h, --goldfish-strategy, --goldfish-start and "
                  "--goldfish-table set up the Goldfish loss; turn it on with --goldfish-k K (K >= 2)");
  AXONN_CHECK_ARG(c.goldfish_start == 0 || s == model::GoldfishStrategy::kStatic,
                  "--goldfish-start is the first dropped position of --goldfish-strategy static; add that strategy "
                  "or drop the flag");
  const bool table = s == model::GoldfishStrategy::kHashTable;
  AXONN_CHECK_ARG(!table || !c.goldfish_table.empty(),
                  "--goldfish-strategy hash-table needs --goldfish-table FILE (the table's format: docs/goldfish.md)");
  AXONN_CHECK_ARG(table || c.goldfish_table.empty(), "--goldfish-table is the table of --goldfish-strategy "
                  "hash-table; add that strategy or drop the table");
}

}  // namespace

model::ShapeOverrides shape_overrides(const TrainConfig& c) {
  return {c.layers, c.heads, c.kv_heads, c.channels, c.ffn, c.vocab, c.max_seq_len, c.rope_theta, c.tie_embeddings};
}

TrainChoices parse_choices(const TrainConfig& c) {
  TrainChoices t;
  t.backend = kernels::parse_backend(c.kernels);
  t.gemm = kernels::parse_gemm_backend(c.gemm);
  t.gemm_tuning = kernels::parse_gemm_tuning(c.gemm_tuning);
  t.precision = parse_precision(c.dtype);
  t.overlap = parallel::parse_overlap(c.overlap);
  if (!c.grid_order.empty()) t.grid_order = parallel::parse_grid_order(c.grid_order);
  t.lr_schedule = optim::parse_lr_schedule(c.lr_schedule);
  return t;
}

void validate_config(const TrainConfig& c) {
  AXONN_CHECK_ARG(c.batch_size > 0, "--batch-size must be positive, got ", c.batch_size);
  AXONN_CHECK_ARG(c.seq_len > 0, "--seq-len must be positive, got ", c.seq_len);
  AXONN_CHECK_ARG(c.steps > 0, "--steps must be positive, got ", c.steps);
  AXONN_CHECK_ARG(c.lr >= 0 && std::isfinite(c.lr), "--lr must be a finite value >= 0, got ", c.lr);
  AXONN_CHECK_ARG(c.warmup_steps >= 0, "--warmup-steps must be >= 0, got ", c.warmup_steps);
  AXONN_CHECK_ARG(c.lr_decay_steps >= 0, "--lr-decay-steps must be >= 0 (0: --steps), got ", c.lr_decay_steps);
  AXONN_CHECK_ARG(c.min_lr_frac >= 0 && c.min_lr_frac <= 1, "--min-lr-frac must be in [0, 1], got ", c.min_lr_frac);
  AXONN_CHECK_ARG(c.grad_clip >= 0, "--grad-clip must be >= 0 (0 = off), got ", c.grad_clip);
  AXONN_CHECK_ARG(c.beta1 >= 0 && c.beta1 < 1, "--beta1 must be in [0, 1) (AdamW's first-moment decay), got ", c.beta1);
  AXONN_CHECK_ARG(c.beta2 >= 0 && c.beta2 < 1, "--beta2 must be in [0, 1) (AdamW's second-moment decay), got ", c.beta2);
  AXONN_CHECK_ARG(c.eps > 0 && std::isfinite(c.eps), "--eps must be a finite value > 0 (AdamW's denominator term), got ",
                  c.eps);
  AXONN_CHECK_ARG(c.weight_decay >= 0 && std::isfinite(c.weight_decay), "--weight-decay must be a finite value >= 0, "
                  "got ", c.weight_decay);
  // an empty --data would silently mean the built-in corpus: a path that expanded to nothing
  AXONN_CHECK_ARG(!c.data.empty() || !c.given || !c.given->count("--data"), "--data is empty (an unset variable?): "
                  "give token shards (a file, a glob or a directory), or leave --data out for the built-in corpus");
  AXONN_CHECK_ARG(c.layers >= 0 && c.heads >= 0 && c.channels >= 0 && c.vocab >= 0 && c.max_seq_len >= 0,
                  "--layers, --heads, --channels, --vocab and --max-seq-len must be positive");
  AXONN_CHECK_ARG(c.peak_gflops >= 0, "--peak-gflops must be >= 0 (0 = measure), got ", c.peak_gflops);
  AXONN_CHECK_ARG(c.gx >= 0 && c.gy >= 0 && c.gz >= 0 && c.gdata >= 0, "--gx, --gy, --gz and --gdata must be positive");
  AXONN_CHECK_ARG(c.grid.empty() || !(c.gx || c.gy || c.gz || c.gdata),
                  "give the grid either as --grid GX,GY,GZ,GD or as --gx --gy --gz --gdata, not both");
  const bool overrides = shape_overrides(c).any();
  AXONN_CHECK_ARG(c.init.empty() || (c.model.empty() && c.model_config.empty() && !overrides),
                  "--init takes the model's shape from the checkpoint; drop --model and the shape flags (and "
                  "--model-config: --layers --heads --kv-heads --channels --ffn --vocab --max-seq-len --rope-theta "
                  "--tie-embeddings)");
  AXONN_CHECK_ARG(c.model.empty() || c.model_config.empty(),
                  "give the shape either as --model NAME or as --model-config config.json, not both");
  AXONN_CHECK_ARG(c.val_every >= 0, "--val-every must be >= 0 (0: after the last step only), got ", c.val_every);
  AXONN_CHECK_ARG(c.val_batches >= 1, "--val-batches must be >= 1, got ", c.val_batches);
  AXONN_CHECK_ARG(!c.val_data.empty() || c.val_every == 0,
                  "--val-every chooses when --val-data is evaluated; give --val-data FILE too");
  AXONN_CHECK_ARG(c.skip_loss_z >= 0 && std::isfinite(c.skip_loss_z), "--skip-loss-z must be >= 0 (0: off), got ",
                  c.skip_loss_z);
  AXONN_CHECK_ARG(c.skip_grad_z >= 0 && std::isfinite(c.skip_grad_z), "--skip-grad-z must be >= 0 (0: off), got ",
                  c.skip_grad_z);
  AXONN_CHECK_ARG(c.max_bad_steps >= 0, "--max-bad-steps must be >= 0 (0: never stop), got ", c.max_bad_steps);
  (void)fault_steps(c);
  validate_goldfish(c);
  detail::validate_checkpoint_flags(c);
  (void)detail::parse_stop_signal(c.stop_signal);
  AXONN_CHECK_ARG(c.comm_timeout >= 0 && std::isfinite(c.comm_timeout),
                  "--comm-timeout must be a finite number of seconds >= 0 (0: no deadline), got ", c.comm_timeout);
  AXONN_CHECK_ARG(c.exit_after_steps >= 0, "--exit-after-steps must be >= 0 (0: never), got ", c.exit_after_steps);
  AXONN_CHECK_ARG(c.exit_after_minutes >= 0 && std::isfinite(c.exit_after_minutes),
                  "--exit-after-minutes must be a finite value >= 0 (0: never), got ", c.exit_after_minutes);
  (void)parse_choices(c);
  AXONN_CHECK_ARG(c.micro_batch_size >= 0, "--micro-batch-size must be >= 0 (0 = all of a rank's sequences), got ",
                  c.micro_batch_size);
  AXONN_CHECK_ARG(c.reduce_scatter_slots >= 1, "--reduce-scatter-slots must be >= 1, got ", c.reduce_scatter_slots);
  AXONN_CHECK_ARG(c.lm_head_chunk >= 0, "--lm-head-chunk must be >= 0 rows (0: the whole local batch at once), got ",
                  c.lm_head_chunk);
  AXONN_CHECK_ARG(c.trace_steps.empty() || !c.trace.empty(),
                  "--trace-steps chooses the steps written by --trace; give --trace FILE too");
  if (!c.trace.empty()) (void)parse_trace_steps(c.trace_steps, c.steps);
  AXONN_CHECK_ARG(c.gemm_tuning_report.empty() || kernels::parse_gemm_tuning(c.gemm_tuning),
                  "--gemm-tuning-report writes the GEMM tuner's choices; add --gemm-tuning on");
}

}  // namespace axonn::train
