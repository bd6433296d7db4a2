// train/resume.cpp — the recorded configuration and what --resume restores (resume.hpp).
#include "resume.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/optim/adamw.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/train/config_file.hpp"

namespace axonn::train::detail {

namespace fs = std::filesystem;

namespace {

// One recorded setting: its key in the manifest, the flags that set it, how it may change (from the
// settings' table, config_options()), and its text (what the manifest holds) from and into a config.
// kOutput settings are recorded for information only, never restored or compared: outputs come from
// the command line or the run directory (train/outputs.hpp), so that a copied, renamed or branched run,
// or a crafted manifest, never writes into another run's files.
struct Setting {
  std::string key;
  std::vector<const char*> flags;
  OnResume change;
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

// The text of a recorded value of each type of field, and its strict parse.
std::string text_of(int v) { return std::to_string(v); }
std::string text_of(int64_t v) { return std::to_string(v); }
std::string text_of(uint64_t v) { return std::to_string(v); }
std::string text_of(float v) { return exact(v); }
std::string text_of(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
std::string text_of(bool v) { return v ? "true" : "false"; }
void parse_into(int& out, const std::string& v) { out = parse_int32(v, 0); }  // recorded counts are >= 0
void parse_into(int64_t& out, const std::string& v) { out = parse_int(v, 0, INT64_MAX); }
void parse_into(uint64_t& out, const std::string& v) { out = parse_u64(v); }
void parse_into(float& out, const std::string& v) { out = parse_float(v); }
void parse_into(double& out, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  out = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno == ERANGE) throw std::invalid_argument("not a number");
}
void parse_into(bool& out, const std::string& v) { out = parse_bool(v); }
void parse_into(std::string& out, const std::string& v) { out = v; }

// The setting of one option of the table: its field's text, a path made absolute.
Setting recorded(const ConfigOption& o) {
  return std::visit(
      [&](auto field) -> Setting {
        const bool path = o.path;
        return {o.record_key(), {o.flag}, o.on_resume,
                [field, path](const TrainConfig& c) {
                  if constexpr (std::is_same_v<decltype(field), std::string TrainConfig::*>)
                    return path ? absolute(c.*field) : c.*field;
                  else
                    return text_of(c.*field);
                },
                [field](TrainConfig& c, const std::string& v) { parse_into(c.*field, v); }};
      },
      o.field);
}

// Every recorded setting, in the table's order (the order messages list them). The data is one
// setting of two flags: a token shard, or the built-in corpus of that many tokens.
const std::vector<Setting>& settings() {
  static const std::vector<Setting> all = [] {
    std::vector<Setting> out;
    for (const ConfigOption& o : config_options()) {
      if (o.on_resume == OnResume::kNotRecorded) continue;
      if (std::string_view(o.flag) == "--data") {
        out.push_back({"data", {"--data", "--synthetic-tokens"}, o.on_resume,
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
                       }});
        continue;
      }
      out.push_back(recorded(o));
    }
    return out;
  }();
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
void warn_if_schedule_replanned(const checkpoint::Manifest& m, const TrainConfig& r) {
  // the recorded run's horizon: its --lr-decay-steps, or its --steps
  auto recorded_setting = [&](const char* key) -> int {
    auto it = m.extra.find(key);
    if (it == m.extra.end()) return 0;
    try {
      return static_cast<int>(parse_int(it->second, 0, INT32_MAX));
    } catch (const std::invalid_argument&) {
      return 0;  // restore_config has refused a corrupt value already
    }
  };
  const int recorded_steps = recorded_setting("steps"), recorded_decay = recorded_setting("lr_decay_steps");
  if (recorded_steps == 0) return;
  const int was_horizon = recorded_decay > 0 ? recorded_decay : recorded_steps, horizon = lr_horizon(r);
  const optim::LrSchedule schedule = optim::parse_lr_schedule(r.lr_schedule);
  if (horizon == was_horizon || schedule == optim::LrSchedule::kConstant) return;
  const int next = static_cast<int>(m.step);  // the step this run trains first (0-based)
  const float was = optim::learning_rate(schedule, r.lr, next, r.warmup_steps, was_horizon, r.min_lr_frac);
  const float now = optim::learning_rate(schedule, r.lr, next, r.warmup_steps, horizon, r.min_lr_frac);
  if (r.lr_decay_steps == 0)  // re-planned by --steps (the default): say how to keep the recorded one
    log_warn("resume    --steps %d (the checkpoint's run had %d) re-plans the %s schedule over %d steps: the learning "
             "rate of step %d is %.3g, where the recorded run would have had %.3g; to keep the recorded schedule, "
             "add --lr-decay-steps %d",
             r.steps, recorded_steps, r.lr_schedule.c_str(), r.steps, next + 1, static_cast<double>(now),
             static_cast<double>(was), was_horizon);
  else
    log_warn("resume    --lr-decay-steps %d re-plans the %s schedule, whose decay the recorded run ended at step %d: "
             "the learning rate of step %d is %.3g, where the recorded run would have had %.3g",
             r.lr_decay_steps, r.lr_schedule.c_str(), was_horizon, next + 1, static_cast<double>(now),
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
    if (s.change == OnResume::kOutput) {
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
    if (s.change == OnResume::kSafe || c.allow_config_change) {
      if (s.change == OnResume::kTrajectory)
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
  warn_if_schedule_replanned(m, r);
  if (!missing.empty())
    log_warn("resume    the checkpoint does not record %s (written by an older axonn): the flags' values are used",
             missing.c_str());
  return r;
}

}  // namespace axonn::train::detail
