// train/resume.cpp — the recorded configuration and what --resume restores (resume.hpp).
#include "resume.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/optim/adamw.hpp"
#include "axonn/parallel/grid.hpp"

namespace axonn::train::detail {

namespace fs = std::filesystem;

namespace {

// kOutput: where the run writes. Recorded for information only, never restored or compared: outputs
// come from the command line or the run directory (train/outputs.hpp), so that a copied, renamed or
// branched run, or a crafted manifest, never writes into another run's files.
enum class Change { kSafe, kTrajectory, kOutput };

// One recorded setting: its key in the manifest, the flags that set it, whether a new value is safe,
// and its text (what the manifest holds) from and into a config.
struct Setting {
  const char* key;
  std::vector<const char*> flags;
  Change change;
  std::function<std::string(const TrainConfig&)> get;
  std::function<void(TrainConfig&, const std::string&)> set;  // throws std::invalid_argument
};

// The shortest text that reads back as the same float.
std::string exact(float v) {
  char buf[40];
  for (int precision = 6; precision <= 9; precision++) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

// Strict parses of recorded values: the whole text, in range.
int64_t parse_int(const std::string& s, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    throw std::invalid_argument("not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}
int parse_int32(const std::string& s, int lo) { return static_cast<int>(parse_int(s, lo, INT32_MAX)); }
uint64_t parse_u64(const std::string& s) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || s[0] == '-' || *end != '\0' || errno == ERANGE) throw std::invalid_argument("not a 64-bit unsigned integer");
  return v;
}
float parse_float(const std::string& s) {
  errno = 0;
  char* end = nullptr;
  const float v = std::strtof(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno == ERANGE) throw std::invalid_argument("not a number");
  return v;
}
bool parse_bool(const std::string& s) {
  if (s != "true" && s != "false") throw std::invalid_argument("not true or false");
  return s == "true";
}
// Paths are recorded absolute, so that a job restarted from another directory finds them.
std::string absolute(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

// A setting held by one field of the config.
Setting int_setting(const char* key, const char* flag, Change change, int TrainConfig::*f, int lo) {
  return {key, {flag}, change, [f](const TrainConfig& c) { return std::to_string(c.*f); },
          [f, lo](TrainConfig& c, const std::string& v) { c.*f = parse_int32(v, lo); }};
}
Setting float_setting(const char* key, const char* flag, Change change, float TrainConfig::*f) {
  return {key, {flag}, change, [f](const TrainConfig& c) { return exact(c.*f); },
          [f](TrainConfig& c, const std::string& v) { c.*f = parse_float(v); }};
}
Setting bool_setting(const char* key, const char* flag, Change change, bool TrainConfig::*f) {
  return {key, {flag}, change, [f](const TrainConfig& c) { return std::string(c.*f ? "true" : "false"); },
          [f](TrainConfig& c, const std::string& v) { c.*f = parse_bool(v); }};
}
Setting text_setting(const char* key, const char* flag, Change change, std::string TrainConfig::*f) {
  return {key, {flag}, change, [f](const TrainConfig& c) { return c.*f; },
          [f](TrainConfig& c, const std::string& v) { c.*f = v; }};
}
Setting path_setting(const char* key, const char* flag, Change change, std::string TrainConfig::*f) {
  return {key, {flag}, change, [f](const TrainConfig& c) { return absolute(c.*f); },
          [f](TrainConfig& c, const std::string& v) { c.*f = v; }};
}

// Every recorded setting, in the order messages list them.
const std::vector<Setting>& settings() {
  constexpr Change kSafe = Change::kSafe, kTrajectory = Change::kTrajectory, kOutput = Change::kOutput;
  static const std::vector<Setting> all = {
      // the data: a token shard, or the built-in corpus of that many tokens
      Setting{"data", {"--data", "--synthetic-tokens"}, kTrajectory,
              [](const TrainConfig& c) {
                return c.data.empty() ? "synthetic:" + std::to_string(c.synthetic_tokens) : absolute(c.data);
              },
              [](TrainConfig& c, const std::string& v) {
                if (v.rfind("synthetic:", 0) == 0) {
                  c.data.clear();
                  c.synthetic_tokens = parse_int(v.substr(10), 1, INT64_MAX);
                } else {
                  c.data = v;
                }
              }},
      // the order the sequences are read in (data/token_dataset.hpp)
      bool_setting("shuffle", "--shuffle", kTrajectory, &TrainConfig::shuffle),
      Setting{"data_seed", {"--data-seed"}, kTrajectory, [](const TrainConfig& c) { return std::to_string(c.data_seed); },
              [](TrainConfig& c, const std::string& v) { c.data_seed = parse_u64(v); }},
      Setting{"seed", {"--seed"}, kTrajectory, [](const TrainConfig& c) { return std::to_string(c.seed); },
              [](TrainConfig& c, const std::string& v) { c.seed = parse_u64(v); }},
      int_setting("batch_size", "--batch-size", kTrajectory, &TrainConfig::batch_size, 1),
      int_setting("seq_len", "--seq-len", kTrajectory, &TrainConfig::seq_len, 1),
      int_setting("steps", "--steps", kSafe, &TrainConfig::steps, 1),
      float_setting("lr", "--lr", kTrajectory, &TrainConfig::lr),
      text_setting("lr_schedule", "--lr-schedule", kTrajectory, &TrainConfig::lr_schedule),
      int_setting("warmup_steps", "--warmup-steps", kTrajectory, &TrainConfig::warmup_steps, 0),
      float_setting("min_lr_frac", "--min-lr-frac", kTrajectory, &TrainConfig::min_lr_frac),
      float_setting("weight_decay", "--weight-decay", kTrajectory, &TrainConfig::weight_decay),
      bool_setting("decay_all", "--decay-all", kTrajectory, &TrainConfig::decay_all),
      float_setting("beta1", "--beta1", kTrajectory, &TrainConfig::beta1),
      float_setting("beta2", "--beta2", kTrajectory, &TrainConfig::beta2),
      float_setting("eps", "--eps", kTrajectory, &TrainConfig::eps),
      float_setting("grad_clip", "--grad-clip", kTrajectory, &TrainConfig::grad_clip),
      text_setting("dtype", "--dtype", kTrajectory, &TrainConfig::dtype),
      // the Goldfish loss (docs/goldfish.md)
      int_setting("goldfish_k", "--goldfish-k", kTrajectory, &TrainConfig::goldfish_k, 0),
      int_setting("goldfish_h", "--goldfish-h", kTrajectory, &TrainConfig::goldfish_h, 1),
      text_setting("goldfish_strategy", "--goldfish-strategy", kTrajectory, &TrainConfig::goldfish_strategy),
      int_setting("goldfish_start", "--goldfish-start", kTrajectory, &TrainConfig::goldfish_start, 0),
      path_setting("goldfish_table", "--goldfish-table", kTrajectory, &TrainConfig::goldfish_table),
      float_setting("skip_loss_z", "--skip-loss-z", kTrajectory, &TrainConfig::skip_loss_z),
      float_setting("skip_grad_z", "--skip-grad-z", kTrajectory, &TrainConfig::skip_grad_z),
      int_setting("max_bad_steps", "--max-bad-steps", kSafe, &TrainConfig::max_bad_steps, 0),
      // how it computes: the same steps (up to rounding for other kernels or micro-batches)
      text_setting("kernels", "--kernels", kSafe, &TrainConfig::kernels),
      text_setting("comm", "--comm", kSafe, &TrainConfig::comm),
      text_setting("gemm", "--gemm", kSafe, &TrainConfig::gemm),
      text_setting("overlap", "--overlap", kSafe, &TrainConfig::overlap),
      int_setting("micro_batch_size", "--micro-batch-size", kSafe, &TrainConfig::micro_batch_size, 0),
      bool_setting("recompute", "--recompute", kSafe, &TrainConfig::recompute),
      bool_setting("cache_gathered_weights", "--cache-gathered-weights", kSafe, &TrainConfig::cache_gathered_weights),
      int_setting("reduce_scatter_slots", "--reduce-scatter-slots", kSafe, &TrainConfig::reduce_scatter_slots, 1),
      int_setting("lm_head_chunk", "--lm-head-chunk", kSafe, &TrainConfig::lm_head_chunk, 0),
      // where its outputs go
      path_setting("checkpoint_dir", "--checkpoint-dir", kOutput, &TrainConfig::checkpoint_dir),
      int_setting("checkpoint_every", "--checkpoint-every", kSafe, &TrainConfig::checkpoint_every, 0),
      int_setting("keep", "--keep", kSafe, &TrainConfig::keep, 0),
      bool_setting("continue_on_save_error", "--continue-on-save-error", kSafe, &TrainConfig::continue_on_save_error),
      path_setting("metrics", "--metrics", kOutput, &TrainConfig::metrics),
      path_setting("save", "--save", kOutput, &TrainConfig::save),
      path_setting("val_data", "--val-data", kSafe, &TrainConfig::val_data),
      int_setting("val_every", "--val-every", kSafe, &TrainConfig::val_every, 0),
      int_setting("val_batches", "--val-batches", kSafe, &TrainConfig::val_batches, 1),
  };
  return all;
}

bool is_given(const TrainConfig& c, const std::vector<const char*>& flags) {
  if (!c.given) return true;
  for (const char* f : flags)
    if (c.given->count(f)) return true;
  return false;
}

std::string shown(const std::string& v) { return v.empty() ? "''" : v; }

std::string grid_text(const checkpoint::GridExtent& g) {
  return std::to_string(g.gx) + "," + std::to_string(g.gy) + "," + std::to_string(g.gz) + "," + std::to_string(g.gdata);
}

// More (or fewer) --steps re-plan a schedule that decays over the run: the learning rate of the next
// step jumps. Safe to continue (nothing of the run is lost), but never silent.
void warn_if_schedule_replanned(const TrainConfig& given, const TrainConfig& r, const checkpoint::Manifest& m) {
  auto it = m.extra.find("steps");
  if (it == m.extra.end() || !is_given(given, {"--steps"})) return;
  int recorded = 0;
  try {
    recorded = static_cast<int>(parse_int(it->second, 1, INT32_MAX));
  } catch (const std::invalid_argument&) {
    return;  // restore_config has refused a corrupt value already
  }
  const optim::LrSchedule schedule = optim::parse_lr_schedule(r.lr_schedule);
  if (recorded == r.steps || schedule == optim::LrSchedule::kConstant) return;
  const int next = static_cast<int>(m.step);  // the step this run trains first (0-based)
  const float was = optim::learning_rate(schedule, r.lr, next, r.warmup_steps, recorded, r.min_lr_frac);
  const float now = optim::learning_rate(schedule, r.lr, next, r.warmup_steps, r.steps, r.min_lr_frac);
  log_warn("resume    --steps %d (the checkpoint's run had %d) re-plans the %s schedule over %d steps: the learning "
           "rate of step %d is %.3g, where the recorded run would have had %.3g",
           r.steps, recorded, r.lr_schedule.c_str(), r.steps, next + 1, static_cast<double>(now),
           static_cast<double>(was));
}

}  // namespace

int64_t recorded_int(const checkpoint::Manifest& m, const std::string& key, int64_t lo, int64_t hi,
                     const std::string& dir, int64_t fallback) {
  auto it = m.extra.find(key);
  if (it == m.extra.end()) return fallback;
  try {
    return parse_int(it->second, lo, hi);
  } catch (const std::invalid_argument& e) {
    throw IoError(::axonn::detail::concat("checkpoint '", dir, "' records ", key, " = '", it->second, "': ", e.what(),
                                          "; the manifest is corrupt or was edited"));
  }
}

std::map<std::string, std::string> run_settings(const TrainConfig& c) {
  std::map<std::string, std::string> out;
  for (const Setting& s : settings()) out[s.key] = s.get(c);
  return out;
}

TrainConfig restore_config(const TrainConfig& c, const checkpoint::Manifest& m, const std::string& dir,
                           int world_size) {
  TrainConfig r = c;
  std::string restored, safe, refused, missing, not_taken;
  for (const Setting& s : settings()) {
    const std::string now = s.get(c);
    if (s.change == Change::kOutput) {
      auto it = m.extra.find(s.key);
      if (it != m.extra.end() && !it->second.empty() && it->second != now)
        not_taken += ::axonn::detail::concat(" ", s.flags.front(), " ", it->second);
      continue;
    }
    auto it = m.extra.find(s.key);
    if (it == m.extra.end()) {
      if (!is_given(c, s.flags)) missing += std::string(missing.empty() ? "" : ", ") + s.flags.front();
      continue;
    }
    // the recorded value as this build writes it (an older checkpoint's relative path made absolute)
    TrainConfig from_checkpoint = c;
    try {
      s.set(from_checkpoint, it->second);
    } catch (const std::invalid_argument& e) {
      throw IoError(::axonn::detail::concat("checkpoint '", dir, "' records ", s.key, " = '", it->second, "': ",
                                            e.what(), "; the manifest is corrupt or was edited"));
    }
    const std::string recorded = s.get(from_checkpoint);
    if (!is_given(c, s.flags)) {
      s.set(r, it->second);
      if (recorded != now) restored += ::axonn::detail::concat(" ", s.flags.front(), " ", shown(recorded));
      continue;
    }
    if (recorded == now) continue;
    const std::string change = ::axonn::detail::concat(s.flags.front(), " ", shown(now), " (the checkpoint's run had ",
                                                       shown(recorded), ")");
    if (s.change == Change::kSafe || c.allow_config_change) {
      if (s.change == Change::kTrajectory)
        log_warn("resume    %s: --allow-config-change, so the run continues with it, not as it was", change.c_str());
      else
        safe += (safe.empty() ? "" : ", ") + change;
    } else {
      refused += (refused.empty() ? "" : ", ") + change;
    }
  }
  AXONN_CHECK_ARG(refused.empty(), "resuming '", dir, "' with ", refused,
                  " would silently make another run than the checkpoint's. Drop those flags to continue the run as "
                  "recorded, or add --allow-config-change to continue with the new values");
  // the grid: the checkpoint's, unless another is given (then the state is resharded)
  const checkpoint::GridExtent& g = m.grid;
  if (!is_given(c, {"--grid", "--gx", "--gy", "--gz", "--gdata"})) {
    const int ranks = g.gx * g.gy * g.gz * g.gdata;
    AXONN_CHECK_ARG(ranks == world_size, "checkpoint '", dir, "' was written on grid ", grid_text(g), " (", ranks,
                    " rank", ranks > 1 ? "s" : "", "); this job has ", world_size,
                    ": run it on as many ranks, or give --grid for ", world_size,
                    " ranks to continue resharded");
    r.grid = grid_text(g);
    r.gx = r.gy = r.gz = r.gdata = 0;
  } else if (!c.grid.empty() && c.grid != "auto" && c.grid != grid_text(g)) {
    safe += std::string(safe.empty() ? "" : ", ") + "--grid " + c.grid + " (the checkpoint's was " + grid_text(g) +
            ": resharded)";
  }
  if (!restored.empty()) log_info("resume    the checkpoint's settings:%s", restored.c_str());
  if (!not_taken.empty())
    log_info("resume    the checkpoint's run wrote to%s; this run writes only where its own flags and --run-dir "
             "say", not_taken.c_str());
  if (!safe.empty()) log_info("resume    changed: %s", safe.c_str());
  warn_if_schedule_replanned(c, r, m);
  if (!missing.empty())
    log_warn("resume    the checkpoint does not record %s (written by an older axonn): the flags' values are used",
             missing.c_str());
  return r;
}

}  // namespace axonn::train::detail
