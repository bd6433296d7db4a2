#include "axonn/checkpoint/gguf.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numbers>
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
          int64_t from = r;
          if (half > 0) {  // file row h*d + 2i + s is our row h*d + s*d/2 + i
            const int64_t h = r / (2 * half), i = (r % (2 * half)) / 2, s = r % 2;
            from = h * 2 * half + s * half + i;
          }
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

}  // namespace axonn::checkpoint
