#include "axonn/checkpoint/hf_gpt2.hpp"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/model/gpt.hpp"

namespace axonn::checkpoint {

namespace {

using model::Param;

// One llm.c tensor and its HF name. Per-layer tensors are named "h.{i}." + suffix.
struct HfName {
  Param param;
  const char* suffix;
  bool per_layer;
  bool transposed;  // Conv1D (in, out) in HF vs nn.Linear (out, in) in llm.c
};

constexpr HfName kNames[model::kNumParamTensors] = {
    {Param::kWte, "wte.weight", false, false},
    {Param::kWpe, "wpe.weight", false, false},
    {Param::kLn1w, "ln_1.weight", true, false},
    {Param::kLn1b, "ln_1.bias", true, false},
    {Param::kQkvw, "attn.c_attn.weight", true, true},
    {Param::kQkvb, "attn.c_attn.bias", true, false},
    {Param::kAttprojw, "attn.c_proj.weight", true, true},
    {Param::kAttprojb, "attn.c_proj.bias", true, false},
    {Param::kLn2w, "ln_2.weight", true, false},
    {Param::kLn2b, "ln_2.bias", true, false},
    {Param::kFcw, "mlp.c_fc.weight", true, true},
    {Param::kFcb, "mlp.c_fc.bias", true, false},
    {Param::kFcprojw, "mlp.c_proj.weight", true, true},
    {Param::kFcprojb, "mlp.c_proj.bias", true, false},
    {Param::kLnfw, "ln_f.weight", false, false},
    {Param::kLnfb, "ln_f.bias", false, false},
};

// kNames is in Param order, so a Param indexes it.
const HfName& hf(Param p) { return kNames[static_cast<int>(p)]; }

std::string layer_name(int layer, const char* suffix) { return "h." + std::to_string(layer) + "." + suffix; }

// The HF shape of one (per-layer slice of a) parameter: llm.c's shape, transposed for Conv1D
// weights, wte cut to the real vocabulary.
std::vector<int64_t> hf_shape(const model::GptConfig& c, const HfName& n) {
  Shape s = model::param_shape(c, n.param);
  if (n.per_layer) s = s.drop_front();
  std::vector<int64_t> v;
  for (int i = 0; i < s.ndim(); i++) v.push_back(s[i]);
  if (n.param == Param::kWte) v[0] = c.vocab_size;
  if (n.transposed) std::swap(v[0], v[1]);
  return v;
}

// dst [cols, rows] = transpose of src [rows, cols]; blocked so both sides stay in cache.
void transpose(float* dst, const float* src, int64_t rows, int64_t cols) {
  constexpr int64_t kB = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kB)
    for (int64_t c0 = 0; c0 < cols; c0 += kB)
      for (int64_t r = r0; r < std::min(rows, r0 + kB); r++)
        for (int64_t c = c0; c < std::min(cols, c0 + kB); c++) dst[c * rows + r] = src[r * cols + c];
}

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

// HF files saved from GPT2LMHeadModel prefix every name with "transformer."; GPT2Model's do not.
const TensorInfo* find_hf(const SafetensorsFile& f, const std::string& name) {
  if (const TensorInfo* t = f.find(name)) return t;
  return f.find("transformer." + name);
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

// n_head from HF's config.json beside the weights, if there is one.
std::optional<int> heads_from_config_json(const std::string& weights_path) {
  auto p = std::filesystem::path(weights_path).parent_path() / "config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return std::nullopt;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(p.string()));
  } catch (const nlohmann::json::exception& e) {
    throw IoError("'" + p.string() + "' is not valid JSON: " + e.what());
  }
  auto it = j.find("n_head");
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int>();
}

}  // namespace

FileDigest save_hf_gpt2(const std::string& path, const model::GptConfig& c, const Arena& params) {
  c.validate();
  AXONN_CHECK(params.size() == model::kNumParamTensors, "save_hf_gpt2 needs the 16 GPT-2 parameter tensors");
  // The Conv1D weights need a transposed copy (the writer takes pointers, so they all live in one
  // buffer until the write); every other tensor is written straight from the arena.
  int64_t transposed_numel = 0;
  for (const HfName& n : kNames)
    if (n.transposed) transposed_numel += model::param_shape(c, n.param).numel();
  std::vector<float> buffer(static_cast<size_t>(transposed_numel));
  float* next = buffer.data();

  SafetensorsWriter w;
  auto add = [&](const std::string& name, const HfName& n, const Tensor& t) {
    std::vector<int64_t> shape = hf_shape(c, n);
    if (n.transposed) {
      transpose(next, t.f32(), shape[1], shape[0]);
      w.add(name, DType::kF32, shape, next);
      next += t.numel();
    } else {
      w.add(name, DType::kF32, shape, t.data());  // wte: its first V rows
    }
  };
  auto tensor = [&](Param p) { return params.tensor(static_cast<size_t>(p)); };
  // HF has no padded vocabulary; rows V..Vp-1 of wte are zero in every model axonn or llm.c makes
  // (no token and no target ever reaches them), so dropping them loses nothing. Say so otherwise.
  {
    const float* wte = tensor(Param::kWte).f32();
    const size_t live = static_cast<size_t>(c.vocab_size) * c.channels;
    const size_t all = static_cast<size_t>(c.padded_vocab_size) * c.channels;
    size_t nonzero = 0;
    for (size_t i = live; i < all; i++) nonzero += wte[i] != 0.0f;
    if (nonzero > 0)
      log_warn(
          "%s: %zu non-zero values in the padding rows %d..%d of wte are not written (HF GPT-2 has no padded "
          "vocabulary)",
          path.c_str(), nonzero, c.vocab_size, c.padded_vocab_size - 1);
  }
  add("wte.weight", hf(Param::kWte), tensor(Param::kWte));
  add("wpe.weight", hf(Param::kWpe), tensor(Param::kWpe));
  for (int l = 0; l < c.num_layers; l++)
    for (const HfName& n : kNames)
      if (n.per_layer) add(layer_name(l, n.suffix), n, tensor(n.param)[l]);
  add("ln_f.weight", hf(Param::kLnfw), tensor(Param::kLnfw));
  add("ln_f.bias", hf(Param::kLnfb), tensor(Param::kLnfb));

  w.set_metadata("format", "pt");
  w.set_metadata("n_layer", std::to_string(c.num_layers));
  w.set_metadata("n_head", std::to_string(c.num_heads));
  w.set_metadata("n_embd", std::to_string(c.channels));
  w.set_metadata("vocab_size", std::to_string(c.vocab_size));
  w.set_metadata("n_positions", std::to_string(c.max_seq_len));
  w.set_metadata("padded_vocab_size", std::to_string(c.padded_vocab_size));
  w.set_metadata("producer", library_version());
  return w.write(path);
}

model::GptConfig read_hf_gpt2_config(const SafetensorsFile& f, int num_heads) {
  const std::string where = "HF GPT-2 file '" + f.path() + "'";
  const TensorInfo* wte = find_hf(f, "wte.weight");
  const TensorInfo* wpe = find_hf(f, "wpe.weight");
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
  while (find_hf(f, layer_name(c.num_layers, "ln_1.weight"))) c.num_layers++;
  AXONN_CHECK_IO(c.num_layers > 0, where, " has no layers (no h.0.ln_1.weight)");

  // the metadata, where present, must describe the same model as the shapes
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
  } else if (auto h = heads_from_config_json(f.path())) {
    c.num_heads = *h;
  } else {
    throw IoError(where +
                  " does not say how many attention heads the model has (no n_head in its metadata "
                  "and no config.json beside it); give it with --heads (GPT-2 124M: 12)");
  }
  c.padded_vocab_size = static_cast<int>(metadata_int(f, "padded_vocab_size").value_or(model::pad_vocab(c.vocab_size)));
  try {
    c.validate();
  } catch (const InvalidArgument& e) {
    throw IoError(where + " describes an invalid model: " + e.what());
  }
  return c;
}

void load_hf_gpt2_params(const SafetensorsFile& f, const model::GptConfig& c, Arena& params) {
  const std::string where = "HF GPT-2 file '" + f.path() + "'";
  AXONN_CHECK(params.size() == model::kNumParamTensors, "load_hf_gpt2_params needs the 16 GPT-2 parameter tensors");
  std::set<std::string> used;
  auto load = [&](const std::string& name, const HfName& n, const Tensor& dst) {
    const TensorInfo* t = find_hf(f, name);
    AXONN_CHECK_IO(t, where, " has no tensor '", name, "' (the model has ", c.num_layers, " layers)");
    AXONN_CHECK_IO(t->dtype == DType::kF32 || t->dtype == DType::kBF16, where, ": tensor '", t->name, "' is ",
                   safetensors_dtype_name(t->dtype), "; GPT-2 weights must be F32 or BF16");
    std::vector<int64_t> want = hf_shape(c, n);
    AXONN_CHECK_IO(t->shape == want, where, ": tensor '", t->name, "' has shape ", t->shape_str(), ", expected ",
                   TensorInfo{"", DType::kF32, want, 0, 0}.shape_str(), " for ", c.str());
    used.insert(t->name);
    const std::byte* src = f.data(*t);
    float* out = dst.f32();
    const auto count = static_cast<size_t>(t->numel());
    if (n.transposed) {
      // src is [in, out] (HF), dst is [out, in] (llm.c)
      const auto in = static_cast<size_t>(want[0]), outf = static_cast<size_t>(want[1]);
      for (size_t i = 0; i < in; i++)
        for (size_t o = 0; o < outf; o++) out[o * in + i] = load_f32(src, t->dtype, i * outf + o);
    } else if (t->dtype == DType::kF32) {
      std::memcpy(out, src, count * sizeof(float));
    } else {
      for (size_t i = 0; i < count; i++) out[i] = load_f32(src, t->dtype, i);
    }
  };
  auto tensor = [&](Param p) { return params.tensor(static_cast<size_t>(p)); };
  Tensor wte = tensor(Param::kWte);
  // padded vocabulary rows: zero, as llm.c and init_gpt_params make them
  std::memset(wte.f32(), 0, wte.bytes());
  load("wte.weight", hf(Param::kWte), wte);
  load("wpe.weight", hf(Param::kWpe), tensor(Param::kWpe));
  for (int l = 0; l < c.num_layers; l++)
    for (const HfName& n : kNames)
      if (n.per_layer) load(layer_name(l, n.suffix), n, tensor(n.param)[l]);
  load("ln_f.weight", hf(Param::kLnfw), tensor(Param::kLnfw));
  load("ln_f.bias", hf(Param::kLnfb), tensor(Param::kLnfb));

  // Anything left must be a buffer HF saves alongside the weights, or the tied head.
  for (const TensorInfo& t : f.tensors()) {
    if (used.count(t.name)) continue;
    std::string n = t.name.starts_with("transformer.") ? t.name.substr(12) : t.name;
    bool buffer = n.starts_with("h.") && (n.ends_with(".attn.bias") || n.ends_with(".attn.masked_bias"));
    if (buffer) continue;
    if (n == "lm_head.weight") {
      const TensorInfo* w = find_hf(f, "wte.weight");
      AXONN_CHECK_IO(t.dtype == w->dtype && t.shape == w->shape && std::memcmp(f.data(t), f.data(*w), t.bytes()) == 0,
                     where,
                     ": lm_head.weight differs from wte.weight; GPT-2 ties them and axonn supports only "
                     "the tied head");
      continue;
    }
    throw IoError(where + " has a tensor axonn's GPT-2 does not know: '" + t.name + "' " +
                  std::string(safetensors_dtype_name(t.dtype)) + " " + t.shape_str());
  }
}

std::string hf_gpt2_config_json(const model::GptConfig& c) {
  nlohmann::ordered_json j;
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
  j["torch_dtype"] = "float32";
  return j.dump(2) + "\n";
}

}  // namespace axonn::checkpoint
