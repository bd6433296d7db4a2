// axonn convert — GPT-2 weights between llm.c .bin, Hugging Face safetensors and axonn checkpoints.
//
// The input kind is read from the file itself (llm.c's magic number, or a safetensors header) or is a
// checkpoint directory (a root or one step); the output format comes from --format, or from --to's
// name (.bin, .safetensors, a directory for HF's layout).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/checkpoint/hf_gpt2.hpp"
#include "axonn/checkpoint/llmc.hpp"
#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/model/gpt.hpp"
#include "commands.hpp"

namespace axonn::tools {

namespace {

namespace fs = std::filesystem;

struct ConvertOptions {
  std::string from, to, format = "auto";
  int heads = 0;
};

// A model read from any supported input.
struct Loaded {
  model::GptConfig config;
  Arena params{"parameters"};
  std::string what;  // for the summary line
};

// First int32 of a file, or nullopt if it is shorter.
std::optional<int32_t> first_int(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  int32_t v;
  bool ok = std::fread(&v, sizeof v, 1, f) == 1;
  std::fclose(f);
  return ok ? std::optional<int32_t>(v) : std::nullopt;
}

Loaded load_any(const ConvertOptions& o) {
  Loaded m;
  std::error_code ec;
  AXONN_CHECK_IO(fs::exists(o.from, ec), "cannot open '", o.from, "': no such file or directory");
  if (fs::is_directory(o.from, ec)) {
    AXONN_CHECK_ARG(o.heads == 0, "--heads applies to safetensors input only; a checkpoint records its heads");
    // any grid: the shards are put together into full tensors (checkpoint/sharded.hpp)
    checkpoint::Manifest man = checkpoint::load_consolidated_params(o.from, m.params);
    m.config = man.model;
    m.what = "checkpoint step " + std::to_string(man.step) + ", grid " + man.grid.str();
    return m;
  }
  if (first_int(o.from) == checkpoint::kLlmcModelMagic) {
    AXONN_CHECK_ARG(o.heads == 0, "--heads applies to safetensors input only; an llm.c file records its heads");
    m.config = checkpoint::read_llmc_config(o.from);
    model::reserve_gpt_params(m.params, m.config);
    m.params.allocate();
    checkpoint::load_llmc_params(o.from, m.config, m.params);
    m.what = "llm.c model file";
    return m;
  }
  AXONN_CHECK_IO(checkpoint::looks_like_safetensors(o.from), "'", o.from,
                 "' is neither an llm.c model file (magic 20240326), a safetensors file, nor a checkpoint directory");
  checkpoint::SafetensorsFile f(o.from);
  m.config = checkpoint::read_hf_gpt2_config(f, o.heads);
  model::reserve_gpt_params(m.params, m.config);
  m.params.allocate();
  checkpoint::load_hf_gpt2_params(f, m.config, m.params);
  m.what = "HF GPT-2 safetensors";
  return m;
}

bool names_directory(const std::string& p) {
  std::error_code ec;
  return p.ends_with('/') || fs::is_directory(p, ec);
}

std::string output_format(const ConvertOptions& o) {
  if (o.format != "auto") return o.format;
  if (o.to.ends_with(".bin")) return "llmc";
  if (o.to.ends_with(".safetensors") || names_directory(o.to)) return "safetensors-hf";
  throw InvalidArgument("cannot tell the output format from --to '" + o.to +
                        "' (not .bin, .safetensors or a directory); give --format "
                        "safetensors-hf|llmc|llmc-bf16|checkpoint");
}

int run_convert(const ConvertOptions& o) {
  int world = comm::Runtime::process_world_size();
  AXONN_CHECK_ARG(world == 1, "axonn convert runs in one process (the job has ", world, "); run it without mpirun -n");
  const std::string format = output_format(o);
  Loaded m = load_any(o);

  std::string written = o.to;
  if (format == "llmc" || format == "llmc-bf16") {
    checkpoint::save_llmc(o.to, m.config, m.params, format == "llmc" ? 3 : 5);
  } else if (format == "safetensors-hf") {
    if (names_directory(o.to)) {
      // HF's model directory: weights plus the config.json transformers needs to load them
      std::error_code ec;
      fs::create_directories(o.to, ec);
      AXONN_CHECK_IO(!ec, "cannot create directory '", o.to, "': ", ec.message());
      written = (fs::path(o.to) / "model.safetensors").string();
      checkpoint::save_hf_gpt2(written, m.config, m.params);
      checkpoint::write_file_atomic((fs::path(o.to) / "config.json").string(),
                                    checkpoint::hf_gpt2_config_json(m.config));
    } else {
      checkpoint::save_hf_gpt2(o.to, m.config, m.params);
    }
  } else {  // checkpoint: a new root with one step holding the weights alone (no optimizer state)
    // Into a run's existing root, step 0 would become `latest` and hide the run's own steps.
    AXONN_CHECK_ARG(checkpoint::list_checkpoints(o.to).empty(), "--to '", o.to,
                    "' already holds checkpoints; --format checkpoint writes a new checkpoint root: choose another "
                    "directory");
    checkpoint::Manifest man;
    man.model = m.config;
    std::string tmp = checkpoint::begin_checkpoint(o.to, man.step);
    checkpoint::SafetensorsWriter w;
    checkpoint::add_shard_metadata(w, man, 0, 0, 0);
    checkpoint::add_arena(w, checkpoint::kParamsPrefix, m.params);
    man.files.push_back(checkpoint::write_checkpoint_file(tmp, checkpoint::tp_file_name(0, 0, 0), w));
    man.extra["converted_from"] = o.from;
    written = checkpoint::commit_checkpoint(o.to, man);
  }
  std::error_code ec;
  std::string size;
  if (!fs::is_directory(written, ec)) size = ", " + std::to_string(fs::file_size(written, ec)) + " bytes";
  std::printf("converted '%s' (%s, %s) -> '%s' (%s%s)\n", o.from.c_str(), m.what.c_str(), m.config.str().c_str(),
              written.c_str(), format.c_str(), size.c_str());
  return 0;
}

}  // namespace

void add_convert_command(CLI::App& app, Action* action) {
  auto o = std::make_shared<ConvertOptions>();
  auto* sub = app.add_subcommand("convert", "convert GPT-2 weights: llm.c .bin <-> Hugging Face safetensors");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--from", o->from,
                  "input: llm.c model file, HF GPT-2 safetensors, or checkpoint directory (kind read from the file)")
      ->required();
  sub->add_option("--to", o->to, "output file (or directory, for HF's layout or --format checkpoint)")->required();
  sub->add_option("--format", o->format,
                  "auto|safetensors-hf|llmc|llmc-bf16|checkpoint (auto: from --to: .bin llmc, .safetensors or a "
                  "directory safetensors-hf)")
      ->check(CLI::IsMember({"auto", "safetensors-hf", "llmc", "llmc-bf16", "checkpoint"}));
  sub->add_option("--heads", o->heads,
                  "attention heads, for safetensors input without n_head metadata or config.json (0: from the file)")
      ->check(CLI::NonNegativeNumber);
  sub->callback([o, action] { *action = [o] { return run_convert(*o); }; });
}

}  // namespace axonn::tools
