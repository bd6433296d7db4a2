// train/config_file.cpp — the table of axonn train's settings, and the TOML config file read and written
// with it (config_file.hpp).
#include "axonn/train/config_file.hpp"

#include <cstdio>
#include <cerrno>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <toml++/toml.h>

#include "axonn/core/error.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/train/run_dir.hpp"

namespace axonn::train {

namespace {

using C = TrainConfig;
using R = OnResume;
constexpr bool kPath = true;  // recorded as an absolute path

}  // namespace

std::string ConfigOption::record_key() const {
  std::string k = key();
  for (char& ch : k)
    if (ch == '-') ch = '_';
  return k;
}

const std::vector<const char*>& config_sections() {
  static const std::vector<const char*> sections = {"model",    "data",    "training",   "optimizer",
                                                    "parallel", "compute", "checkpoint", "logging"};
  return sections;
}

const std::vector<ConfigOption>& config_options() {
  static const std::vector<ConfigOption> options = {
      // what is trained
      {"model", "--init", &C::init,
       "weights to start from: llm.c file (version 3 fp32 or 5 bf16), Hugging Face safetensors file or model "
       "directory (GPT-2 or Llama), GGUF file (llama or gpt2; F32, F16, BF16 or Q8_0), or a checkpoint directory "
       "(any grid; fresh optimizer)"},
      {"model", "--model", &C::model, "model shape for random init (default gpt2-tiny): " + model::gpt_preset_help()},
      {"model", "--layers", &C::layers, "override the number of layers (0: from --model)"},
      {"model", "--heads", &C::heads, "override the number of attention heads"},
      {"model", "--channels", &C::channels, "override the hidden size"},
      {"model", "--vocab", &C::vocab, "override the vocabulary size (padded to a multiple of 128)"},
      {"model", "--max-seq-len", &C::max_seq_len, "override the number of positions"},
      {"model", "--kv-heads", &C::kv_heads, "Llama: override the key/value heads of grouped-query attention"},
      {"model", "--ffn", &C::ffn, "Llama: override the MLP's intermediate size"},
      {"model", "--rope-theta", &C::rope_theta, "Llama: override RoPE's base theta"},
      {"model", "--tie-embeddings", &C::tie_embeddings,
       "Llama: on|off, the LM head tied to the token embedding or its own (default: the model's)"},
      {"model", "--model-config", &C::model_config,
       "a Hugging Face config.json (GPT2LMHeadModel or LlamaForCausalLM) as the shape for random init, instead of "
       "--model; the shape flags override it"},
      // what it reads
      {"data", "--data", &C::data,
       "llm.c token shards: a file, a glob, or a directory (its *.bin without 'val', as axonn prepare writes "
       "them); default: a built-in synthetic corpus", R::kTrajectory, kPath},
      {"data", "--shuffle", &C::shuffle,
       "read the sequences in a new pseudo-random order every epoch (the same on every grid; resumable)", R::kTrajectory},
      {"data", "--data-seed", &C::data_seed, "seed of the --shuffle order", R::kTrajectory},
      {"data", "--synthetic-tokens", &C::synthetic_tokens, "length of the built-in synthetic corpus"},
      {"data", "--val-data", &C::val_data,
       "llm.c token shards to validate on (a file, a glob, or a directory's *.bin with 'val' in their names): "
       "val_loss in the progress line and the metrics, forwards only", R::kSafe, kPath},
      {"data", "--val-every", &C::val_every, "validate every N steps (0: after the last step only)", R::kSafe},
      {"data", "--val-batches", &C::val_batches,
       "batches of --batch-size x --seq-len tokens per validation, from the start of --val-data", R::kSafe},
      // the steps and the loss
      {"training", "--seed", &C::seed, "random seed (initialisation, synthetic data)", R::kTrajectory},
      {"training", "--batch-size", &C::batch_size, "global batch, in sequences (split over Z and data)", R::kTrajectory},
      {"training", "--seq-len", &C::seq_len, "tokens per sequence", R::kTrajectory},
      {"training", "--steps", &C::steps, "training steps", R::kSafe},
      {"training", "--goldfish-k", &C::goldfish_k,
       "Goldfish loss: drop about 1/K of the targets from the loss, the same ones wherever a passage repeats "
       "(K >= 2; default: off, the standard loss)", R::kTrajectory},
      {"training", "--goldfish-h", &C::goldfish_h,
       "Goldfish: the context width H, the targets hashed per decision (the H-1 before a target and itself; its "
       "first H-1 targets are never dropped)", R::kTrajectory},
      {"training", "--goldfish-strategy", &C::goldfish_strategy,
       "Goldfish: hash-avalanche (integer hash of the H-gram)|static (every K-th position from "
       "--goldfish-start)|hash-table (the authors' table, --goldfish-table)", R::kTrajectory},
      {"training", "--goldfish-start", &C::goldfish_start, "Goldfish static: the first dropped position", R::kTrajectory},
      {"training", "--goldfish-table", &C::goldfish_table,
       "Goldfish hash-table: the table, a file of little-endian float32 values in [0, 1) (docs/goldfish.md)", R::kTrajectory, kPath},
      {"training", "--skip-loss-z", &C::skip_loss_z,
       "skip the update of a step whose loss has a z-score above this over the last 128 steps, as llm.c's -sl "
       "(0: off; non-finite steps are always skipped)", R::kTrajectory},
      {"training", "--skip-grad-z", &C::skip_grad_z, "the same for the gradient norm, as llm.c's -sg (0: off)", R::kTrajectory},
      {"training", "--max-bad-steps", &C::max_bad_steps, "stop after this many skipped steps in a row (0: never)", R::kSafe},
      {"training", "--fault-nonfinite-grad", &C::fault_nonfinite_grad,
       "testing: put a NaN in a gradient of rank 0 at these steps (1-based, comma-separated), for the guard's "
       "tests"},
      // AdamW and its schedule
      {"optimizer", "--lr", &C::lr, "peak learning rate", R::kTrajectory},
      {"optimizer", "--lr-schedule", &C::lr_schedule,
       "constant|cosine|linear|wsd: after the warmup, constant; a cosine or linear decay to --min-lr-frac; or wsd, "
       "constant until the last fifth of the steps, then a linear decay", R::kTrajectory},
      {"optimizer", "--warmup-steps", &C::warmup_steps, "linear warmup steps", R::kTrajectory},
      {"optimizer", "--lr-decay-steps", &C::lr_decay_steps,
       "the schedule's horizon: the step by which a cosine, linear or wsd decay reaches --min-lr-frac, which it "
       "keeps after (0: --steps). On resume with more --steps the schedule is re-planned over them unless this "
       "keeps the recorded run's horizon", R::kSafe},
      {"optimizer", "--min-lr-frac", &C::min_lr_frac, "cosine decays to this fraction of --lr", R::kTrajectory},
      {"optimizer", "--weight-decay", &C::weight_decay, "AdamW weight decay (matrices only, unless --decay-all)", R::kTrajectory},
      {"optimizer", "--decay-all", &C::decay_all, "decay every tensor, as llm.c's CPU trainer does", R::kTrajectory},
      {"optimizer", "--beta1", &C::beta1, "AdamW beta1", R::kTrajectory},
      {"optimizer", "--beta2", &C::beta2, "AdamW beta2", R::kTrajectory},
      {"optimizer", "--eps", &C::eps, "AdamW epsilon", R::kTrajectory},
      {"optimizer", "--grad-clip", &C::grad_clip, "clip the global gradient norm to this (0 = off)", R::kTrajectory},
      // the grid and its collectives (docs/overlap.md)
      {"parallel", "--grid", &C::grid,
       "4D grid GX,GY,GZ,GD (X: input features, Y: output features, Z: tokens and weight shards, D: data), or by "
       "named degrees: tp-x=2,tp-y=2,fsdp=4,dp=2 (left out: 1; dp fills the ranks); default 1,1,1,<ranks>; auto: the fastest grid the planner predicts with --machine"},
      {"parallel", "--grid-order", &C::grid_order,
       "rank order of X, Y, Z, fastest first (e.g. z,x,y: Z groups on consecutive ranks, so inside a node); "
       "default x,y,z, AxoNN's; with --grid auto the planner chooses unless given"},
      {"parallel", "--machine", &C::machine,
       "machine profile for --grid auto: name or .json file (default: local, written by axonn calibrate)"},
      {"parallel", "--gx", &C::gx, "Gx (instead of --grid; unset axes are 1, Gdata takes the remaining ranks)"},
      {"parallel", "--gy", &C::gy, "Gy"},
      {"parallel", "--gz", &C::gz, "Gz"},
      {"parallel", "--gdata", &C::gdata, "Gdata"},
      {"parallel", "--comm", &C::comm,
       "mpi|nccl|mpi-staged: the grid's communicators (default: mpi; with --kernels cuda: nccl when built with "
       "NCCL)", R::kSafe},
      {"parallel", "--comm-timeout", &C::comm_timeout,
       "seconds a rank may wait in one collective before the job is aborted with a report of who did not arrive "
       "(0: no deadline)"},
      {"parallel", "--overlap", &C::overlap,
       "collectives overlapped with computation: none|all|a list of oar,ors,oag,dp (results are identical; all "
       "is the fastest measured, docs/overlap.md)", R::kSafe},
      {"parallel", "--micro-batch-size", &C::micro_batch_size,
       "sequences per rank per micro-batch; gradients accumulate over the rank's sequences (0: one micro-batch "
       "of all of them)", R::kSafe},
      {"parallel", "--cache-gathered-weights", &C::cache_gathered_weights,
       "keep the weights all-gathered over Z for the whole step (all micro-batches) instead of gathering them "
       "again; needs Gz > 1", R::kSafe},
      {"parallel", "--recompute", &C::recompute,
       "keep only each block's input; recompute the block's forward (with its collectives) in the backward", R::kSafe},
      {"parallel", "--reduce-scatter-slots", &C::reduce_scatter_slots,
       "weight-gradient reduce-scatters in flight at once under ORS", R::kSafe},
      {"parallel", "--lm-head-chunk", &C::lm_head_chunk,
       "run the LM head, softmax and cross-entropy on this many tokens of the local batch at a time, never "
       "holding all their logits (0: all at once; docs/performance.md)", R::kSafe},
      // kernels and precision
      {"compute", "--kernels", &C::kernels,
       "cpu|ref|cuda (ref: the naive test-oracle kernels; cuda: the GPU, chosen by node-local rank, needs a "
       "build with -DAXONN_CUDA=ON)", R::kSafe},
      {"compute", "--dtype", &C::dtype,
       "fp32|bf16: precision of the activations and of the weights the kernels read (bf16: mixed precision with "
       "fp32 master weights, gradients and optimizer state; docs/precision.md)", R::kTrajectory},
      {"compute", "--gemm", &C::gemm, "CPU GEMM backend: onednn|openblas", R::kSafe},
      {"compute", "--gemm-tuning", &C::gemm_tuning,
       "on|off: time each GEMM shape's layout variants the first time it runs and keep the fastest "
       "(docs/gemm-tuning.md); the choices are reported at the end"},
      {"compute", "--peak-gflops", &C::peak_gflops,
       "peak for MFU in GFLOP/s per rank (0: the local profile's from axonn calibrate, else measured at start: "
       "sgemm or the bf16 GEMM, a dense bf16 GEMM with --kernels cuda; docs/performance.md)"},
      // checkpoints, resuming and stopping (docs/checkpoints.md, docs/resilience.md)
      {"checkpoint", "--save", &C::save, "write the final weights (any grid; gathered to rank 0): FILE.bin llm.c (GPT-2), FILE.gguf GGUF, DIR/ Hugging Face", R::kOutput, kPath},
      {"checkpoint", "--checkpoint-dir", &C::checkpoint_dir,
       "write sharded checkpoints here (one step-N directory each; also at the end of training; default with "
       "--run-dir: DIR/checkpoints)", R::kOutput, kPath},
      {"checkpoint", "--checkpoint-every", &C::checkpoint_every, "save every N steps (0: only at the end)", R::kSafe},
      {"checkpoint", "--keep", &C::keep, "keep the newest N checkpoints (0: all)", R::kSafe},
      {"checkpoint", "--resume", &C::resume,
       "continue from the latest checkpoint in --checkpoint-dir (start at step 0 if it has none)"},
      {"checkpoint", "--resume-from", &C::resume_from,
       "continue from this checkpoint (a root or a step directory), possibly written on another grid"},
      {"checkpoint", "--allow-config-change", &C::allow_config_change,
       "with --resume: continue with flags that change the recorded run (--data, --lr, --batch-size, ...), which "
       "are refused otherwise"},
      {"checkpoint", "--allow-data-change", &C::allow_data_change,
       "with --resume: continue although the data's shards changed since the checkpoint (re-prepared, edited, "
       "added or removed), which is refused otherwise"},
      {"checkpoint", "--continue-on-save-error", &C::continue_on_save_error,
       "a periodic checkpoint that cannot be written (full disk) is reported and the run trains on, instead of "
       "stopping; the previous checkpoint stays the latest, and the final save must still succeed", R::kSafe},
      {"checkpoint", "--stop-signal", &C::stop_signal,
       "USR1|USR2|HUP|none: besides SIGTERM and SIGINT, the signal that stops the run after the current step "
       "with a checkpoint (Slurm: sbatch --signal=USR1@120)"},
      {"checkpoint", "--exit-after-steps", &C::exit_after_steps,
       "stop after N steps of this run, with a checkpoint (0: never)"},
      {"checkpoint", "--exit-after-minutes", &C::exit_after_minutes,
       "stop after the step that ends M minutes after the start, with a checkpoint (0: never)"},
      // what it writes and says
      {"logging", "--run-dir", &C::run_dir,
       "collect the run in this directory: config.toml (the effective configuration), run.json (commit, "
       "machine, grid, library versions), and unless their flags are given metrics.jsonl, trace.json and "
       "checkpoints/; then `axonn report DIR` (docs/report.md)"},
      {"logging", "--metrics", &C::metrics,
       "write one JSON object per step to this file (JSON Lines; default with --run-dir: DIR/metrics.jsonl)", R::kOutput, kPath},
      {"logging", "--quiet", &C::quiet, "no per-step progress lines"},
      {"logging", "--trace", &C::trace,
       "write a Chrome trace-event JSON timeline (Perfetto, chrome://tracing) of the --trace-steps to this file; "
       "rank 0 writes every rank's spans (pid = rank; default with --run-dir: DIR/trace.json)"},
      {"logging", "--trace-steps", &C::trace_steps,
       "steps to trace, A:B or A, 1-based (default: 2:4 within --steps)"},
      {"logging", "--gemm-tuning-report", &C::gemm_tuning_report,
       "write the tuner's choices and timings to this JSON file (rank 0's; needs --gemm-tuning on)"},
  };
  return options;
}

// --- reading -------------------------------------------------------------------------------------

namespace {

const ConfigOption* find_option(std::string_view section, std::string_view key) {
  for (const ConfigOption& o : config_options())
    if ((section.empty() || o.section == section) && o.key() == key) return &o;
  return nullptr;
}

bool is_section(std::string_view name) {
  for (const char* s : config_sections())
    if (name == s) return true;
  return false;
}

std::string sections_list() {
  std::string out;
  for (const char* s : config_sections()) out += std::string(out.empty() ? "" : ", ") + "[" + s + "]";
  return out;
}

std::string keys_of(std::string_view section) {
  std::string out;
  for (const ConfigOption& o : config_options())
    if (o.section == section) out += (out.empty() ? "" : ", ") + o.key();
  return out;
}

// "run.toml:12: [optimizer] lr: "
std::string where(const std::string& source, const toml::node& node, std::string_view section, std::string_view key) {
  std::ostringstream w;
  w << source;
  if (node.source().begin.line > 0) w << ':' << node.source().begin.line;
  w << ": ";
  if (!section.empty()) w << '[' << section << "] ";
  w << key << ": ";
  return w.str();
}

// The TOML value of one setting into its field; throws InvalidArgument saying what the setting takes.
struct SetValue {
  TrainConfig& c;
  const toml::node& v;
  const std::string& at;
  const ConfigOption& o;

  [[noreturn]] void wrong(const char* want) const {
    std::ostringstream type;
    type << v.type();  // "string", "integer", ...
    throw InvalidArgument(::axonn::detail::concat(at, "must be ", want, " (the value of ", o.flag, "), got a ",
                                                  type.str()));
  }
  int64_t integer(int64_t lo, int64_t hi) const {
    if (!v.is_integer()) wrong("an integer");
    const int64_t i = v.as_integer()->get();
    AXONN_CHECK_ARG(i >= lo && i <= hi, at, "must be an integer in [", lo, ", ", hi, "] (the value of ", o.flag,
                    "), got ", i);
    return i;
  }
  double number() const {
    if (v.is_integer()) return static_cast<double>(v.as_integer()->get());
    if (!v.is_floating_point()) wrong("a number");
    return v.as_floating_point()->get();
  }

  void operator()(std::string C::*f) const {
    if (!v.is_string()) wrong("a string (in quotes)");
    c.*f = v.as_string()->get();
  }
  void operator()(bool C::*f) const {
    if (!v.is_boolean()) wrong("true or false");
    c.*f = v.as_boolean()->get();
  }
  void operator()(int C::*f) const {
    c.*f = static_cast<int>(integer(std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  }
  void operator()(int64_t C::*f) const {
    c.*f = integer(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  }
  void operator()(uint64_t C::*f) const {
    // above 2^63 - 1, TOML's largest integer, the number is written as a string of digits
    if (v.is_string()) {
      const std::string& s = v.as_string()->get();
      uint64_t u = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), u);
      AXONN_CHECK_ARG(!s.empty() && ec == std::errc() && end == s.data() + s.size(), at,
                      "must be an integer >= 0 (the value of ", o.flag, "), got \"", s, "\"");
      c.*f = u;
      return;
    }
    c.*f = static_cast<uint64_t>(integer(0, std::numeric_limits<int64_t>::max()));
  }
  void operator()(float C::*f) const {
    const double d = number();
    AXONN_CHECK_ARG(!std::isfinite(d) || std::fabs(d) <= std::numeric_limits<float>::max(), at,
                    "is too large for a 32-bit float (the value of ", o.flag, "), got ", d);
    c.*f = static_cast<float>(d);
  }
  void operator()(double C::*f) const { c.*f = number(); }
};

bool differs(const TrainConfig& a, const TrainConfig& b, const ConfigField& field) {
  return std::visit([&](auto f) { return !(a.*f == b.*f); }, field);
}

}  // namespace

std::set<std::string> read_config_toml(TrainConfig& c, std::string_view text, const std::string& source) {
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const toml::source_position at = e.source().begin;
    throw InvalidArgument(::axonn::detail::concat(source, ":", at.line, ":", at.column, ": not a valid TOML file: ",
                                                  e.description(), "; fix the file (axonn train --print-config "
                                                  "writes a valid one)"));
  }
  const TrainConfig defaults;
  std::set<std::string> set;
  for (const auto& [name, node] : doc) {
    const std::string section(name.str());
    if (!node.is_table()) {
      const ConfigOption* o = find_option("", section);
      AXONN_CHECK_ARG(!o, where(source, node, "", section), "a setting must be in its section: put it under [",
                      o ? o->section : "", "]");
      throw InvalidArgument(::axonn::detail::concat(where(source, node, "", section), "unknown setting outside a "
                                                    "section; the sections are ", sections_list()));
    }
    AXONN_CHECK_ARG(is_section(section), where(source, node, "", "[" + section + "]"), "unknown section; the "
                    "sections are ", sections_list());
    for (const auto& [k, v] : *node.as_table()) {
      const std::string key(k.str());
      const std::string at = where(source, v, section, key);
      const ConfigOption* o = find_option(section, key);
      if (!o) {
        const ConfigOption* elsewhere = find_option("", key);
        AXONN_CHECK_ARG(!elsewhere, at, "this setting belongs in [", elsewhere ? elsewhere->section : "",
                        "]; move it there");
        std::string dashed = key;
        for (char& ch : dashed)
          if (ch == '_') ch = '-';
        const ConfigOption* spelled = find_option("", dashed);
        AXONN_CHECK_ARG(!spelled, at, "unknown key; did you mean ", dashed, " (keys are the flags' names, with "
                        "dashes) in [", spelled ? spelled->section : "", "]?");
        throw InvalidArgument(::axonn::detail::concat(at, "unknown key; the keys of [", section, "] are ",
                                                      keys_of(section), " (axonn train --help)"));
      }
      std::visit(SetValue{c, v, at, *o}, o->field);
      if (differs(c, defaults, o->field)) set.insert(o->flag);
    }
  }
  return set;
}

std::set<std::string> read_config_file(TrainConfig& c, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  AXONN_CHECK_IO(in.good(), "cannot read config file '", path, "': ", std::strerror(errno),
                 "; give the path of a TOML file (axonn train --print-config writes one)");
  std::ostringstream text;
  text << in.rdbuf();
  AXONN_CHECK_IO(!in.bad(), "cannot read config file '", path, "': ", std::strerror(errno));
  return read_config_toml(c, text.str(), path);
}

namespace {

// Whether `message` names `flag` (not only a longer flag that begins with it).
bool names_flag(const std::string& message, const std::string& flag) {
  for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at + 1)) {
    const size_t end = at + flag.size();
    if (end == message.size() || !(std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-'))
      return true;
  }
  return false;
}

}  // namespace

TrainConfig effective_config(const std::string& file, const TrainConfig& flags, const std::set<std::string>& given) {
  TrainConfig c = flags;
  std::set<std::string> in_file;
  if (!file.empty()) {
    c = TrainConfig{};
    in_file = read_config_file(c, file);
    for (const ConfigOption& o : config_options())  // the command line overrides the file
      if (given.count(o.flag)) std::visit([&](auto f) { c.*f = flags.*f; }, o.field);
  }
  c.given = given;
  c.given->insert(in_file.begin(), in_file.end());
  try {
    validate_config(with_run_dir_outputs(c));
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    for (const ConfigOption& o : config_options())
      if (in_file.count(o.flag) && !given.count(o.flag) && names_flag(message, o.flag))
        throw InvalidArgument(::axonn::detail::concat(message, " (", file, " sets it: [", o.section, "] ", o.key(),
                                                      "; change it there, or override it with ", o.flag, ")"));
    throw;
  }
  return c;
}

// --- writing -------------------------------------------------------------------------------------

namespace {

// The shortest text that reads back as the same number, as a TOML float (with a '.' or an exponent).
template <typename T>
std::string toml_float(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

struct WriteValue {
  const TrainConfig& c;
  // a TOML basic string, escaped here: toml++ 3.3 prints some strings (runs of ''') as literal strings it
  // cannot read back (fuzz_config_toml)
  std::string operator()(std::string C::*f) const {
    std::string out = "\"";
    for (const unsigned char ch : c.*f) {
      if (ch == '"' || ch == '\\') {
        out += '\\';
        out += static_cast<char>(ch);
      } else if (ch < 0x20 || ch == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04X", ch);
        out += buf;
      } else {
        out += static_cast<char>(ch);
      }
    }
    return out + "\"";
  }
  std::string operator()(bool C::*f) const { return c.*f ? "true" : "false"; }
  std::string operator()(int C::*f) const { return std::to_string(c.*f); }
  std::string operator()(int64_t C::*f) const { return std::to_string(c.*f); }
  std::string operator()(uint64_t C::*f) const {
    const std::string digits = std::to_string(c.*f);
    return c.*f > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? "\"" + digits + "\"" : digits;
  }
  std::string operator()(float C::*f) const { return toml_float(c.*f); }
  std::string operator()(double C::*f) const { return toml_float(c.*f); }
};

}  // namespace

std::string config_toml(const TrainConfig& c) {
  std::string out =
      "# axonn train's configuration: `axonn train --config FILE` reads it, and a flag on the command line\n"
      "# overrides its key. Each key is the flag of that name without its dashes (axonn train --help).\n";
  for (const char* section : config_sections()) {
    out += std::string("\n[") + section + "]\n";
    for (const ConfigOption& o : config_options())
      if (o.section == std::string_view(section)) out += o.key() + " = " + std::visit(WriteValue{c}, o.field) + "\n";
  }
  return out;
}

}  // namespace axonn::train
