// axonn convert — model weights between llm.c .bin (GPT-2), Hugging Face safetensors (GPT-2, Llama; a
// file or a model directory, sharded or not) and axonn checkpoints.
//
// The input kind is read from the file itself (llm.c's magic number, or a safetensors header) or is a
// directory (an HF model directory, or a checkpoint root or step); the output format comes from
// --format, or from --to's name (.bin, .safetensors, .gguf, a directory for HF's layout). A GGUF file holds the
// tokenizer too (--tokenizer).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/checkpoint/gguf.hpp"
#include "axonn/checkpoint/hf.hpp"
#include "axonn/checkpoint/llmc.hpp"
#include "axonn/checkpoint/model_source.hpp"
#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/input_file.hpp"
#include "axonn/core/output_file.hpp"
#include "axonn/core/progress.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/text/tokenizer.hpp"
#include "commands.hpp"

namespace axonn::tools {

namespace {

namespace fs = std::filesystem;

struct ConvertOptions {
  std::string from, to, format = "auto";
  int heads = 0;
  std::string dtype = "fp32";  // of the HF or GGUF output
  std::string tokenizer;       // GGUF output: the tokenizer written into the file
  std::string shard_size = "0";  // HF directory output: at most this many bytes per shard (0: one file)
};

// "5000000", "100KB", "2GB" (powers of 1000, as Hugging Face's max_shard_size); InvalidArgument otherwise.
uint64_t parse_size(const std::string& text) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  const std::string unit = text.substr(end);
  const double scale = unit.empty() || unit == "B" ? 1 : unit == "KB" ? 1e3 : unit == "MB" ? 1e6 : unit == "GB" ? 1e9 : -1;
  AXONN_CHECK_ARG(end > 0 && scale > 0 && v >= 0, "--shard-size takes a size such as 500MB or 2GB (B, KB, MB, GB), got '",
                  text, "'");
  return static_cast<uint64_t>(v * scale);
}

// A model read from any supported input.
struct Loaded {
  model::GptConfig config;
  Arena params{"parameters"};
  std::string what;  // for the summary line
};

// First int32 of a file, or nullopt if it is shorter.
std::optional<int32_t> first_int(const std::string& path) {
  require_regular_file(path, "");  // a named pipe is refused, not waited on
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  int32_t v;
  bool ok = std::fread(&v, sizeof v, 1, f) == 1;
  std::fclose(f);
  return ok ? std::optional<int32_t>(v) : std::nullopt;
}

// The progress of reading or writing the weights: a bar on a terminal, plain lines otherwise; the parts
// of the weights' bytes (fp32 in memory; as stored when written).
ProgressOptions byte_progress() {
  ProgressOptions po;
  po.unit = "B";
  return po;
}

// The bytes of a model's parameters in fp32 (what reading one fills).
int64_t param_bytes(const model::GptConfig& c) {
  int64_t n = 0;
  for (const auto& p : model::model_spec(c).params) n += p.shape.numel();
  return n * static_cast<int64_t>(sizeof(float));
}

// `gguf`: the input, opened, when it is a GGUF file.
Loaded load_any(const ConvertOptions& o, const checkpoint::GgufModel* gguf) {
  Loaded m;
  std::error_code ec;
  AXONN_CHECK_IO(fs::exists(o.from, ec), "cannot open '", o.from, "': no such file or directory");
  const checkpoint::ModelSource::Kind kind = checkpoint::model_source_kind(o.from);
  if (kind == checkpoint::ModelSource::Kind::kCheckpoint) {
    AXONN_CHECK_ARG(o.heads == 0, "--heads applies to safetensors input only; a checkpoint records its heads");
    // any grid: the shards are put together into full tensors (checkpoint/sharded.hpp); the progress counts
    // the files hashed, then the tensors filled
    const checkpoint::Manifest listed = checkpoint::read_manifest(checkpoint::resolve_checkpoint(o.from));
    uint64_t files = 0;
    for (const checkpoint::FileEntry& f : listed.files) files += f.bytes;
    Progress progress("convert read", static_cast<int64_t>(files) + param_bytes(listed.model), byte_progress());
    checkpoint::Manifest man = checkpoint::load_consolidated_params(o.from, m.params, nullptr, &progress);
    m.config = man.model;
    m.what = "checkpoint step " + std::to_string(man.step) + ", grid " + man.grid.str();
    return m;
  }
  // the other kinds are read whole into a model of the configuration they record
  auto read_whole = [&](const model::GptConfig& config, std::string what, const auto& load) {
    m.config = config;
    model::reserve_params(m.params, model::model_spec(m.config));
    m.params.allocate();
    Progress progress("convert read", param_bytes(m.config), byte_progress());
    load(m.params, &progress);
    m.what = std::move(what);
  };
  if (kind == checkpoint::ModelSource::Kind::kGguf) {
    AXONN_CHECK_ARG(o.heads == 0, "--heads applies to safetensors input only; a GGUF file records its heads");
    AXONN_CHECK(gguf != nullptr, "load_any: the GGUF file '", o.from, "' was not opened");
    read_whole(gguf->config(), gguf->kind(), [&](Arena& params, Progress* p) { gguf->load(params, p); });
  } else if (kind == checkpoint::ModelSource::Kind::kLlmc) {
    AXONN_CHECK_IO(first_int(o.from) == checkpoint::kLlmcModelMagic, "'", o.from,
                   "' is neither an llm.c model file (magic 20240326), a safetensors file, a GGUF file, nor a "
                   "checkpoint directory");
    AXONN_CHECK_ARG(o.heads == 0, "--heads applies to safetensors input only; an llm.c file records its heads");
    const model::GptConfig config = checkpoint::read_llmc_config(o.from);
    read_whole(config, "llm.c model file",
               [&](Arena& params, Progress* p) { checkpoint::load_llmc_params(o.from, config, params, p); });
  } else {
    const checkpoint::HfCheckpoint hf(o.from, o.heads);
    read_whole(hf.config(), hf.kind(), [&](Arena& params, Progress* p) { hf.load(params, p); });
  }
  return m;
}

// The directory of the tokenizer files a model carries: an HF model directory, or a checkpoint's step (train
// copies the prepared data's tokenizer into each); "" if it carries none.
std::string carried_tokenizer_dir(const std::string& from) {
  std::error_code ec;
  if (!fs::is_directory(from, ec)) return "";
  const std::string dir = checkpoint::model_source_kind(from) == checkpoint::ModelSource::Kind::kHuggingFace
                              ? from
                              : checkpoint::resolve_checkpoint(from);
  return text::tokenizer_files_in(dir).empty() ? "" : dir;
}

bool names_directory(const std::string& p) {
  std::error_code ec;
  return p.ends_with('/') || fs::is_directory(p, ec);
}

std::string output_format(const ConvertOptions& o) {
  if (o.format != "auto") return o.format;
  if (o.to.ends_with(".bin")) return "llmc";
  if (o.to.ends_with(".gguf")) return "gguf";
  if (o.to.ends_with(".safetensors") || names_directory(o.to)) return "safetensors-hf";
  throw InvalidArgument("cannot tell the output format from --to '" + o.to +
                        "' (not .bin, .safetensors, .gguf or a directory); give --format "
                        "safetensors-hf|gguf|llmc|llmc-bf16|checkpoint");
}

int run_convert(const ConvertOptions& o) {
  int world = comm::Runtime::process_world_size();
  AXONN_CHECK_ARG(world == 1, "axonn convert runs in one process (the job has ", world, "); run it without mpirun -n");
  std::string format = output_format(o);
  const bool gguf = format == "gguf";
  const checkpoint::GgufType gguf_type = gguf ? checkpoint::parse_gguf_type(o.dtype) : checkpoint::GgufType::kF32;
  const DType hf_dtype = gguf ? DType::kF32 : parse_precision(o.dtype);
  AXONN_CHECK_ARG((hf_dtype == DType::kF32 && o.shard_size == "0") || format == "safetensors-hf" || gguf,
                  "--dtype and --shard-size apply to Hugging Face output (--format safetensors-hf) only, and --dtype "
                  "to GGUF output");
  AXONN_CHECK_ARG(o.shard_size == "0" || !gguf, "--shard-size applies to Hugging Face output only; a GGUF file is one file");
  AXONN_CHECK_ARG(o.tokenizer.empty() || gguf || format == "safetensors-hf", "--tokenizer applies to GGUF and ",
                  "Hugging Face output only");
  // the tokenizer: --tokenizer, else the one the model carries (a checkpoint's or an HF directory's files, or
  // the one inside a GGUF file)
  const bool holds_tokenizer = gguf || (format == "safetensors-hf" && names_directory(o.to));
  std::optional<checkpoint::GgufModel> gguf_in;  // a GGUF input, opened once: its tokenizer, then its weights
  if (checkpoint::looks_like_gguf(o.from)) gguf_in.emplace(o.from);
  const bool from_gguf = o.tokenizer.empty() && holds_tokenizer && gguf_in;
  std::unique_ptr<text::Tokenizer> gguf_tok = from_gguf ? gguf_in->tokenizer() : nullptr;
  const std::string carried = carried_tokenizer_dir(o.from);
  const std::string tok_name = !o.tokenizer.empty() ? o.tokenizer : carried;
  AXONN_CHECK_ARG(!tok_name.empty() || gguf_tok || !gguf, "a GGUF file holds the model's tokenizer, and '", o.from,
                  "' carries none: give --tokenizer (the tokenizer.model, tokenizer.json or GPT-2 files its data was ",
                  "prepared with, or gpt2)");
  const uint64_t shard_bytes = parse_size(o.shard_size);
  std::vector<NamedPath> inputs = {{"--from", o.from}};
  if (!o.tokenizer.empty()) inputs.push_back({"--tokenizer", o.tokenizer});
  check_output_apart({"--to", o.to}, inputs);
  if (format == "safetensors-hf" && names_directory(o.to)) checkpoint::check_hf_dir_output(o.to);
  // the tokenizer before the weights, so that a wrong path is refused at once
  std::unique_ptr<text::Tokenizer> tok = tok_name.empty() ? std::move(gguf_tok) : text::load_tokenizer(tok_name);
  Loaded m = load_any(o, gguf_in ? &*gguf_in : nullptr);
  if (tok) checkpoint::check_tokenizer_fits(*tok, m.config);  // before anything is written

  std::string written = o.to;
  // the tensors' bytes as stored (HF files leave the vocabulary's padding rows out: a little less)
  const bool half = format == "llmc-bf16" || (format == "safetensors-hf" && hf_dtype == DType::kBF16) ||
                    (gguf && gguf_type != checkpoint::GgufType::kF32);
  const int64_t out_bytes = half ? param_bytes(m.config) / 2 : param_bytes(m.config);
  if (gguf) {
    Progress progress("convert write", out_bytes, byte_progress());
    checkpoint::save_gguf(o.to, m.config, m.params, gguf_type, *tok, fs::path(o.to).stem().string(), &progress);
    format = "gguf " + std::string(checkpoint::gguf_type_name(gguf_type)) + ", tokenizer " + tok->describe();
  } else if (format == "llmc" || format == "llmc-bf16") {
    Progress progress("convert write", out_bytes, byte_progress());
    checkpoint::save_llmc(o.to, m.config, m.params, format == "llmc" ? 3 : 5, &progress);
  } else if (format == "safetensors-hf") {
    Progress progress("convert write", out_bytes, byte_progress());
    if (names_directory(o.to)) {
      // HF's model directory: the weights (one file or shards) plus the config.json transformers
      // needs to load them
      checkpoint::save_hf_dir(o.to, m.config, m.params, hf_dtype, shard_bytes, &progress);
      written = o.to;
      // and the tokenizer's files, as transformers finds them beside the weights
      if (tok && !tok_name.empty()) checkpoint::save_hf_tokenizer(o.to, m.config, tok_name);
      if (tok && tok_name.empty()) checkpoint::save_hf_tokenizer(o.to, m.config, *tok);  // a GGUF file's
    } else {
      AXONN_CHECK_ARG(shard_bytes == 0, "--shard-size writes a model directory; give --to a directory");
      checkpoint::save_hf_safetensors(o.to, m.config, m.params, hf_dtype, &progress);
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
    Progress progress("convert write", static_cast<int64_t>(w.data_bytes()), byte_progress());
    man.files.push_back(checkpoint::write_checkpoint_file(tmp, checkpoint::tp_file_name(0, 0, 0), w, &progress));
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
  auto* sub = app.add_subcommand("convert", "convert model weights: llm.c .bin (GPT-2), Hugging Face safetensors "
                                            "(GPT-2, Llama), GGUF, axonn checkpoints");
  sub->footer(
      "Examples:\n"
      "  axonn convert --from gpt2_124M.bin --to hf/               # Hugging Face safetensors + config.json\n"
      "  axonn convert --from runs/x/checkpoints --to model.bin   # a checkpoint of any grid to llm.c\n"
      "  axonn convert --from runs/x/checkpoints --to model.gguf --tokenizer data/tokenizer.model   # for llama.cpp");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--from", o->from,
                  "input: llm.c model file, HF safetensors file or model directory (GPT-2 or Llama), GGUF file "
                  "(llama or gpt2; F32, F16, BF16 or Q8_0), or checkpoint directory (kind read from the file)")
      ->required();
  sub->add_option("--to", o->to, "output file (or directory, for HF's layout or --format checkpoint)")->required();
  sub->add_option("--format", o->format,
                  "auto|safetensors-hf|gguf|llmc|llmc-bf16|checkpoint (auto: from --to: .bin llmc, .gguf gguf, "
                  ".safetensors or a directory safetensors-hf)")
      ->check(CLI::IsMember({"auto", "safetensors-hf", "gguf", "llmc", "llmc-bf16", "checkpoint"}));
  sub->add_option("--heads", o->heads,
                  "attention heads, for safetensors input without n_head metadata or config.json (0: from the file)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--dtype", o->dtype,
                  "the tensors' type: fp32|bf16 in Hugging Face output; f32|f16|bf16|q8_0 of the matrices in GGUF "
                  "output (norms and biases stay f32)");
  sub->add_option("--tokenizer", o->tokenizer,
                  "the model's tokenizer (a tokenizer.model, tokenizer.json, GPT-2's files or gpt2), written into a "
                  "GGUF file or copied into a Hugging Face directory (default: the one the model carries: a "
                  "checkpoint's, from the data `axonn prepare` made, an HF directory's, or a GGUF file's)");
  sub->add_option("--shard-size", o->shard_size,
                  "Hugging Face directory output: at most this many bytes per shard, e.g. 2GB "
                  "(model-0000N-of-0000M.safetensors + model.safetensors.index.json; 0: one model.safetensors)");
  sub->callback([o, action] { *action = [o] { return run_convert(*o); }; });
}

}  // namespace axonn::tools
