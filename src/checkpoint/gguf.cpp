#include "axonn/checkpoint/gguf.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <set>
#include <utility>
#include <vector>

#include "axonn/checkpoint/hf.hpp"
#include "axonn/core/error.hpp"
#include "axonn/model/spec.hpp"
#include "axonn/text/pretokenizer.hpp"
#include "hf_pieces.hpp"

namespace axonn::checkpoint {

namespace {

using detail::HfPiece;

constexpr uint32_t kGgufVersion = 3;
constexpr uint64_t kAlignment = 32;
// general.file_type (llama.cpp's llama_ftype): what most matrices are stored in
uint32_t file_type(GgufType t) {
  switch (t) {
    case GgufType::kF32: return 0;
    case GgufType::kF16: return 1;
    case GgufType::kQ8_0: return 7;
    case GgufType::kBF16: return 32;
  }
  return 0;
}

// GGUF's metadata value types
enum class Kv : uint32_t { kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9 };

// The header, metadata and tensor infos, little-endian, as they are built.
class Bytes {
 public:
  template <class T>
  void put(T v) {
    static_assert(std::endian::native == std::endian::little, "GGUF is little-endian");
    const size_t at = out_.size();
    out_.resize(at + sizeof v);
    std::memcpy(out_.data() + at, &v, sizeof v);
  }
  void str(std::string_view s) {
    put<uint64_t>(s.size());
    out_.append(s);
  }
  void key(std::string_view k, Kv type) {
    str(k);
    put(static_cast<uint32_t>(type));
    keys_++;
  }
  void u32(std::string_view k, uint32_t v) {
    key(k, Kv::kU32);
    put(v);
  }
  void f32(std::string_view k, float v) {
    key(k, Kv::kF32);
    put(v);
  }
  void boolean(std::string_view k, bool v) {
    key(k, Kv::kBool);
    put<uint8_t>(v ? 1 : 0);
  }
  void string(std::string_view k, std::string_view v) {
    key(k, Kv::kString);
    str(v);
  }
  void strings(std::string_view k, const std::vector<std::string>& v) {
    key(k, Kv::kArray);
    put(static_cast<uint32_t>(Kv::kString));
    put<uint64_t>(v.size());
    for (const auto& s : v) str(s);
  }
  template <class T>
  void array(std::string_view k, Kv type, const std::vector<T>& v) {
    key(k, Kv::kArray);
    put(static_cast<uint32_t>(type));
    put<uint64_t>(v.size());
    for (T x : v) put(x);
  }
  std::string& data() { return out_; }
  uint64_t keys() const { return keys_; }

 private:
  std::string out_;
  uint64_t keys_ = 0;
};

// A tensor of the file: an HF piece under llama.cpp's name, or rope_freqs.
struct GgufTensor {
  std::string name;
  HfPiece piece;                 // rows x cols (cols 0: 1-D) of the arena, unless `values` is set
  std::vector<float> values;     // a tensor computed here (rope_freqs)
  int permute_heads = 0;         // > 0: interleave each head's two rotary halves (Llama's Q and K)
  GgufType type = GgufType::kF32;
  uint64_t offset = 0, bytes = 0;
};

// llama.cpp's tensor name for an HF tensor name (model/spec.hpp's hf_names with the layer filled in).
std::string gguf_name(const std::string& hf) {
  static const std::pair<std::string_view, std::string_view> whole[] = {
      {"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},                {"wte.weight", "token_embd.weight"},
      {"wpe.weight", "position_embd.weight"},             {"ln_f.weight", "output_norm.weight"},
      {"ln_f.bias", "output_norm.bias"}};
  static const std::pair<std::string_view, std::string_view> in_layer[] = {
      {"input_layernorm.", "attn_norm."},   {"self_attn.q_proj.", "attn_q."},
      {"self_attn.k_proj.", "attn_k."},     {"self_attn.v_proj.", "attn_v."},
      {"self_attn.o_proj.", "attn_output."}, {"post_attention_layernorm.", "ffn_norm."},
      {"mlp.gate_proj.", "ffn_gate."},       {"mlp.up_proj.", "ffn_up."},
      {"mlp.down_proj.", "ffn_down."},       {"ln_1.", "attn_norm."},
      {"attn.c_attn.", "attn_qkv."},         {"attn.c_proj.", "attn_output."},
      {"ln_2.", "ffn_norm."},                {"mlp.c_fc.", "ffn_up."},
      {"mlp.c_proj.", "ffn_down."}};
  for (const auto& [from, to] : whole)
    if (hf == from) return std::string(to);
  for (std::string_view prefix : {"model.layers.", "h."}) {
    if (!hf.starts_with(prefix)) continue;
    const size_t dot = hf.find('.', prefix.size());
    const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
    const std::string rest = hf.substr(dot + 1);
    for (const auto& [from, to] : in_layer)
      if (rest.starts_with(from)) return "blk." + layer + "." + std::string(to) + rest.substr(from.size());
  }
  throw Error("no GGUF name for the tensor '" + hf + "'");  // every tensor of model_spec has one
}

// Llama's rotary layout in a GGUF file: each head's rows of Q and K interleaved, so that file row
// h*d + 2i + s of a head of d = 2*half rows is our row h*d + s*half + i.
int64_t rotary_row_of_file_row(int64_t r, int64_t half) {
  const int64_t h = r / (2 * half), i = (r % (2 * half)) / 2, s = r % 2;
  return h * 2 * half + s * half + i;
}

// Llama 3.1's rope scaling as llama.cpp's rope_freqs tensor: per rotary frequency, the factor its
// frequency is divided by (1 for short wavelengths, `factor` for long ones, a blend between).
std::vector<float> rope_freq_factors(const model::GptConfig& c) {
  const model::RopeScaling& s = c.rope_scaling;
  const int d = c.head_size();
  const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < d; i += 2) {
    const double freq = 1.0 / std::pow(c.rope_theta, static_cast<double>(i) / d);
    const double wavelen = 2 * std::numbers::pi / freq;
    double f = 1.0;
    if (wavelen > low_wavelen) {
      f = s.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      f = 1.0 / ((1 - smooth) / s.factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

// The tokenizer's keys. llama.cpp takes the vocabulary's size from the tokens, so a model with more ids than
// the tokenizer gets placeholder tokens for the rest (as llama.cpp's converter pads).
void put_tokenizer(Bytes& b, const text::Tokenizer& tok, const model::GptConfig& c) {
  const std::optional<text::TokenizerListing> listing = tok.listing();
  AXONN_CHECK_ARG(listing.has_value(), "the tokenizer ", tok.describe(), " cannot be written into a GGUF file (it ",
                  "only decodes); give --tokenizer the model's tokenizer.json, GPT-2 files or tokenizer.model");
  text::TokenizerListing l = *listing;
  check_tokenizer_fits(tok, c);
  const int n = static_cast<int>(l.tokens.size());
  for (int id = 0; id < c.vocab_size; id++) {
    if (id >= n) {
      l.tokens.emplace_back();
      l.types.push_back(text::TokenizerListing::kUnused);
      if (l.kind == text::TokenizerListing::Kind::kSentencePiece) l.scores.push_back(-1e4f);
    }
    if (l.tokens[static_cast<size_t>(id)].empty()) l.tokens[static_cast<size_t>(id)] = "[PAD" + std::to_string(id) + "]";
  }
  if (l.kind == text::TokenizerListing::Kind::kByteBpe) {
    AXONN_CHECK_ARG(!l.add_prefix_space, "the tokenizer ", tok.describe(), " adds a space before the text, which ",
                    "llama.cpp's byte-level BPE does not: it cannot be written into a GGUF file");
    // llama.cpp names its pre-tokenizers: GPT-2's regex, or Llama 3's
    std::string pre;
    if (l.patterns.size() == 1 && l.patterns[0] == text::kGpt2Pattern) pre = "gpt-2";
    else if (l.patterns.size() == 1 && l.patterns[0] == text::kLlama3Pattern) pre = "llama-bpe";
    AXONN_CHECK_ARG(!pre.empty(), "the tokenizer ", tok.describe(), " splits text with a pre-tokenizer that ",
                    "llama.cpp does not name (GGUF files name GPT-2's or Llama 3's): it cannot be written into a GGUF "
                    "file");
    b.string("tokenizer.ggml.model", "gpt2");
    b.string("tokenizer.ggml.pre", pre);
    b.strings("tokenizer.ggml.tokens", l.tokens);
    b.array<int32_t>("tokenizer.ggml.token_type", Kv::kI32, {l.types.begin(), l.types.end()});
    b.strings("tokenizer.ggml.merges", l.merges);
  } else {
    b.string("tokenizer.ggml.model", "llama");
    b.string("tokenizer.ggml.pre", "default");
    b.strings("tokenizer.ggml.tokens", l.tokens);
    b.array<float>("tokenizer.ggml.scores", Kv::kF32, l.scores);
    b.array<int32_t>("tokenizer.ggml.token_type", Kv::kI32, {l.types.begin(), l.types.end()});
    b.boolean("tokenizer.ggml.add_space_prefix", l.dummy_prefix);
  }
  // the special ids: the tokenizer's, else the model's config
  const int bos = tok.bos_id() >= 0 ? tok.bos_id() : c.bos_token_id;
  const int eos = tok.eos_id() >= 0 ? tok.eos_id() : tok.eot_id() >= 0 ? tok.eot_id()
                                                    : c.eos_token_ids.empty() ? -1 : c.eos_token_ids[0];
  if (bos >= 0) b.u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
  if (eos >= 0) b.u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  if (tok.eot_id() >= 0 && tok.eot_id() != eos) b.u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(tok.eot_id()));
  // our encode adds no BOS; the same prompt text gives the same ids in llama.cpp
  b.boolean("tokenizer.ggml.add_bos_token", false);
  b.boolean("tokenizer.ggml.add_eos_token", false);
}

// The architecture's keys.
void put_model(Bytes& b, const model::GptConfig& c) {
  const bool llama = c.family == model::Family::kLlama;
  const std::string a = llama ? "llama" : "gpt2";
  b.string("general.architecture", a);
  b.u32(a + ".vocab_size", static_cast<uint32_t>(c.vocab_size));
  b.u32(a + ".context_length", static_cast<uint32_t>(c.max_seq_len));
  b.u32(a + ".embedding_length", static_cast<uint32_t>(c.channels));
  b.u32(a + ".block_count", static_cast<uint32_t>(c.num_layers));
  b.u32(a + ".feed_forward_length", static_cast<uint32_t>(c.mlp_hidden()));
  b.u32(a + ".attention.head_count", static_cast<uint32_t>(c.num_heads));
  if (!llama) {
    b.f32(a + ".attention.layer_norm_epsilon", 1e-5f);
    return;
  }
  b.u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.kv_heads()));
  if (c.head_size() * c.num_heads != c.channels) {
    b.u32(a + ".attention.key_length", static_cast<uint32_t>(c.head_size()));
    b.u32(a + ".attention.value_length", static_cast<uint32_t>(c.head_size()));
  }
  b.f32(a + ".attention.layer_norm_rms_epsilon", c.norm_eps);
  b.f32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
  b.u32(a + ".rope.dimension_count", static_cast<uint32_t>(c.head_size()));
}

uint64_t type_bytes(GgufType t, uint64_t numel) {
  switch (t) {
    case GgufType::kF32: return 4 * numel;
    case GgufType::kF16:
    case GgufType::kBF16: return 2 * numel;
    case GgufType::kQ8_0: return numel / 32 * 34;
  }
  return 0;
}

// One row of a tensor in its file type.
void encode_row(const float* x, int64_t n, GgufType t, std::string& out) {
  const size_t at = out.size();
  out.resize(at + type_bytes(t, static_cast<uint64_t>(n)));
  char* p = out.data() + at;
  switch (t) {
    case GgufType::kF32: std::memcpy(p, x, 4 * static_cast<size_t>(n)); break;
    case GgufType::kF16:
    case GgufType::kBF16:
      for (int64_t i = 0; i < n; i++) {
        const uint16_t h = t == GgufType::kF16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case GgufType::kQ8_0:  // ggml's block_q8_0: the scale d = max|x| / 127 as f16, then round(x / d)
      for (int64_t b0 = 0; b0 < n; b0 += 32, p += 34) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(x[b0 + i]));
        const float d = amax / 127.0f, inv = d != 0 ? 1.0f / d : 0.0f;
        const uint16_t dh = f32_to_f16(d);
        std::memcpy(p, &dh, 2);
        for (int i = 0; i < 32; i++) p[2 + i] = static_cast<char>(static_cast<int8_t>(std::lround(x[b0 + i] * inv)));
      }
      break;
  }
}

}  // namespace

GgufType parse_gguf_type(std::string_view name) {
  if (name == "f32" || name == "fp32") return GgufType::kF32;
  if (name == "f16" || name == "fp16") return GgufType::kF16;
  if (name == "bf16") return GgufType::kBF16;
  if (name == "q8_0") return GgufType::kQ8_0;
  throw InvalidArgument("GGUF tensors are f32, f16, bf16 or q8_0, not '" + std::string(name) + "'");
}

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kF32: return "f32";
    case GgufType::kF16: return "f16";
    case GgufType::kBF16: return "bf16";
    case GgufType::kQ8_0: return "q8_0";
  }
  return "?";
}

uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));  // inf, nan
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds above 65504: infinity
  if (abs < 0x38800000u) {  // below 2^-14: a subnormal half (or zero), in units of 2^-24
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // exact: a power of two
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));  // ties to even
  }
  // normal: drop 13 mantissa bits, rounding to nearest even (a carry into the exponent is right)
  const uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

FileDigest save_gguf(const std::string& path, const model::GptConfig& c, const Arena& params, GgufType type,
                     const text::Tokenizer& tokenizer, const std::string& name, Progress* progress) {
  const model::ModelSpec spec = model::model_spec(c);
  const bool llama = c.family == model::Family::kLlama;
  std::vector<GgufTensor> tensors;
  for (const HfPiece& p : detail::hf_pieces(spec)) {
    GgufTensor t;
    t.name = gguf_name(p.name);
    t.piece = p;
    t.piece.transposed = false;  // GPT-2's Conv1D layout is HF's alone: ggml takes [out, in] as we keep it
    if (llama && t.name.ends_with(".attn_q.weight")) t.permute_heads = c.num_heads;
    if (llama && t.name.ends_with(".attn_k.weight")) t.permute_heads = c.kv_heads();
    if (p.cols > 0 && type != GgufType::kF32)  // matrices in the chosen type; Q8_0 needs rows of 32s
      t.type = type == GgufType::kQ8_0 && p.cols % 32 != 0 ? GgufType::kF16 : type;
    tensors.push_back(std::move(t));
  }
  if (llama && c.rope_scaling.enabled()) {
    GgufTensor t;
    t.name = "rope_freqs.weight";
    t.values = rope_freq_factors(c);
    tensors.push_back(std::move(t));
  }

  Bytes b;
  put_model(b, c);
  b.string("general.name", name);
  b.u32("general.file_type", file_type(type));
  b.u32("general.alignment", static_cast<uint32_t>(kAlignment));
  put_tokenizer(b, tokenizer, c);

  Bytes infos;
  uint64_t offset = 0;
  for (GgufTensor& t : tensors) {
    const int64_t rows = t.values.empty() ? t.piece.rows : static_cast<int64_t>(t.values.size());
    const int64_t cols = t.values.empty() ? t.piece.cols : 0;
    infos.str(t.name);
    infos.put<uint32_t>(cols > 0 ? 2 : 1);
    if (cols > 0) infos.put<uint64_t>(static_cast<uint64_t>(cols));  // ggml's ne[0]: the fastest dimension
    infos.put<uint64_t>(static_cast<uint64_t>(rows));
    infos.put(static_cast<uint32_t>(t.type));
    infos.put<uint64_t>(offset);
    t.offset = offset;
    t.bytes = type_bytes(t.type, static_cast<uint64_t>(rows * std::max<int64_t>(cols, 1)));
    offset = (offset + t.bytes + kAlignment - 1) / kAlignment * kAlignment;
  }

  AtomicFile f(path);
  std::string head = "GGUF";
  head.resize(24);
  const uint64_t counts[2] = {tensors.size(), b.keys()};
  std::memcpy(head.data() + 4, &kGgufVersion, 4);
  std::memcpy(head.data() + 8, counts, 16);
  head += b.data();
  head += infos.data();
  head.resize((head.size() + kAlignment - 1) / kAlignment * kAlignment, '\0');
  f.write(head.data(), head.size());

  std::string out;
  std::vector<float> row;
  for (const GgufTensor& t : tensors) {
    out.clear();
    if (!t.values.empty()) {
      encode_row(t.values.data(), static_cast<int64_t>(t.values.size()), t.type, out);
    } else {
      const HfPiece& p = t.piece;
      const float* src = detail::piece_source(params, spec, p);
      const int64_t cols = std::max<int64_t>(p.cols, 1);
      if (p.cols == 0) {
        encode_row(src, p.rows, t.type, out);
      } else {
        const int64_t half = t.permute_heads > 0 ? p.rows / t.permute_heads / 2 : 0;
        for (int64_t r = 0; r < p.rows; r++) {
          const int64_t from = half > 0 ? rotary_row_of_file_row(r, half) : r;
          encode_row(src + from * cols, cols, t.type, out);
        }
      }
    }
    out.resize((out.size() + kAlignment - 1) / kAlignment * kAlignment, '\0');
    f.write(out.data(), out.size());
    if (progress) progress->add(static_cast<int64_t>(t.bytes));
  }
  return f.commit();
}

// --- reading a model ---------------------------------------------------------------------------------

namespace {

std::string where_of(const GgufFile& f) { return "GGUF file '" + f.path() + "'"; }

const std::string* string_value(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  return v ? std::get_if<std::string>(&v->scalar) : nullptr;
}

// The architecture's keys, read into our configuration.
model::GptConfig gguf_config(const GgufFile& f) {
  const std::string where = where_of(f);
  const std::string* arch_value = string_value(f, "general.architecture");
  AXONN_CHECK_IO(arch_value, where, " has no general.architecture string");
  const std::string arch = *arch_value;
  AXONN_CHECK_IO(arch == "llama" || arch == "gpt2", where, " holds a '", arch, "' model; axonn reads the llama and ",
                 "gpt2 architectures");
  auto count = [&](const std::string& key, std::optional<int64_t> fallback = std::nullopt) -> int {
    const GgufValue* v = f.find(arch + "." + key);
    if (!v) {
      AXONN_CHECK_IO(fallback.has_value(), where, " has no ", arch, ".", key);
      return static_cast<int>(*fallback);
    }
    const std::optional<int64_t> i = v->integer();
    AXONN_CHECK_IO(i && *i >= 0 && *i <= std::numeric_limits<int>::max(), where, ": ", arch, ".", key, " is ",
                   v->str(), ", not a count");
    return static_cast<int>(*i);
  };
  auto number = [&](const std::string& key, std::optional<double> fallback = std::nullopt) -> double {
    const GgufValue* v = f.find(arch + "." + key);
    if (!v) {
      AXONN_CHECK_IO(fallback.has_value(), where, " has no ", arch, ".", key);
      return *fallback;
    }
    const std::optional<double> x = v->number();
    AXONN_CHECK_IO(x && std::isfinite(*x), where, ": ", arch, ".", key, " is ", v->str(), ", not a number");
    return *x;
  };
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  AXONN_CHECK_IO(embd && embd->ne.size() == 2, where, " has no 2-D tensor token_embd.weight");
  model::GptConfig c;
  c.family = arch == "llama" ? model::Family::kLlama : model::Family::kGpt2;
  c.channels = count("embedding_length");
  AXONN_CHECK_IO(embd->ne[0] == static_cast<uint64_t>(c.channels), where, ": token_embd.weight is ",
                 embd->shape_str(), " but ", arch, ".embedding_length is ", c.channels);
  AXONN_CHECK_IO(embd->ne[1] <= static_cast<uint64_t>(std::numeric_limits<int>::max() / 2), where,
                 ": token_embd.weight has ", embd->ne[1], " rows");
  c.vocab_size = static_cast<int>(embd->ne[1]);
  AXONN_CHECK_IO(count("vocab_size", c.vocab_size) == c.vocab_size, where, ": ", arch, ".vocab_size says ",
                 count("vocab_size"), " but token_embd.weight has ", c.vocab_size, " rows");
  c.padded_vocab_size = model::pad_vocab(c.vocab_size);
  c.max_seq_len = count("context_length");
  c.num_layers = count("block_count");
  c.num_heads = count("attention.head_count");
  const bool untied = f.find_tensor("output.weight") != nullptr;
  if (c.family == model::Family::kGpt2) {
    AXONN_CHECK_IO(count("feed_forward_length", 4 * int64_t{c.channels}) == 4 * c.channels, where,
                   ": gpt2.feed_forward_length is ", count("feed_forward_length"), "; a GPT-2's MLP is 4 x ",
                   c.channels);
    const double eps = number("attention.layer_norm_epsilon", 1e-5);
    AXONN_CHECK_IO(std::fabs(eps - 1e-5) <= 1e-9, where, ": gpt2.attention.layer_norm_epsilon is ", eps,
                   "; axonn's GPT-2 has GPT-2's 1e-5");
    if (untied) {  // llama.cpp's converter writes GPT-2's tied head as a copy of the embedding
      const GgufTensorInfo* head = f.find_tensor("output.weight");
      bool same = head->ne == embd->ne && head->type == embd->type;
      const uint64_t n = embd->elements(), block = uint64_t{1} << 20;  // whole blocks of every type read
      for (uint64_t first = 0; same && first < n; first += block)
        same = f.read_floats(*head, first, std::min(block, n - first)) ==
               f.read_floats(*embd, first, std::min(block, n - first));
      AXONN_CHECK_IO(same, where, " has a GPT-2 whose LM head (output.weight) differs from its token embedding; ",
                     "axonn's GPT-2 ties the two");
    }
  } else {
    c.num_kv_heads = count("attention.head_count_kv", c.num_heads);
    AXONN_CHECK_IO(c.num_heads > 0, where, ": llama.attention.head_count is 0");
    const int key_length = count("attention.key_length", c.channels / c.num_heads);
    AXONN_CHECK_IO(count("attention.value_length", key_length) == key_length, where,
                   ": llama.attention.value_length differs from key_length; axonn's heads have one width");
    c.head_dim = key_length * c.num_heads == c.channels ? 0 : key_length;
    c.ffn_hidden = count("feed_forward_length");
    const double eps = number("attention.layer_norm_rms_epsilon");
    AXONN_CHECK_IO(eps > 0 && eps < 1, where, ": llama.attention.layer_norm_rms_epsilon is ", eps,
                   ", not a small positive number");
    c.norm_eps = static_cast<float>(eps);
    c.rope_theta = number("rope.freq_base", 10000.0);
    AXONN_CHECK_IO(count("rope.dimension_count", c.head_size()) == c.head_size(), where,
                   ": llama.rope.dimension_count is ", count("rope.dimension_count"), "; axonn rotates whole heads (",
                   c.head_size(), ")");
    c.tied_embeddings = !untied;
    if (const std::string* type = string_value(f, "llama.rope.scaling.type"))
      AXONN_CHECK_IO(*type == "none", where, ": llama.rope.scaling.type is '", *type, "'; axonn's Llama has Llama ",
                     "3.1's rope scaling only (GGUF's rope_freqs.weight)");
    if (const GgufTensorInfo* freqs = f.find_tensor("rope_freqs.weight")) {
      // llama.cpp's converter writes Llama 3.1's scaling as the divisor of each frequency; the largest is the
      // factor, and the rest must be what Llama 3.1's other settings give
      const std::vector<float> got = f.read_floats(*freqs);
      AXONN_CHECK_IO(got.size() == static_cast<size_t>(c.head_size() / 2), where, ": rope_freqs.weight has ",
                     got.size(), " values for heads of ", c.head_size());
      c.rope_scaling.factor = *std::max_element(got.begin(), got.end());
      if (c.rope_scaling.factor == 1.0) c.rope_scaling = {};
      const std::vector<float> want = c.rope_scaling.enabled() ? rope_freq_factors(c) : got;
      for (size_t i = 0; i < got.size(); i++)
        AXONN_CHECK_IO(std::fabs(got[i] - want[i]) <= 1e-6f * std::fabs(want[i]), where, ": rope_freqs.weight[", i,
                       "] is ", got[i], ", not ", want[i], " as Llama 3.1's rope scaling (factor ",
                       c.rope_scaling.factor, ", low and high frequency factors 1 and 4, original context 8192) gives; "
                       "axonn's Llama has that scaling only");
    }
    const GgufValue* bos = f.find("tokenizer.ggml.bos_token_id");
    const GgufValue* eos = f.find("tokenizer.ggml.eos_token_id");
    if (bos && bos->integer()) c.bos_token_id = static_cast<int>(*bos->integer());
    if (eos && eos->integer()) c.eos_token_ids = {static_cast<int>(*eos->integer())};
  }
  try {
    c.validate();
  } catch (const InvalidArgument& e) {
    throw IoError(where + " describes a model axonn cannot make: " + e.what());
  }
  return c;
}

}  // namespace

GgufModel::GgufModel(const std::string& path) : file_(path), config_(gguf_config(file_)) {
  for (const GgufTensorInfo& t : file_.tensors())
    AXONN_CHECK_IO(t.type == 0 || t.type == 1 || t.type == 8 || t.type == 30, where_of(file_), ": tensor '", t.name,
                   "' is ", ggml_type_name(t.type), "; axonn reads weights stored as F32, F16, BF16 or Q8_0 (it trains ",
                   "and generates in fp32 or bf16): give the model's Hugging Face directory, or a GGUF file ",
                   "converted at f16 or bf16 (llama.cpp's convert_hf_to_gguf.py --outtype f16)");
}

std::string GgufModel::kind() const {
  const GgufTensorInfo* embd = file_.find_tensor("token_embd.weight");
  return "GGUF " + std::string(config_.family == model::Family::kLlama ? "llama" : "gpt2") + " (" +
         ggml_type_name(embd->type) + ")";
}

void GgufModel::load_ranges(const TensorRangeSink& sink, Progress* progress) const {
  const model::ModelSpec spec = model::model_spec(config_);
  const std::string where = where_of(file_);
  const bool llama = config_.family == model::Family::kLlama;
  std::set<std::string> used = {"rope_freqs.weight"};  // read with the configuration
  if (!llama) used.insert("output.weight");           // GPT-2's tied head, checked equal to token_embd
  constexpr int64_t kBlock = int64_t{1} << 20;  // values
  std::vector<float> ours;
  for (const HfPiece& p : detail::hf_pieces(spec)) {
    const std::string name = gguf_name(p.name);
    const GgufTensorInfo* t = file_.find_tensor(name);
    AXONN_CHECK_IO(t, where, " has no tensor '", name, "' (the model is ", config_.str(), ")");
    const std::vector<uint64_t> want = p.cols > 0 ? std::vector<uint64_t>{static_cast<uint64_t>(p.cols),
                                                                           static_cast<uint64_t>(p.rows)}
                                                  : std::vector<uint64_t>{static_cast<uint64_t>(p.rows)};
    AXONN_CHECK_IO(t->ne == want, where, ": tensor '", name, "' is ", t->shape_str(), ", expected ",
                   GgufTensorInfo{"", want, 0, 0, 0}.shape_str(), " for ", config_.str());
    used.insert(name);
    const int heads = !llama ? 0 : name.ends_with(".attn_q.weight") ? config_.num_heads
                                 : name.ends_with(".attn_k.weight") ? config_.kv_heads() : 0;
    // by blocks of about kBlock values (whole heads where the rotary rows move), so that no rank holds a
    // whole embedding beside its shards
    const int64_t cols = std::max<int64_t>(p.cols, 1), unit = heads > 0 ? p.rows / heads : 1;
    const int64_t rows_per_read = p.cols == 0 ? p.rows : std::max<int64_t>(1, kBlock / (cols * unit)) * unit;
    for (int64_t r0 = 0; r0 < p.rows; r0 += rows_per_read) {
      const int64_t rows = std::min(rows_per_read, p.rows - r0);
      std::vector<float> values =
          file_.read_floats(*t, static_cast<uint64_t>(r0 * cols), static_cast<uint64_t>(rows * cols));
      if (heads > 0) {  // back to HF's rotary order (the block starts at a head)
        ours.resize(values.size());
        for (int64_t r = 0; r < rows; r++)
          std::copy_n(values.begin() + r * cols, cols, ours.begin() + rotary_row_of_file_row(r, unit / 2) * cols);
        values.swap(ours);
      }
      sink(p.t, p.layer, (p.row0 + r0) * cols, rows * cols, values.data());
    }
    if (progress) progress->add(p.numel() * static_cast<int64_t>(sizeof(float)));
  }
  detail::sink_vocab_padding(config_, spec, sink);
  for (const GgufTensorInfo& t : file_.tensors())
    AXONN_CHECK_IO(used.count(t.name), where, " has a tensor axonn's model does not know: '", t.name, "' ",
                   ggml_type_name(t.type), " ", t.shape_str());
}

void GgufModel::load(Arena& params, Progress* progress) const {
  load_ranges(detail::arena_sink(params, model::model_spec(config_)), progress);
}

std::optional<text::TokenizerListing> GgufModel::tokenizer_listing() const {
  using Listing = text::TokenizerListing;
  const std::string* kind = string_value(file_, "tokenizer.ggml.model");
  if (!kind) return std::nullopt;
  const std::string where = where_of(file_);
  auto strings = [&](const std::string& key) -> const std::vector<std::string>& {
    const GgufValue* v = file_.find(key);
    AXONN_CHECK_IO(v && v->item_type == 8 && v->strings.size() == v->items, where, " has no ", key,
                   " (an array of strings)");
    return v->strings;
  };
  auto numbers = [&](const std::string& key, size_t n, double fallback) {
    const GgufValue* v = file_.find(key);
    if (!v) return std::vector<double>(n, fallback);
    AXONN_CHECK_IO(v->numbers.size() == n && v->items == n, where, ": ", key, " has ", v->items, " numbers for ", n,
                   " tokens");
    return v->numbers;
  };
  auto flag = [&](const std::string& key, bool fallback) {
    const GgufValue* v = file_.find(key);
    const bool* b = v ? std::get_if<bool>(&v->scalar) : nullptr;
    return b ? *b : fallback;
  };
  Listing l;
  l.tokens = strings("tokenizer.ggml.tokens");
  const size_t n = l.tokens.size();
  for (double t : numbers("tokenizer.ggml.token_type", n, Listing::kNormal))  // a type no one has: -1
    l.types.push_back(t >= 0 && t <= 255 ? static_cast<int>(t) : -1);
  if (*kind == "gpt2") {
    l.kind = Listing::Kind::kByteBpe;
    l.merges = strings("tokenizer.ggml.merges");
    const std::string* pre = string_value(file_, "tokenizer.ggml.pre");
    const std::string pre_name = pre ? *pre : "default";
    // llama.cpp's names for the two pre-tokenizers axonn has (text/pretokenizer.hpp)
    if (pre_name == "gpt-2") {
      l.patterns = {std::string(text::kGpt2Pattern)};
    } else if (pre_name == "llama-bpe") {
      l.patterns = {std::string(text::kLlama3Pattern)};
      l.ignore_merges = true;  // as llama.cpp and Llama 3's tokenizer.json do
    } else {
      throw IoError(where + ": its tokenizer splits text with llama.cpp's pre-tokenizer '" + pre_name +
                    "', which axonn does not have (it has gpt-2 and llama-bpe): give --tokenizer the model's own "
                    "tokenizer.json");
    }
  } else if (*kind == "llama") {
    l.kind = Listing::Kind::kSentencePiece;
    for (double s : numbers("tokenizer.ggml.scores", n, 0.0))  // f32 in files; a wider value is clamped
      l.scores.push_back(std::isnan(s) ? 0.0f : static_cast<float>(std::clamp(s, -3.4e38, 3.4e38)));
    l.dummy_prefix = flag("tokenizer.ggml.add_space_prefix", true);  // llama.cpp's default for this vocabulary
  } else {
    throw IoError(where + " holds a '" + *kind + "' tokenizer; axonn reads llama.cpp's gpt2 (byte-level BPE) and " +
                  "llama (SentencePiece) vocabularies: give --tokenizer the model's own tokenizer files");
  }
  auto id_of = [&](const std::string& key) {
    const GgufValue* v = file_.find(key);
    const std::optional<int64_t> id = v ? v->integer() : std::nullopt;
    return id && *id >= 0 && *id < static_cast<int64_t>(n) ? static_cast<int>(*id) : -1;
  };
  l.bos = id_of("tokenizer.ggml.bos_token_id");
  l.eos = id_of("tokenizer.ggml.eos_token_id");
  l.eot = id_of("tokenizer.ggml.eot_token_id");
  if (l.eot < 0) l.eot = l.eos;
  // the placeholders a writer padded the vocabulary to the model's with (save_gguf, llama.cpp's converter)
  while (!l.tokens.empty() && l.types.back() == Listing::kUnused &&
         l.tokens.back() == "[PAD" + std::to_string(l.tokens.size() - 1) + "]") {
    l.tokens.pop_back();
    l.types.pop_back();
    if (!l.scores.empty()) l.scores.pop_back();
  }
  return l;
}

std::unique_ptr<text::Tokenizer> GgufModel::tokenizer() const {
  const std::optional<text::TokenizerListing> l = tokenizer_listing();
  if (!l) return nullptr;
  return text::tokenizer_from_listing(
      *l, std::string(l->kind == text::TokenizerListing::Kind::kByteBpe ? "byte-level BPE" : "SentencePiece") +
              " of the GGUF file " + file_.path());
}

}  // namespace axonn::checkpoint
