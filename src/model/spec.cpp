#include "axonn/model/spec.hpp"

#include <cmath>

#include "axonn/core/error.hpp"

namespace axonn::model {

namespace {

// Builds a ModelSpec tensor by tensor.
struct Builder {
  ModelSpec spec;

  int add(ParamSpec p) {
    spec.params.push_back(std::move(p));
    return static_cast<int>(spec.params.size()) - 1;
  }
  // A per-layer tensor [L, dims...].
  static Shape layers(int64_t L, std::initializer_list<int64_t> dims) {
    if (dims.size() == 1) return {L, *dims.begin()};
    return {L, *dims.begin(), *(dims.begin() + 1)};
  }
  int norm(const std::string& name, std::vector<std::string> hf, bool per_layer, Role role, Stage stage) {
    const int64_t C = spec.config.channels, L = spec.config.num_layers;
    ParamSpec p;
    p.name = name;
    p.shape = per_layer ? Shape{L, C} : Shape{C};
    p.per_layer = per_layer;
    p.role = role;
    p.stage = stage;
    p.init.kind = role == Role::kNormWeight ? InitSpec::kOnes : InitSpec::kZeros;
    p.hf_names = std::move(hf);
    return add(std::move(p));
  }
  int vocab(const std::string& name, std::vector<std::string> hf, Stage stage, float std) {
    ParamSpec p;
    p.name = name;
    p.shape = {spec.config.padded_vocab_size, spec.config.channels};
    p.role = Role::kVocab;
    p.stage = stage;
    p.decay = true;
    p.init = {InitSpec::kNormal, std};
    p.hf_names = std::move(hf);
    return add(std::move(p));
  }
  // A block's linear: its weight, and its bias when `bias_hf` names one.
  void linear(const std::string& lname, int in, std::vector<int> parts, bool transposed, const std::string& wname,
              std::vector<std::string> w_hf, const std::string& bname, std::vector<std::string> b_hf, float std,
              bool hf_transposed) {
    const int64_t L = spec.config.num_layers;
    LinearSpec l;
    l.name = lname;
    l.in = in;
    for (int rows : parts) l.out += rows;
    l.parts = parts.size() > 1 ? parts : std::vector<int>{};
    l.transposed = transposed;
    const int k = static_cast<int>(spec.linears.size());
    ParamSpec w;
    w.name = wname;
    w.shape = layers(L, {l.out, in});
    w.per_layer = true;
    w.role = Role::kLinearWeight;
    w.linear = k;
    w.decay = true;
    w.init = {InitSpec::kNormal, std};
    w.hf_names = std::move(w_hf);
    w.hf_transposed = hf_transposed;
    l.weight = add(std::move(w));
    if (!bname.empty()) {
      ParamSpec b;
      b.name = bname;
      b.shape = layers(L, {l.out});
      b.per_layer = true;
      b.role = Role::kLinearBias;
      b.linear = k;
      b.hf_names = std::move(b_hf);
      l.bias = add(std::move(b));
    }
    spec.linears.push_back(std::move(l));
  }
};

// llm.c's GPT-2: its 16 tensors in its checkpoint order; HF's GPT2Model names (Conv1D weights [in, out]).
ModelSpec gpt2_spec(const GptConfig& c) {
  Builder b;
  b.spec.config = c;
  b.spec.norm = Norm::kLayerNorm;
  const int C = c.channels;
  // GPT-2's initialisation: normal(0, 0.02), the residual projections 0.02/sqrt(2L)
  const float std = 0.02f, proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(c.num_layers));
  b.spec.token_embedding = b.spec.lm_head = b.vocab("wte", {"wte.weight"}, Stage::kEmbedding, std);
  {
    ParamSpec p;
    p.name = "wpe";
    p.shape = {c.max_seq_len, C};
    p.role = Role::kPosition;
    p.stage = Stage::kEmbedding;
    p.decay = true;
    p.init = {InitSpec::kNormal, std};
    p.hf_names = {"wpe.weight"};
    b.spec.position_embedding = b.add(std::move(p));
  }
  b.norm("ln1w", {"h.{i}.ln_1.weight"}, true, Role::kNormWeight, Stage::kBlock);
  b.norm("ln1b", {"h.{i}.ln_1.bias"}, true, Role::kNormBias, Stage::kBlock);
  b.linear("qkv", C, {C, C, C}, false, "qkvw", {"h.{i}.attn.c_attn.weight"}, "qkvb", {"h.{i}.attn.c_attn.bias"}, std,
           true);
  b.linear("attproj", C, {C}, true, "attprojw", {"h.{i}.attn.c_proj.weight"}, "attprojb", {"h.{i}.attn.c_proj.bias"},
           proj_std, true);
  b.norm("ln2w", {"h.{i}.ln_2.weight"}, true, Role::kNormWeight, Stage::kBlock);
  b.norm("ln2b", {"h.{i}.ln_2.bias"}, true, Role::kNormBias, Stage::kBlock);
  b.linear("fc", C, {4 * C}, false, "fcw", {"h.{i}.mlp.c_fc.weight"}, "fcb", {"h.{i}.mlp.c_fc.bias"}, std, true);
  b.linear("fcproj", 4 * C, {C}, true, "fcprojw", {"h.{i}.mlp.c_proj.weight"}, "fcprojb", {"h.{i}.mlp.c_proj.bias"},
           proj_std, true);
  b.spec.final_norm = b.norm("lnfw", {"ln_f.weight"}, false, Role::kNormWeight, Stage::kHead);
  b.spec.final_norm_bias = b.norm("lnfb", {"ln_f.bias"}, false, Role::kNormBias, Stage::kHead);
  return b.spec;
}

// Hugging Face's LlamaForCausalLM. The q, k and v projections are one linear of three parts (q: NH
// heads, k and v: KV heads each), gate and up one of two; all normal(0, initializer_range = 0.02).
ModelSpec llama_spec(const GptConfig& c) {
  Builder b;
  b.spec.config = c;
  b.spec.norm = Norm::kRmsNorm;
  const int C = c.channels, A = c.attention_width(), KV = c.kv_width(), F = c.mlp_hidden();
  const float std = 0.02f;
  const std::string layer = "model.layers.{i}.";
  b.spec.token_embedding =
      b.vocab("embed_tokens", {"model.embed_tokens.weight"}, Stage::kEmbedding, std);
  b.norm("input_layernorm", {layer + "input_layernorm.weight"}, true, Role::kNormWeight, Stage::kBlock);
  b.linear("qkv", C, {A, KV, KV}, false, "qkv_proj",
           {layer + "self_attn.q_proj.weight", layer + "self_attn.k_proj.weight", layer + "self_attn.v_proj.weight"},
           "", {}, std, false);
  b.linear("o_proj", A, {C}, true, "o_proj", {layer + "self_attn.o_proj.weight"}, "", {}, std, false);
  b.norm("post_attention_layernorm", {layer + "post_attention_layernorm.weight"}, true, Role::kNormWeight,
         Stage::kBlock);
  b.linear("gate_up", C, {F, F}, false, "gate_up_proj", {layer + "mlp.gate_proj.weight", layer + "mlp.up_proj.weight"},
           "", {}, std, false);
  b.linear("down", F, {C}, true, "down_proj", {layer + "mlp.down_proj.weight"}, "", {}, std, false);
  b.spec.final_norm = b.norm("norm", {"model.norm.weight"}, false, Role::kNormWeight, Stage::kHead);
  b.spec.lm_head = c.tied_embeddings ? b.spec.token_embedding : b.vocab("lm_head", {"lm_head.weight"}, Stage::kHead, std);
  return b.spec;
}

}  // namespace

std::vector<std::vector<int>> zdata_grad_buckets(const ModelSpec& spec, Stage stage) {
  std::vector<int> small;
  std::vector<std::vector<int>> alone;
  for (int i = 0; i < static_cast<int>(spec.params.size()); i++) {
    const ParamSpec& p = spec.params[static_cast<size_t>(i)];
    if (p.stage != stage || p.role == Role::kLinearWeight) continue;
    if (p.role == Role::kVocab || p.role == Role::kPosition)
      alone.insert(alone.begin(), {i});
    else
      small.push_back(i);
  }
  std::vector<std::vector<int>> out;
  if (!small.empty()) out.push_back(small);
  out.insert(out.end(), alone.begin(), alone.end());
  return out;
}

ModelSpec model_spec(const GptConfig& config) {
  config.validate();
  return config.family == Family::kLlama ? llama_spec(config) : gpt2_spec(config);
}

int ModelSpec::index(std::string_view name) const {
  std::string known;
  for (size_t i = 0; i < params.size(); i++) {
    if (params[i].name == name) return static_cast<int>(i);
    known += (known.empty() ? "" : ", ") + params[i].name;
  }
  throw InvalidArgument("the " + std::string(family_name(config.family)) + " model has no tensor '" +
                        std::string(name) + "'; its tensors: " + known);
}

int64_t ModelSpec::num_parameters() const {
  int64_t n = 0;
  for (const ParamSpec& p : params) n += p.shape.numel();
  return n;
}

unsigned ModelSpec::replica_axes(int i) const {
  const ParamSpec& p = params[static_cast<size_t>(i)];
  switch (p.role) {
    case Role::kLinearWeight: return 0;  // split over X, Y and Z
    case Role::kLinearBias:              // the output block: over Y (normal) or X (transposed)
      return (linears[static_cast<size_t>(p.linear)].transposed ? kReplicatedOverY : kReplicatedOverX) |
             kReplicatedOverZ;
    case Role::kVocab: return kReplicatedOverZ;  // rows over X*Y
    case Role::kPosition: case Role::kNormWeight: case Role::kNormBias:
      return kReplicatedOverY | kReplicatedOverZ;  // channels over X
  }
  return 0;
}

std::optional<GridMisfit> grid_misfit(const ModelSpec& spec, long gx, long gy, long gz) {
  const GptConfig& c = spec.config;
  using detail::concat;
  if (c.channels % gx != 0)
    return GridMisfit{"hidden size not divisible by Gx",
                      concat("channels ", c.channels, " are not divisible by Gx=", gx,
                             "; the hidden size is split over X: choose a Gx that divides ", c.channels)};
  if (c.num_heads % gy != 0)
    return GridMisfit{"heads not divisible by Gy",
                      concat("heads ", c.num_heads, " are not divisible by Gy=", gy,
                             "; attention heads are split over Y: choose a Gy that divides ", c.num_heads)};
  if (c.family == Family::kGpt2 && c.channels % gy != 0)
    return GridMisfit{"hidden size not divisible by Gy",
                      concat("channels ", c.channels, " are not divisible by Gy=", gy,
                             "; attention and MLP outputs are split over Y: choose a Gy that divides ", c.channels)};
  if (c.family == Family::kLlama) {
    // Y splits the query heads, the KV heads with them, and the MLP's features
    auto fits_y = [&](long y) { return c.num_heads % y == 0 && c.kv_heads() % y == 0 && c.mlp_hidden() % y == 0; };
    if (!fits_y(gy)) {
      std::string works;
      for (long y = 1; y <= c.num_heads; y++)
        if (fits_y(y)) works += (works.empty() ? "" : ", ") + std::to_string(y);
      const bool kv = c.kv_heads() % gy != 0;
      return GridMisfit{kv ? "KV heads not divisible by Gy" : "MLP features not divisible by Gy",
                        concat(kv ? "KV heads " : "MLP features ", kv ? c.kv_heads() : c.mlp_hidden(),
                               " are not divisible by Gy=", gy,
                               kv ? "; K/V heads are split over Y together with their query heads"
                                  : "; the MLP's gate and up outputs are split over Y",
                               ": choose Gy from ", works, " (the divisors of the ", c.num_heads, " heads, ",
                               c.kv_heads(), " KV heads and ", c.mlp_hidden(), " MLP features)")};
    }
  }
  for (const LinearSpec& l : spec.linears) {
    // the local block is (out/g_out) x (in/g_in), stored as Gz equal flat pieces (spec §3.2)
    const long g_in = l.transposed ? gy : gx, g_out = l.transposed ? gx : gy;
    const long block = (l.out / g_out) * (l.in / g_in);
    if (block % gz != 0)
      return GridMisfit{"weight block not divisible by Gz",
                        concat("layer ", l.name, ": its weight block of ", l.out / g_out, "x", l.in / g_in, " = ",
                               block, " elements per (x, y) is not divisible by Gz=", gz,
                               "; choose a Gz that divides ", block)};
  }
  return std::nullopt;
}

void reserve_params(Arena& arena, const ModelSpec& spec) {
  for (const ParamSpec& p : spec.params) arena.reserve(p.name, p.shape);
}

std::string hf_name_of_layer(const std::string& pattern, int layer) {
  std::string s = pattern;
  const size_t at = s.find("{i}");
  if (at != std::string::npos) s.replace(at, 3, std::to_string(layer));
  return s;
}

}  // namespace axonn::model
