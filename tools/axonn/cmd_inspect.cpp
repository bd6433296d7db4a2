// axonn inspect — what a model file or checkpoint holds, and whether it is intact.
//
// An llm.c .bin: header and tensors. A safetensors file: metadata and tensors. A GGUF file (ours, llama.cpp's,
// ollama's): metadata, then each tensor's type, dimensions and bytes. A Hugging Face model
// directory: the model config.json describes, the shards of model.safetensors.index.json, and each
// file's tensors. A checkpoint directory (a root: its steps and the latest one; or a step): the
// manifest, each file's size and checksum status, and each file's tensors. Exit code 1, after the
// report, if any file fails verification.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/checkpoint/gguf.hpp"
#include "axonn/checkpoint/hf.hpp"
#include "axonn/checkpoint/llmc.hpp"
#include "axonn/checkpoint/model_source.hpp"
#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/input_file.hpp"
#include "axonn/model/gpt.hpp"
#include "commands.hpp"

namespace axonn::tools {

namespace {

namespace fs = std::filesystem;

void print_config(const model::GptConfig& c) {
  std::printf("  model: %slayers %d, heads %d, channels %d, vocab %d (padded %d), max_seq_len %d, %lld parameters\n",
              c.family == model::Family::kLlama ? "llama, " : "", c.num_layers, c.num_heads, c.channels, c.vocab_size,
              c.padded_vocab_size, c.max_seq_len, static_cast<long long>(c.num_parameters()));
  if (c.family == model::Family::kLlama)
    std::printf("  llama: %d KV heads, head size %d, MLP %d, rope_theta %g%s, rms_norm_eps %g, %s embeddings\n",
                c.kv_heads(), c.head_size(), c.mlp_hidden(), c.rope_theta,
                c.rope_scaling.enabled() ? (", llama3 rope_scaling factor " + std::to_string(c.rope_scaling.factor)).c_str()
                                         : "",
                static_cast<double>(c.norm_eps), c.tied_embeddings ? "tied" : "untied");
}

void inspect_llmc(const std::string& path) {
  model::GptConfig c = checkpoint::read_llmc_config(path);  // validates header and size
  int32_t h[2] = {0, 0};
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    if (std::fread(h, sizeof h, 1, f) != 1) h[1] = 0;
    std::fclose(f);
  }
  const bool bf16 = h[1] == 5;
  std::printf("llm.c model file '%s': version %d (%s), %llu bytes\n", path.c_str(), h[1], bf16 ? "bf16" : "fp32",
              static_cast<unsigned long long>(fs::file_size(path)));
  print_config(c);
  const model::ModelSpec spec = model::model_spec(c);
  std::printf("  tensors (%zu, in file order):\n", spec.params.size());
  for (const model::ParamSpec& p : spec.params)
    std::printf("    %-10s %-5s %s\n", p.name.c_str(), bf16 ? "bf16" : "f32", p.shape.str().c_str());
}

void print_safetensors(const checkpoint::SafetensorsFile& f, const char* indent) {
  for (const auto& [k, v] : f.metadata()) {
    std::string one_line;  // a config.json held in the metadata, on one line
    for (char ch : v)
      if (ch != '\n') one_line += ch;
    std::printf("%s  metadata %s = %s\n", indent, k.c_str(), one_line.c_str());
  }
  std::printf("%s  tensors (%zu, in data order):\n", indent, f.tensors().size());
  for (const auto& t : f.tensors())
    std::printf("%s    %-32s %-5s %-18s %llu bytes\n", indent, t.name.c_str(),
                std::string(checkpoint::safetensors_dtype_name(t.dtype)).c_str(), t.shape_str().c_str(),
                static_cast<unsigned long long>(t.bytes()));
}

void inspect_safetensors(const std::string& path) {
  checkpoint::SafetensorsFile f(path);
  std::printf("safetensors file '%s': %llu bytes, header %llu bytes\n", path.c_str(),
              static_cast<unsigned long long>(f.file_bytes()), static_cast<unsigned long long>(f.header_bytes()));
  print_safetensors(f, "");
}

void inspect_gguf(const std::string& path) {
  const checkpoint::GgufFile f(path);  // validates every length and offset
  std::printf("GGUF file '%s': version %u, %llu bytes, %zu metadata keys, %zu tensors, alignment %llu\n", path.c_str(),
              f.version(), static_cast<unsigned long long>(f.file_bytes()), f.metadata().size(), f.tensors().size(),
              static_cast<unsigned long long>(f.alignment()));
  std::printf("  metadata (%zu, in file order):\n", f.metadata().size());
  for (const auto& [key, value] : f.metadata()) std::printf("    %s = %s\n", key.c_str(), value.str().c_str());
  std::map<std::string, std::pair<int, uint64_t>> by_type;  // type: tensors, bytes
  for (const checkpoint::GgufTensorInfo& t : f.tensors()) {
    auto& [count, bytes] = by_type[checkpoint::ggml_type_name(t.type)];
    count++;
    bytes += t.bytes;
  }
  std::string types;
  for (const auto& [name, cb] : by_type)
    types += (types.empty() ? "" : "; ") + name + ": " + std::to_string(cb.first) +
             (cb.first == 1 ? " tensor, " : " tensors, ") + std::to_string(cb.second) + " bytes";
  std::printf("  tensor types: %s\n", types.empty() ? "none" : types.c_str());
  std::printf("  tensors (%zu, in file order; ggml's dimensions, fastest first):\n", f.tensors().size());
  for (const checkpoint::GgufTensorInfo& t : f.tensors())
    std::printf("    %-28s %-7s %-20s %llu bytes\n", t.name.c_str(), checkpoint::ggml_type_name(t.type).c_str(),
                t.shape_str().c_str(), static_cast<unsigned long long>(t.bytes));
  // what `--init` and `axonn convert --from` would make of it
  try {
    const checkpoint::GgufModel m(path);
    const std::unique_ptr<text::Tokenizer> tok = m.tokenizer();
    std::printf("  as a model: %s, tokenizer %s\n", m.config().str().c_str(),
                tok ? (tok->describe() + ", " + std::to_string(tok->vocab_size()) + " ids").c_str() : "none");
  } catch (const Error& e) {
    std::printf("  as a model: not readable by axonn: %s\n", e.what());
  }
}

void inspect_hf_dir(const std::string& path) {
  checkpoint::HfCheckpoint hf(path);
  std::printf("Hugging Face model directory '%s': %s\n", path.c_str(), hf.kind().c_str());
  print_config(hf.config());
  for (const auto& f : hf.files()) {
    std::printf("  %s: %llu bytes, header %llu bytes\n", std::filesystem::path(f->path()).filename().c_str(),
                static_cast<unsigned long long>(f->file_bytes()), static_cast<unsigned long long>(f->header_bytes()));
    print_safetensors(*f, "  ");
  }
}

// Prints one step directory; returns the number of files that fail verification.
int inspect_step(const std::string& dir) {
  checkpoint::Manifest m = checkpoint::read_manifest(dir);
  std::printf("checkpoint '%s': step %lld, %lld tokens seen, written by %s (manifest version %d)\n", dir.c_str(),
              static_cast<long long>(m.step), static_cast<long long>(m.tokens_seen), m.library_version.c_str(),
              m.format_version);
  print_config(m.model);
  std::printf("  grid: %s (Gx x Gy x Gz x Gdata)\n", m.grid.str().c_str());
  std::printf("  loader: shard %lld, position %lld\n", static_cast<long long>(m.loader.shard),
              static_cast<long long>(m.loader.position));
  std::printf("  rng: seed %llu, counter %llu%s\n", static_cast<unsigned long long>(m.rng.seed),
              static_cast<unsigned long long>(m.rng.counter), m.rng.engine.empty() ? "" : ", engine state saved");
  for (const auto& [k, v] : m.extra) std::printf("  %s: %s\n", k.c_str(), v.c_str());
  std::printf("  files (%zu):\n", m.files.size());
  int bad = 0;
  auto status = checkpoint::check_checkpoint_files(dir, m);
  for (const auto& s : status) {
    std::printf("    %-28s %12llu bytes  %s %s  %s\n", s.entry.name.c_str(),
                static_cast<unsigned long long>(s.entry.bytes), std::string(checkpoint::kHashName).c_str(),
                checkpoint::hash_to_hex(s.entry.xxh3).c_str(), s.ok() ? "ok" : ("BAD: " + s.problem).c_str());
    bad += s.ok() ? 0 : 1;
  }
  for (const auto& s : status) {
    if (!s.ok() || !s.entry.name.ends_with(".safetensors")) continue;
    std::printf("  %s:\n", s.entry.name.c_str());
    print_safetensors(checkpoint::SafetensorsFile((fs::path(dir) / s.entry.name).string()), "  ");
  }
  return bad;
}

int run_inspect(const std::string& path) {
  int world = comm::Runtime::process_world_size();
  AXONN_CHECK_ARG(world == 1, "axonn inspect runs in one process (the job has ", world, "); run it without mpirun -n");
  std::error_code ec;
  AXONN_CHECK_IO(fs::exists(path, ec), "cannot open '", path, "': no such file or directory");
  if (!fs::is_directory(path, ec)) {
    require_regular_file(path, "");  // a named pipe is refused, not waited on
    int32_t magic = 0;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      if (std::fread(&magic, sizeof magic, 1, f) != 1) magic = 0;
      std::fclose(f);
    }
    if (magic == checkpoint::kLlmcModelMagic) {
      inspect_llmc(path);
    } else if (checkpoint::looks_like_gguf(path)) {
      inspect_gguf(path);
    } else {
      AXONN_CHECK_IO(checkpoint::looks_like_safetensors(path), "'", path,
                     "' is neither an llm.c model file (magic 20240326), a safetensors file, a GGUF file, nor a "
                     "checkpoint directory");
      inspect_safetensors(path);
    }
    return 0;
  }
  if (checkpoint::model_source_kind(path) == checkpoint::ModelSource::Kind::kHuggingFace) {
    inspect_hf_dir(path);
    return 0;
  }
  std::string dir = checkpoint::resolve_checkpoint(path);
  if (dir != path) {
    // a root: its committed steps, then the latest in detail
    std::string steps;
    for (int64_t s : checkpoint::list_checkpoints(path)) steps += " " + std::to_string(s);
    std::printf("checkpoint root '%s': steps%s; latest %s\n", path.c_str(), steps.c_str(),
                fs::path(dir).filename().c_str());
  }
  int bad = inspect_step(dir);
  AXONN_CHECK_IO(bad == 0, "checkpoint '", dir, "' fails verification: ", bad, " file", bad == 1 ? "" : "s",
                 " missing, truncated or corrupt (see above)");
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, Action* action) {
  auto path = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("inspect", "show what a model file or checkpoint holds and verify its checksums");
  sub->footer("Example:\n  axonn inspect runs/x/checkpoints");
  sub->add_option("path", *path,
                  "llm.c .bin, safetensors file, GGUF file, Hugging Face model directory, or checkpoint directory "
                  "(root or step)")
      ->required();
  sub->callback([path, action] { *action = [path] { return run_inspect(*path); }; });
}

}  // namespace axonn::tools
