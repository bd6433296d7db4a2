#include "axonn/checkpoint/hf.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/model/spec.hpp"
#include "hf_pieces.hpp"

namespace axonn::checkpoint {

namespace fs = std::filesystem;

namespace detail {

// Every HF tensor of the model, in HF's file order: the tensors before the first per-layer one, the
// layers (each with its tensors in the spec's order), the rest.
std::vector<HfPiece> hf_pieces(const model::ModelSpec& spec) {
  const model::GptConfig& c = spec.config;
  std::vector<HfPiece> out;
  auto add = [&](int t, int layer) {
    const model::ParamSpec& p = spec.params[static_cast<size_t>(t)];
    const Shape s = p.per_layer ? p.shape.drop_front() : p.shape;
    const int64_t cols = s.ndim() == 2 ? s[1] : 0;
    if (p.hf_names.size() > 1) {  // a linear's output parts: HF's separate tensors
      const model::LinearSpec& l = spec.linears[static_cast<size_t>(p.linear)];
      int64_t row0 = 0;
      for (size_t k = 0; k < p.hf_names.size(); k++) {
        out.push_back({model::hf_name_of_layer(p.hf_names[k], layer), t, layer, row0, l.parts[k], cols, false});
        row0 += l.parts[k];
      }
      return;
    }
    const int64_t rows = p.role == model::Role::kVocab ? c.vocab_size : s[0];
    out.push_back({model::hf_name_of_layer(p.hf_names[0], layer), t, layer, 0, rows, cols, p.hf_transposed});
  };
  const int n = static_cast<int>(spec.params.size());
  int first_layer = 0;
  while (first_layer < n && !spec.params[static_cast<size_t>(first_layer)].per_layer) first_layer++;
  for (int t = 0; t < first_layer; t++) add(t, 0);
  for (int l = 0; l < c.num_layers; l++)
    for (int t = 0; t < n; t++)
      if (spec.params[static_cast<size_t>(t)].per_layer) add(t, l);
  for (int t = first_layer; t < n; t++)
    if (!spec.params[static_cast<size_t>(t)].per_layer) add(t, 0);
  return out;
}

// The first element of a piece's rows in its parameter tensor (within the arena slot).
const float* piece_source(const Arena& params, const model::ModelSpec& spec, const HfPiece& p) {
  Tensor t = params.tensor(static_cast<size_t>(p.t));
  if (spec.params[static_cast<size_t>(p.t)].per_layer) t = t[p.layer];
  return t.f32() + p.row0 * (p.cols ? p.cols : 1);
}

TensorRangeSink arena_sink(Arena& params, const model::ModelSpec& spec) {
  AXONN_CHECK(params.size() == spec.params.size(), "a model reader needs the model's ", spec.params.size(),
              " tensors, got ", params.size());
  return [&params, spec](int t, int layer, int64_t first, int64_t count, const float* values) {
    Tensor dst = params.tensor(static_cast<size_t>(t));
    if (spec.params[static_cast<size_t>(t)].per_layer) dst = dst[layer];
    params.memory().upload(dst.f32() + first, values, sizeof(float) * static_cast<size_t>(count));
  };
}

void sink_vocab_padding(const model::GptConfig& c, const model::ModelSpec& spec, const TensorRangeSink& sink) {
  const int64_t C = c.channels, pad = static_cast<int64_t>(c.padded_vocab_size - c.vocab_size) * C;
  if (pad <= 0) return;
  const std::vector<float> zeros(static_cast<size_t>(pad), 0.0f);
  for (int t : {spec.token_embedding, spec.lm_head}) {
    sink(t, 0, static_cast<int64_t>(c.vocab_size) * C, pad, zeros.data());
    if (spec.lm_head == spec.token_embedding) break;
  }
}

}  // namespace detail

namespace {

using detail::HfPiece;
using detail::hf_pieces;
using detail::piece_source;
using model::ParamSpec;

// Element i of a mapped F32 or BF16 tensor, as fp32 (memcpy: the mapping need not be aligned).
inline float load_f32(const std::byte* p, DType dt, size_t i) {
  if (dt == DType::kF32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t b;
  std::memcpy(&b, p + 2 * i, 2);
  return bf16_to_f32(b);
}

std::optional<int64_t> metadata_int(const SafetensorsFile& f, const std::string& key) {
  auto it = f.metadata().find(key);
  if (it == f.metadata().end()) return std::nullopt;
  int64_t v = 0;
  const std::string& s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  AXONN_CHECK_IO(ec == std::errc() && end == s.data() + s.size(), "safetensors file '", f.path(), "': metadata '", key,
                 "' is '", s, "', not an integer");
  return v;
}

nlohmann::json parse_json(std::string_view text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw IoError("'" + where + "' is not valid JSON: " + e.what());
  }
}

// Adds the pieces [begin, end) to a writer (their data converted or transposed into `buffers`).
void add_pieces(SafetensorsWriter& w, const std::vector<HfPiece>& pieces, size_t begin, size_t end,
                const model::ModelSpec& spec, const Arena& params, DType dtype,
                std::deque<std::vector<uint8_t>>& buffers) {
  for (size_t i = begin; i < end; i++) {
    const HfPiece& p = pieces[i];
    const float* src = piece_source(params, spec, p);
    if (!p.transposed && dtype == DType::kF32) {
      w.add(p.name, DType::kF32, p.shape(), src);  // straight from the arena
      continue;
    }
    const auto n = static_cast<size_t>(p.numel());
    std::vector<uint8_t>& buf = buffers.emplace_back(n * dtype_size(dtype));
    auto put = [&](size_t at, float v) {
      if (dtype == DType::kF32) {
        std::memcpy(buf.data() + 4 * at, &v, 4);
      } else {
        const uint16_t b = f32_to_bf16(v);
        std::memcpy(buf.data() + 2 * at, &b, 2);
      }
    };
    if (p.transposed) {  // [rows, cols] here, [cols, rows] in the file
      for (int64_t r = 0; r < p.rows; r++)
        for (int64_t c = 0; c < p.cols; c++) put(static_cast<size_t>(c * p.rows + r), src[r * p.cols + c]);
    } else {
      for (size_t k = 0; k < n; k++) put(k, src[k]);
    }
    w.add(p.name, dtype, p.shape(), buf.data());
  }
}

// HF has no padded vocabulary; rows V..Vp-1 are zero in every model axonn or llm.c makes (no token
// and no target ever reaches them), so dropping them loses nothing. Say so otherwise.
void warn_about_padding(const std::string& path, const model::ModelSpec& spec, const Arena& params) {
  const model::GptConfig& c = spec.config;
  for (int t : {spec.token_embedding, spec.lm_head}) {
    const float* w = params.tensor(static_cast<size_t>(t)).f32();
    const size_t live = static_cast<size_t>(c.vocab_size) * c.channels;
    const size_t all = static_cast<size_t>(c.padded_vocab_size) * c.channels;
    size_t nonzero = 0;
    for (size_t i = live; i < all; i++) nonzero += w[i] != 0.0f;
    if (nonzero > 0)
      log_warn("%s: %zu non-zero values in the padding rows %d..%d of %s are not written (HF has no padded "
               "vocabulary)",
               path.c_str(), nonzero, c.vocab_size, c.padded_vocab_size - 1,
               spec.params[static_cast<size_t>(t)].name.c_str());
    if (spec.lm_head == spec.token_embedding) break;
  }
}

// The shortest decimal that reads back as the same float: 1e-05 for the float nearest 1e-5, as
// upstream config.json files write it (not the float's double, 9.999999747378752e-06).
double shortest_decimal(float v) {
  char buf[40];
  for (int precision = 1; precision <= 9; precision++) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return std::strtod(buf, nullptr);
}

// The metadata of every safetensors file written (its config in the stored dtype).
void set_metadata(SafetensorsWriter& w, const model::GptConfig& c, DType dtype) {
  w.set_metadata("format", "pt");
  if (c.family == model::Family::kGpt2) {
    w.set_metadata("n_layer", std::to_string(c.num_layers));
    w.set_metadata("n_head", std::to_string(c.num_heads));
    w.set_metadata("n_embd", std::to_string(c.channels));
    w.set_metadata("vocab_size", std::to_string(c.vocab_size));
    w.set_metadata("n_positions", std::to_string(c.max_seq_len));
  } else {
    w.set_metadata("config", hf_config_json(c, dtype));
  }
  w.set_metadata("padded_vocab_size", std::to_string(c.padded_vocab_size));
  w.set_metadata("producer", library_version());
}

// --- config.json --------------------------------------------------------------------------------

int int_of(const nlohmann::json& j, const char* key, const std::string& where, int fallback = INT32_MIN) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    AXONN_CHECK_IO(fallback != INT32_MIN, "'", where, "' has no \"", key, "\"");
    return fallback;
  }
  AXONN_CHECK_IO(it->is_number_integer() && it->get<int64_t>() >= INT32_MIN && it->get<int64_t>() <= INT32_MAX, "'",
                 where, "': \"", key, "\" is ", it->dump(), ", not an integer");
  return it->get<int>();
}

double number_of(const nlohmann::json& j, const char* key, const std::string& where, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  AXONN_CHECK_IO(it->is_number(), "'", where, "': \"", key, "\" is ", it->dump(), ", not a number");
  return it->get<double>();
}

model::GptConfig llama_from_json(const nlohmann::json& j, const std::string& where) {
  model::GptConfig c;
  c.family = model::Family::kLlama;
  c.channels = int_of(j, "hidden_size", where);
  c.ffn_hidden = int_of(j, "intermediate_size", where);
  c.num_layers = int_of(j, "num_hidden_layers", where);
  c.num_heads = int_of(j, "num_attention_heads", where);
  c.num_kv_heads = int_of(j, "num_key_value_heads", where, c.num_heads);
  c.head_dim = int_of(j, "head_dim", where, 0);
  if (c.num_heads > 0 && c.head_dim * c.num_heads == c.channels) c.head_dim = 0;  // the default: C / NH
  c.max_seq_len = int_of(j, "max_position_embeddings", where, 2048);
  c.vocab_size = int_of(j, "vocab_size", where);
  c.padded_vocab_size = model::pad_vocab(c.vocab_size);
  c.norm_eps = static_cast<float>(number_of(j, "rms_norm_eps", where, 1e-6));
  c.rope_theta = number_of(j, "rope_theta", where, 10000.0);
  c.tied_embeddings = j.value("tie_word_embeddings", false);
  const std::string act = j.value("hidden_act", std::string("silu"));
  AXONN_CHECK_IO(act == "silu", "'", where, "': hidden_act is '", act, "'; axonn's Llama MLP is SwiGLU (silu)");
  AXONN_CHECK_IO(!j.value("attention_bias", false) && !j.value("mlp_bias", false), "'", where,
                 "' asks for attention_bias or mlp_bias; axonn's Llama has no biases");
  if (auto it = j.find("rope_scaling"); it != j.end() && !it->is_null()) {
    AXONN_CHECK_IO(it->is_object(), "'", where, "': rope_scaling is not an object");
    const std::string type = it->value("rope_type", it->value("type", std::string()));
    AXONN_CHECK_IO(type == "llama3", "'", where, "': rope_scaling type '", type,
                   "' is not supported; axonn implements Llama 3.1's \"llama3\"");
    c.rope_scaling.factor = number_of(*it, "factor", where, 0);
    c.rope_scaling.low_freq_factor = number_of(*it, "low_freq_factor", where, 1.0);
    c.rope_scaling.high_freq_factor = number_of(*it, "high_freq_factor", where, 4.0);
    c.rope_scaling.original_max_position_embeddings = int_of(*it, "original_max_position_embeddings", where, 8192);
  }
  if (auto it = j.find("bos_token_id"); it != j.end() && it->is_number_integer()) c.bos_token_id = it->get<int>();
  if (auto it = j.find("eos_token_id"); it != j.end()) {
    if (it->is_number_integer()) c.eos_token_ids = {it->get<int>()};
    if (it->is_array())
      for (const auto& id : *it)
        if (id.is_number_integer()) c.eos_token_ids.push_back(id.get<int>());
  }
  return c;
}

model::GptConfig gpt2_from_json(const nlohmann::json& j, const std::string& where) {
  model::GptConfig c;
  c.num_layers = int_of(j, "n_layer", where);
  c.num_heads = int_of(j, "n_head", where);
  c.channels = int_of(j, "n_embd", where);
  c.vocab_size = int_of(j, "vocab_size", where);
  c.max_seq_len = int_of(j, "n_positions", where, 1024);
  c.padded_vocab_size = model::pad_vocab(c.vocab_size);
  return c;
}

// "gpt2" or "llama", from config.json's model_type (or architectures).
model::Family family_of(const nlohmann::json& j, const std::string& where) {
  AXONN_CHECK_IO(j.is_object(), "'", where, "' is not a JSON object");
  std::string type = j.value("model_type", std::string());
  if (type.empty() && j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    const std::string arch = j["architectures"][0].get<std::string>();
    type = arch == "LlamaForCausalLM" ? "llama" : arch.starts_with("GPT2") ? "gpt2" : arch;
  }
  if (type == "llama") return model::Family::kLlama;
  if (type == "gpt2") return model::Family::kGpt2;
  throw IoError("'" + where + "' describes a model of type '" + type +
                "'; axonn reads GPT-2 (GPT2LMHeadModel) and Llama (LlamaForCausalLM) checkpoints");
}

// The model shape of a GPT-2 safetensors file: layers, channels, vocabulary and positions from the
// tensor shapes; the metadata, when present, must agree with them. The heads (which no tensor shape
// shows) come from the metadata's n_head, else `num_heads`, else config.json's n_head.
model::GptConfig gpt2_from_file(const SafetensorsFile& f, int num_heads, std::optional<int> config_heads) {
  const std::string where = "HF GPT-2 file '" + f.path() + "'";
  auto find = [&](const std::string& n) {
    const TensorInfo* t = f.find(n);
    return t ? t : f.find("transformer." + n);
  };
  const TensorInfo* wte = find("wte.weight");
  const TensorInfo* wpe = find("wpe.weight");
  AXONN_CHECK_IO(wte && wpe, where, " has no ", wte ? "wpe.weight" : "wte.weight",
                 " tensor: is it a GPT-2 model in Hugging Face's layout?");
  AXONN_CHECK_IO(wte->shape.size() == 2 && wpe->shape.size() == 2 && wte->shape[1] == wpe->shape[1], where,
                 ": wte.weight ", wte->shape_str(), " and wpe.weight ", wpe->shape_str(),
                 " are not [V, C] and [n_positions, C]");
  AXONN_CHECK_IO(wte->shape[0] <= INT32_MAX && wte->shape[1] <= INT32_MAX && wpe->shape[0] <= INT32_MAX, where,
                 ": wte.weight ", wte->shape_str(), " or wpe.weight ", wpe->shape_str(), " is implausibly large");
  model::GptConfig c;
  c.vocab_size = static_cast<int>(wte->shape[0]);
  c.channels = static_cast<int>(wte->shape[1]);
  c.max_seq_len = static_cast<int>(wpe->shape[0]);
  c.num_layers = 0;
  while (find("h." + std::to_string(c.num_layers) + ".ln_1.weight")) c.num_layers++;
  AXONN_CHECK_IO(c.num_layers > 0, where, " has no layers (no h.0.ln_1.weight)");
  auto agree = [&](const char* key, int value) {
    if (auto m = metadata_int(f, key))
      AXONN_CHECK_IO(*m == value, where, ": metadata ", key, "=", *m, " disagrees with the tensors (", value, ")");
  };
  agree("n_layer", c.num_layers);
  agree("n_embd", c.channels);
  agree("vocab_size", c.vocab_size);
  agree("n_positions", c.max_seq_len);
  if (auto m = metadata_int(f, "n_head")) {
    AXONN_CHECK_IO(num_heads <= 0 || num_heads == *m, where, " has n_head ", *m, ", but ", num_heads,
                   " heads were asked for; drop --heads or make it agree");
    c.num_heads = static_cast<int>(*m);
  } else if (num_heads > 0) {
    c.num_heads = num_heads;
  } else if (config_heads) {
    c.num_heads = *config_heads;
  } else {
    throw IoError(where +
                  " does not say how many attention heads the model has (no n_head in its metadata "
                  "and no config.json beside it); give it with --heads (GPT-2 124M: 12)");
  }
  c.padded_vocab_size = static_cast<int>(metadata_int(f, "padded_vocab_size").value_or(model::pad_vocab(c.vocab_size)));
  return c;
}

}  // namespace

// --- config.json ----------------------------------------------------------------------------------

std::string hf_config_json(const model::GptConfig& c, DType dtype) {
  nlohmann::ordered_json j;
  const char* torch_dtype = dtype == DType::kBF16 ? "bfloat16" : "float32";
  if (c.family == model::Family::kGpt2) {
    j["architectures"] = {"GPT2LMHeadModel"};
    j["model_type"] = "gpt2";
    j["n_layer"] = c.num_layers;
    j["n_head"] = c.num_heads;
    j["n_embd"] = c.channels;
    j["vocab_size"] = c.vocab_size;
    j["n_positions"] = c.max_seq_len;
    j["n_ctx"] = c.max_seq_len;
    j["activation_function"] = "gelu_new";  // llm.c's tanh approximation
    j["layer_norm_epsilon"] = 1e-5;
    j["tie_word_embeddings"] = true;
    j["torch_dtype"] = torch_dtype;
    return j.dump(2) + "\n";
  }
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = c.channels;
  j["intermediate_size"] = c.mlp_hidden();
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.kv_heads();
  j["head_dim"] = c.head_size();
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_seq_len;
  j["rms_norm_eps"] = shortest_decimal(c.norm_eps);
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.enabled())
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  else
    j["rope_scaling"] = nullptr;
  j["vocab_size"] = c.vocab_size;
  j["tie_word_embeddings"] = c.tied_embeddings;
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  if (c.eos_token_ids.size() > 1) j["eos_token_id"] = c.eos_token_ids;
  j["initializer_range"] = 0.02;
  j["pretraining_tp"] = 1;
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

model::GptConfig parse_hf_config_json(std::string_view text, const std::string& where) {
  const nlohmann::json j = parse_json(text, where);
  model::GptConfig c;
  // a field of the wrong type ("model_type": 4) throws nlohmann's type_error from value() and get<>: the
  // file's fault (found by fuzz_hf_config)
  try {
    c = family_of(j, where) == model::Family::kLlama ? llama_from_json(j, where) : gpt2_from_json(j, where);
  } catch (const nlohmann::json::exception& e) {
    throw IoError("'" + where + "' has a field of the wrong type: " + e.what());
  }
  try {
    c.validate();
  } catch (const InvalidArgument& e) {
    throw IoError("'" + where + "' describes an invalid model: " + e.what());
  }
  return c;
}

// --- writing -----------------------------------------------------------------------------------------

FileDigest save_hf_safetensors(const std::string& path, const model::GptConfig& c, const Arena& params, DType dtype,
                               Progress* progress) {
  const model::ModelSpec spec = model::model_spec(c);
  AXONN_CHECK(params.size() == spec.params.size(), "save_hf_safetensors needs the model's ", spec.params.size(),
              " tensors, got ", params.size());
  AXONN_CHECK_ARG(dtype == DType::kF32 || dtype == DType::kBF16, "HF checkpoints are written in F32 or BF16");
  warn_about_padding(path, spec, params);
  const std::vector<HfPiece> pieces = hf_pieces(spec);
  std::deque<std::vector<uint8_t>> buffers;
  SafetensorsWriter w;
  add_pieces(w, pieces, 0, pieces.size(), spec, params, dtype, buffers);
  set_metadata(w, c, dtype);
  return w.write(path, progress);
}

void check_hf_dir_output(const std::string& dir) {
  AXONN_CHECK_ARG(!holds_checkpoints(dir), "'", dir, "' is a checkpoint directory: a Hugging Face model written there "
                  "would be read in the checkpoints' place by --init. Give the model a directory of its own");
}

void save_hf_dir(const std::string& dir, const model::GptConfig& c, const Arena& params, DType dtype,
                 uint64_t max_shard_bytes, Progress* progress) {
  const model::ModelSpec spec = model::model_spec(c);
  AXONN_CHECK(params.size() == spec.params.size(), "save_hf_dir needs the model's ", spec.params.size(),
              " tensors, got ", params.size());
  AXONN_CHECK_ARG(dtype == DType::kF32 || dtype == DType::kBF16, "HF checkpoints are written in F32 or BF16");
  check_hf_dir_output(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  AXONN_CHECK_IO(!ec, "cannot create directory '", dir, "': ", ec.message());
  const std::vector<HfPiece> pieces = hf_pieces(spec);
  // the shards: consecutive pieces up to max_shard_bytes each
  std::vector<size_t> cuts = {0};
  uint64_t total = 0, in_shard = 0;
  for (size_t i = 0; i < pieces.size(); i++) {
    const uint64_t b = static_cast<uint64_t>(pieces[i].numel()) * dtype_size(dtype);
    if (max_shard_bytes > 0 && in_shard > 0 && in_shard + b > max_shard_bytes) {
      cuts.push_back(i);
      in_shard = 0;
    }
    in_shard += b;
    total += b;
  }
  cuts.push_back(pieces.size());
  const size_t shards = cuts.size() - 1;
  warn_about_padding(dir, spec, params);
  nlohmann::ordered_json weight_map;
  for (size_t s = 0; s < shards; s++) {
    char name[64];
    if (shards == 1)
      std::snprintf(name, sizeof name, "%s", std::string(kHfWeightsName).c_str());
    else
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards);
    std::deque<std::vector<uint8_t>> buffers;
    SafetensorsWriter w;
    add_pieces(w, pieces, cuts[s], cuts[s + 1], spec, params, dtype, buffers);
    set_metadata(w, c, dtype);
    w.write((fs::path(dir) / name).string(), progress);
    for (size_t i = cuts[s]; i < cuts[s + 1]; i++) weight_map[pieces[i].name] = name;
  }
  if (shards > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    write_file_atomic((fs::path(dir) / kHfIndexName).string(), index.dump(2) + "\n");
  } else {
    fs::remove(fs::path(dir) / kHfIndexName, ec);  // a stale index would name shards that are gone
  }
  write_file_atomic((fs::path(dir) / kHfConfigName).string(), hf_config_json(c, dtype));
  write_file_atomic((fs::path(dir) / kHfGenerationConfigName).string(), hf_generation_config_json(c));
}

std::string hf_generation_config_json(const model::GptConfig& c) {
  // transformers' GenerationConfig: the special ids generation stops at; the sampling defaults are the
  // library's (greedy), as for a config derived from the model's ("_from_model_config")
  nlohmann::ordered_json j;
  j["_from_model_config"] = true;
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  if (c.eos_token_ids.size() > 1) j["eos_token_id"] = c.eos_token_ids;
  return j.dump(2) + "\n";
}

void check_tokenizer_fits(const text::Tokenizer& tok, const model::GptConfig& c) {
  AXONN_CHECK_ARG(tok.vocab_size() <= c.vocab_size, "the tokenizer ", tok.describe(), " has ", tok.vocab_size(),
                  " ids but the model's vocabulary ", c.vocab_size,
                  ": it is not the model's tokenizer; give --tokenizer the one its data was prepared with");
}

std::string hf_tokenizer_config_json(const model::GptConfig& c, const text::Tokenizer& tok,
                                     const std::string& tokenizer_class) {
  nlohmann::ordered_json j;
  j["tokenizer_class"] = tokenizer_class;
  const std::optional<text::TokenizerListing> l = tok.listing();
  auto text_of = [&](int id) { return l && id >= 0 && static_cast<size_t>(id) < l->tokens.size() ? l->tokens[id] : ""; };
  const int unk = [&] {
    if (l)
      for (size_t id = 0; id < l->types.size(); id++)
        if (l->types[id] == text::TokenizerListing::kUnknown) return static_cast<int>(id);
    return -1;
  }();
  const int eos = tok.eos_id() >= 0 ? tok.eos_id() : tok.eot_id();
  j["bos_token"] = tok.bos_id() >= 0 ? nlohmann::ordered_json(text_of(tok.bos_id())) : nlohmann::ordered_json();
  j["eos_token"] = eos >= 0 ? nlohmann::ordered_json(text_of(eos)) : nlohmann::ordered_json();
  if (unk >= 0) j["unk_token"] = text_of(unk);
  if (tokenizer_class == "GPT2Tokenizer") j["unk_token"] = j["eos_token"];  // GPT-2's own convention
  // a prompt encodes as `axonn generate --prompt` encodes it: no BOS added
  if (tokenizer_class == "LlamaTokenizer") {
    j["add_bos_token"] = false;
    j["add_eos_token"] = false;
  }
  j["model_max_length"] = c.max_seq_len;
  j["clean_up_tokenization_spaces"] = false;
  return j.dump(2) + "\n";
}

void save_hf_tokenizer_files(const std::string& dir, const model::GptConfig& c, const text::Tokenizer& tok,
                             const std::vector<std::pair<std::string, std::string>>& files) {
  check_tokenizer_fits(tok, c);
  std::string cls;
  bool has_config = false;
  for (const auto& [name, contents] : files) {
    const std::string hf_name = name == "encoder.json" ? "vocab.json" : name == "vocab.bpe" ? "merges.txt" : name;
    write_file_atomic((fs::path(dir) / hf_name).string(), contents);
    has_config = has_config || hf_name == "tokenizer_config.json";
    if (hf_name == "tokenizer.json") cls = "PreTrainedTokenizerFast";
    if (hf_name == "vocab.json") cls = "GPT2Tokenizer";
    if (hf_name == "tokenizer.model") cls = "LlamaTokenizer";
  }
  if (!has_config)
    write_file_atomic((fs::path(dir) / "tokenizer_config.json").string(), hf_tokenizer_config_json(c, tok, cls));
}

void save_hf_tokenizer(const std::string& dir, const model::GptConfig& c, const std::string& name_or_path) {
  const auto tok = text::load_tokenizer(name_or_path);
  check_tokenizer_fits(*tok, c);
  const auto files = text::tokenizer_files(name_or_path);
  AXONN_CHECK_ARG(!files.empty(), "the tokenizer ", tok->describe(), " only decodes: it cannot go into a Hugging Face ",
                  "directory; give --tokenizer the model's tokenizer.json, GPT-2 files or tokenizer.model");
  std::vector<std::pair<std::string, std::string>> named;
  for (const auto& [from, name] : files) named.emplace_back(name, read_text_file(from));
  save_hf_tokenizer_files(dir, c, *tok, named);
}

void save_hf_tokenizer(const std::string& dir, const model::GptConfig& c, const text::Tokenizer& tok) {
  const std::optional<text::TokenizerListing> listing = tok.listing();
  AXONN_CHECK_ARG(listing.has_value(), "the tokenizer ", tok.describe(), " only decodes: it cannot go into a ",
                  "Hugging Face directory");
  save_hf_tokenizer_files(dir, c, tok, {text::tokenizer_file_from_listing(*listing, tok.describe())});
}

// --- reading -----------------------------------------------------------------------------------------

bool is_hf_model_dir(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  return fs::is_directory(p, ec) && fs::is_regular_file(p / kHfConfigName, ec) &&
         (fs::is_regular_file(p / kHfWeightsName, ec) || fs::is_regular_file(p / kHfIndexName, ec));
}

HfCheckpoint::HfCheckpoint(const std::string& path, int num_heads) : path_(path) {
  std::error_code ec;
  const bool dir = fs::is_directory(path, ec);
  std::optional<nlohmann::json> config;  // config.json: the directory's, or one beside a file
  const fs::path config_path = dir ? fs::path(path) / kHfConfigName : fs::path(path).parent_path() / kHfConfigName;
  if (fs::is_regular_file(config_path, ec)) config = parse_json(read_text_file(config_path.string()), config_path.string());
  if (dir) {
    AXONN_CHECK_IO(config, "'", path, "' is a directory without ", kHfConfigName,
                   ": not a Hugging Face model directory (nor a checkpoint)");
    const fs::path index = fs::path(path) / kHfIndexName;
    if (fs::is_regular_file(index, ec)) {
      // sharded: every file the weight map names, each holding exactly the tensors it is named for
      const nlohmann::json j = parse_json(read_text_file(index.string()), index.string());
      AXONN_CHECK_IO(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), "'", index.string(),
                     "' has no weight_map");
      std::map<std::string, std::set<std::string>> by_file;
      for (const auto& [name, file] : j["weight_map"].items()) {
        AXONN_CHECK_IO(file.is_string(), "'", index.string(), "': the weight_map entry of '", name,
                       "' is not a file name");
        by_file[file.get<std::string>()].insert(name);
      }
      for (const auto& [file, names] : by_file) {
        const fs::path fp = fs::path(path) / file;
        AXONN_CHECK_IO(fs::is_regular_file(fp, ec), "'", path, "': the shard '", file, "' that ", kHfIndexName,
                       " names is missing");
        auto f = std::make_unique<SafetensorsFile>(fp.string());
        for (const std::string& n : names)
          AXONN_CHECK_IO(f->find(n), "'", fp.string(), "' lacks tensor '", n, "', which ", kHfIndexName,
                         " places there");
        AXONN_CHECK_IO(f->tensors().size() == names.size(), "'", fp.string(), "' holds ", f->tensors().size(),
                       " tensors, but ", kHfIndexName, " places ", names.size(), " there");
        files_.push_back(std::move(f));
      }
    } else {
      files_.push_back(std::make_unique<SafetensorsFile>((fs::path(path) / kHfWeightsName).string()));
    }
  } else {
    files_.push_back(std::make_unique<SafetensorsFile>(path));
  }
  // the model's shape
  const SafetensorsFile& first = *files_.front();
  const bool gpt2 = first.find("wte.weight") || first.find("transformer.wte.weight");
  if (gpt2) {
    std::optional<int> heads;
    if (config && config->is_object() && config->contains("n_head") && (*config)["n_head"].is_number_integer())
      heads = (*config)["n_head"].get<int>();
    config_ = gpt2_from_file(first, num_heads, heads);
  } else if (config) {
    config_ = parse_hf_config_json(config->dump(), config_path.string());
  } else if (auto it = first.metadata().find("config"); it != first.metadata().end()) {
    config_ = parse_hf_config_json(it->second, first.path() + " (its metadata's config)");
  } else {
    AXONN_CHECK_IO(first.find("model.embed_tokens.weight"), "'", path,
                   "' is neither a GPT-2 nor a Llama safetensors file (no wte.weight, no model.embed_tokens.weight)");
    throw IoError("Llama safetensors file '" + path + "' has no " + std::string(kHfConfigName) +
                  " beside it and no config in its metadata: give the model directory instead");
  }
  AXONN_CHECK_IO(num_heads <= 0 || num_heads == config_.num_heads, "'", path, "' has ", config_.num_heads,
                 " heads, but ", num_heads, " were asked for; drop --heads or make it agree");
  // our own files record their padded vocabulary (GPT-2's: read with the shapes above)
  if (auto m = metadata_int(first, "padded_vocab_size"); m && !gpt2) config_.padded_vocab_size = static_cast<int>(*m);
  try {
    config_.validate();
  } catch (const InvalidArgument& e) {
    throw IoError("HF checkpoint '" + path + "' describes an invalid model: " + e.what());
  }
}

HfCheckpoint::~HfCheckpoint() = default;

std::string HfCheckpoint::kind() const {
  std::string s = config_.family == model::Family::kLlama ? "HF Llama safetensors" : "HF GPT-2 safetensors";
  if (files_.size() > 1) s += " (" + std::to_string(files_.size()) + " shards)";
  return s;
}

const TensorInfo* HfCheckpoint::find(const std::string& name, const SafetensorsFile** file) const {
  for (const auto& f : files_) {
    const TensorInfo* t = f->find(name);
    if (!t && config_.family == model::Family::kGpt2) t = f->find("transformer." + name);
    if (t) {
      *file = f.get();
      return t;
    }
  }
  return nullptr;
}

void HfCheckpoint::load(Arena& params, Progress* progress) const {
  load_ranges(detail::arena_sink(params, model::model_spec(config_)), progress);
}

void HfCheckpoint::load_ranges(const RangeSink& sink, Progress* progress) const {
  const model::ModelSpec spec = model::model_spec(config_);
  const std::string where = kind() + " '" + path_ + "'";
  std::set<std::string> used;
  // By blocks of elements in the file's order; each block's pages of the mapping leave this process's memory
  // once read (the file stays in the page cache), so that no tensor is resident twice.
  constexpr int64_t kBlock = int64_t{1} << 20;  // elements
  std::vector<float> block;
  for (const HfPiece& p : hf_pieces(spec)) {
    const SafetensorsFile* file = nullptr;
    const TensorInfo* t = find(p.name, &file);
    AXONN_CHECK_IO(t, where, " has no tensor '", p.name, "' (the model is ", config_.str(), ")");
    AXONN_CHECK_IO(t->dtype == DType::kF32 || t->dtype == DType::kBF16, where, ": tensor '", t->name, "' is ",
                   safetensors_dtype_name(t->dtype), "; weights must be F32 or BF16");
    const std::vector<int64_t> want = p.shape();
    AXONN_CHECK_IO(t->shape == want, where, ": tensor '", t->name, "' has shape ", t->shape_str(), ", expected ",
                   TensorInfo{"", DType::kF32, want, 0, 0}.shape_str(), " for ", config_.str());
    used.insert(t->name);
    const std::byte* src = file->data(*t);
    const int64_t n = p.numel(), elem = static_cast<int64_t>(dtype_size(t->dtype));
    const int64_t first = p.row0 * (p.cols ? p.cols : 1);  // the piece's rows in the layer's slice
    if (p.transposed) {
      // [cols, rows] in the file (GPT-2's Conv1D): the whole piece is turned, then delivered
      block.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; i++)  // file element i is (c, r) = (i / rows, i % rows)
        block[static_cast<size_t>((i % p.rows) * p.cols + i / p.rows)] = load_f32(src, t->dtype, static_cast<size_t>(i));
      file->release(src, static_cast<size_t>(n * elem));
      sink(p.t, p.layer, first, n, block.data());
    } else {
      block.resize(static_cast<size_t>(std::min(n, kBlock)));
      for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
        const int64_t m = std::min(kBlock, n - i0);
        if (t->dtype == DType::kF32)
          std::memcpy(block.data(), src + i0 * elem, static_cast<size_t>(m) * sizeof(float));
        else
          for (int64_t i = 0; i < m; i++) block[static_cast<size_t>(i)] = load_f32(src, t->dtype, static_cast<size_t>(i0 + i));
        file->release(src + i0 * elem, static_cast<size_t>(m * elem));
        sink(p.t, p.layer, first + i0, m, block.data());
      }
    }
    if (progress) progress->add(n * static_cast<int64_t>(sizeof(float)));
  }
  detail::sink_vocab_padding(config_, spec, sink);
  // Anything left must be a buffer HF saves alongside the weights, or a tied head.
  const bool gpt2 = config_.family == model::Family::kGpt2;
  for (const auto& f : files_)
    for (const TensorInfo& t : f->tensors()) {
      if (used.count(t.name)) continue;
      const std::string n = gpt2 && t.name.starts_with("transformer.") ? t.name.substr(12) : t.name;
      if (gpt2 && n.starts_with("h.") && (n.ends_with(".attn.bias") || n.ends_with(".attn.masked_bias"))) continue;
      if (!gpt2 && n.ends_with(".rotary_emb.inv_freq")) continue;
      if (n == "lm_head.weight" && spec.lm_head == spec.token_embedding) {
        const SafetensorsFile* wf = nullptr;
        const std::string emb = spec.params[static_cast<size_t>(spec.token_embedding)].hf_names[0];
        const TensorInfo* w = find(emb, &wf);
        AXONN_CHECK_IO(w && t.dtype == w->dtype && t.shape == w->shape &&
                           std::memcmp(f->data(t), wf->data(*w), t.bytes()) == 0,
                       where, ": lm_head.weight differs from ", emb, ", but the model ties them",
                       gpt2 ? " (GPT-2 always does)" : " (tie_word_embeddings)");
        continue;
      }
      throw IoError(where + " has a tensor axonn's model does not know: '" + t.name + "' " +
                    std::string(safetensors_dtype_name(t.dtype)) + " " + t.shape_str());
    }
}

}  // namespace axonn::checkpoint
