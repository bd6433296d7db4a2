// GGUF files (checkpoint/gguf.hpp) read back by a reader written here from ggml's docs/gguf.md: the header,
// the metadata and tokenizer keys, tensor names, shapes, types and aligned offsets, Llama's Q and K rows in
// llama.cpp's rotary order (V's untouched), the dtypes' bytes, f16 rounding, and refusals. llama.cpp itself
// reads the files in tests/peer/llamacpp. Then the library's own reader (checkpoint::GgufFile) against that reader,
// the types' definitions and crafted, damaged files.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <variant>

#include "axonn/checkpoint/gguf.hpp"
#include "axonn/core/error.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/text/bpe.hpp"
#include "axonn/text/pretokenizer.hpp"
#include "axonn/text/sentencepiece.hpp"

using namespace axonn;
namespace ck = axonn::checkpoint;

namespace {

// The file as the spec lays it out; metadata values as u64, f64, string or a count of array items.
struct GgufFile {
  uint32_t version = 0;
  std::map<std::string, std::variant<uint64_t, double, std::string>> kv;
  std::map<std::string, std::vector<std::string>> string_arrays;
  struct Info {
    std::vector<uint64_t> ne;
    uint32_t type = 0;
    uint64_t offset = 0;
  };
  std::map<std::string, Info> tensors;
  std::vector<std::string> order;
  uint64_t data_start = 0;
  std::string bytes;

  template <class T>
  T get(size_t& at) const {
    T v;
    EXPECT_LE(at + sizeof v, bytes.size());
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string str(size_t& at) const {
    const auto n = get<uint64_t>(at);
    std::string s = bytes.substr(at, n);
    at += n;
    return s;
  }
  // A scalar of GGUF type t; arrays skipped (strings kept).
  std::variant<uint64_t, double, std::string> value(uint32_t t, size_t& at, const std::string& key) {
    switch (t) {
      case 4: return static_cast<uint64_t>(get<uint32_t>(at));
      case 5: return static_cast<uint64_t>(get<int32_t>(at));
      case 6: return static_cast<double>(get<float>(at));
      case 7: return static_cast<uint64_t>(get<uint8_t>(at));
      case 8: return str(at);
      case 9: {
        const auto et = get<uint32_t>(at);
        const auto n = get<uint64_t>(at);
        for (uint64_t i = 0; i < n; i++) {
          auto v = value(et, at, key);
          if (et == 8) string_arrays[key].push_back(std::get<std::string>(v));
        }
        return n;
      }
      default: ADD_FAILURE() << "unexpected GGUF type " << t << " of " << key; return uint64_t{0};
    }
  }
  explicit GgufFile(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
    EXPECT_EQ(bytes.substr(0, 4), "GGUF");
    size_t at = 4;
    version = get<uint32_t>(at);
    const auto n_tensors = get<uint64_t>(at), n_kv = get<uint64_t>(at);
    for (uint64_t i = 0; i < n_kv; i++) {
      std::string key = str(at);
      const auto t = get<uint32_t>(at);
      kv[key] = value(t, at, key);
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
      std::string name = str(at);
      Info info;
      const auto dims = get<uint32_t>(at);
      for (uint32_t d = 0; d < dims; d++) info.ne.push_back(get<uint64_t>(at));
      info.type = get<uint32_t>(at);
      info.offset = get<uint64_t>(at);
      order.push_back(name);
      tensors[name] = info;
    }
    data_start = (at + 31) / 32 * 32;
  }
  uint64_t u(const std::string& k) const { return std::get<uint64_t>(kv.at(k)); }
  double d(const std::string& k) const { return std::get<double>(kv.at(k)); }
  std::string s(const std::string& k) const { return std::get<std::string>(kv.at(k)); }
  const float* f32(const std::string& name) const {
    return reinterpret_cast<const float*>(bytes.data() + data_start + tensors.at(name).offset);
  }
};

// A byte-level BPE of the 256 bytes, one merge ("a" + "b" = 257) and <|endoftext|> = 256.
std::unique_ptr<text::BpeTokenizer> byte_tokenizer(int extra_tokens = 0,
                                                   std::string_view pattern = text::kGpt2Pattern) {
  text::BpeSpec spec;
  spec.describe = "test BPE";
  for (int b = 0; b < 256; b++) spec.vocab.emplace_back(std::string(1, static_cast<char>(b)), b);
  spec.vocab.emplace_back("ab", 257);
  spec.merges.emplace_back("a", "b");
  for (int i = 0; i < extra_tokens; i++) spec.vocab.emplace_back("tok" + std::to_string(i), 258 + i);
  spec.specials.emplace_back("<|endoftext|>", 256);
  spec.patterns.emplace_back(pattern);
  spec.eot = 256;
  return std::make_unique<text::BpeTokenizer>(std::move(spec));
}

model::GptConfig llama_config() {
  model::GptConfig c = model::gpt_preset("llama-tiny");
  c.vocab_size = 300;
  c.padded_vocab_size = 384;
  return c;
}

struct Weights {
  model::GptConfig config;
  Arena params{"parameters"};
  explicit Weights(const model::GptConfig& c) : config(c) {
    model::reserve_params(params, model::model_spec(c));
    params.allocate();
    // every element its own value: element k of tensor t is t + k * 1e-4 (distinct within a row and column)
    for (size_t t = 0; t < params.size(); t++) {
      Tensor x = params.tensor(t);
      for (int64_t k = 0; k < x.numel(); k++) x.f32()[k] = static_cast<float>(t) + static_cast<float>(k) * 1e-4f;
    }
  }
};

class Gguf : public ::testing::Test {
 protected:
  std::string dir = (std::filesystem::temp_directory_path() / ("axonn_gguf_" + std::to_string(::getpid()))).string();
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
};

}  // namespace

TEST(GgufF16, RoundsToNearestEven) {
  EXPECT_EQ(ck::f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(ck::f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(ck::f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(ck::f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(ck::f32_to_f16(65504.0f), 0x7BFF);                 // the largest half
  EXPECT_EQ(ck::f32_to_f16(65519.99f), 0x7BFF);                // rounds down to it
  EXPECT_EQ(ck::f32_to_f16(65520.0f), 0x7C00);                 // the tie rounds to even: infinity
  EXPECT_EQ(ck::f32_to_f16(1.0f + 1.0f / 2048), 0x3C00);       // a tie: to the even mantissa
  EXPECT_EQ(ck::f32_to_f16(1.0f + 3.0f / 2048), 0x3C02);       // a tie: to the even mantissa (up)
  EXPECT_EQ(ck::f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);    // the smallest normal
  EXPECT_EQ(ck::f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);    // the smallest subnormal
  EXPECT_EQ(ck::f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);    // a tie between 0 and it: 0
  EXPECT_EQ(ck::f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);    // a tie between 1 and 2: 2
  EXPECT_EQ(ck::f32_to_f16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(ck::f32_to_f16(std::nanf("")) & 0x7C00, 0x7C00);
  EXPECT_NE(ck::f32_to_f16(std::nanf("")) & 0x03FF, 0);
  // every half that is a float's value converts back to itself
  for (uint32_t h = 0; h < 0x7C00; h++) {
    const int e = static_cast<int>(h >> 10), m = static_cast<int>(h & 0x3FF);
    const float v = e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(1.0f + m / 1024.0f, e - 15);
    ASSERT_EQ(ck::f32_to_f16(v), h) << v;
    ASSERT_EQ(ck::f32_to_f16(-v), h | 0x8000) << -v;
  }
}

TEST_F(Gguf, LlamaMetadataTokenizerAndTensors) {
  Weights w(llama_config());
  const model::GptConfig& c = w.config;
  const auto tok = byte_tokenizer();
  const std::string path = dir + "/m.gguf";
  ck::save_gguf(path, c, w.params, ck::GgufType::kF32, *tok, "tiny");
  GgufFile g(path);
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.s("general.architecture"), "llama");
  EXPECT_EQ(g.s("general.name"), "tiny");
  EXPECT_EQ(g.u("general.alignment"), 32u);
  EXPECT_EQ(g.u("llama.context_length"), 64u);
  EXPECT_EQ(g.u("llama.embedding_length"), 64u);
  EXPECT_EQ(g.u("llama.block_count"), 2u);
  EXPECT_EQ(g.u("llama.feed_forward_length"), 176u);
  EXPECT_EQ(g.u("llama.attention.head_count"), 4u);
  EXPECT_EQ(g.u("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(g.u("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(g.u("llama.vocab_size"), 300u);
  EXPECT_FLOAT_EQ(static_cast<float>(g.d("llama.attention.layer_norm_rms_epsilon")), c.norm_eps);
  EXPECT_DOUBLE_EQ(g.d("llama.rope.freq_base"), 10000.0);
  // the tokenizer: GPT-2's byte characters, the special token's text, placeholders up to the model's 300
  EXPECT_EQ(g.s("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.s("tokenizer.ggml.pre"), "gpt-2");
  const auto& tokens = g.string_arrays.at("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 300u);
  EXPECT_EQ(tokens[32], "\xC4\xA0");  // the space: 'Ġ'
  EXPECT_EQ(tokens[97], "a");
  EXPECT_EQ(tokens[256], "<|endoftext|>");
  EXPECT_EQ(tokens[257], "ab");
  EXPECT_EQ(tokens[299], "[PAD299]");
  EXPECT_EQ(g.string_arrays.at("tokenizer.ggml.merges"), std::vector<std::string>{"a b"});
  EXPECT_EQ(g.u("tokenizer.ggml.eos_token_id"), 256u);

  // tensors: llama.cpp's names, ne fastest first, V rows of the vocabulary, offsets aligned in order
  EXPECT_EQ(g.order.front(), "token_embd.weight");
  EXPECT_EQ(g.tensors.at("token_embd.weight").ne, (std::vector<uint64_t>{64, 300}));
  EXPECT_EQ(g.tensors.at("output.weight").ne, (std::vector<uint64_t>{64, 300}));
  EXPECT_EQ(g.tensors.at("blk.1.attn_q.weight").ne, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(g.tensors.at("blk.1.attn_k.weight").ne, (std::vector<uint64_t>{64, 32}));
  EXPECT_EQ(g.tensors.at("blk.0.ffn_gate.weight").ne, (std::vector<uint64_t>{64, 176}));
  EXPECT_EQ(g.tensors.at("blk.0.ffn_down.weight").ne, (std::vector<uint64_t>{176, 64}));
  EXPECT_EQ(g.tensors.at("output_norm.weight").ne, (std::vector<uint64_t>{64}));
  EXPECT_EQ(g.tensors.size(), 3u + 2 * 9);  // token_embd, output_norm, output, 9 per layer
  EXPECT_EQ(g.tensors.count("rope_freqs.weight"), 0u);
  uint64_t end = 0;
  for (const std::string& n : g.order) {
    const auto& t = g.tensors.at(n);
    EXPECT_EQ(t.type, 0u) << n;
    EXPECT_EQ(t.offset % 32, 0u) << n;
    EXPECT_GE(t.offset, end) << n;
    uint64_t numel = 1;
    for (uint64_t d : t.ne) numel *= d;
    end = t.offset + 4 * numel;
  }
  EXPECT_EQ(g.bytes.size(), g.data_start + (end + 31) / 32 * 32);

  // Q and K: each head's row 2i + s is our row s*d/2 + i (d = 16); V and the rest as they are
  const model::ModelSpec spec = model::model_spec(c);
  const Tensor qkv = w.params.tensor(static_cast<size_t>(spec.index("qkv_proj")))[1];
  auto ours = [&](int64_t row, int64_t col) { return qkv.f32()[row * 64 + col]; };
  const float* q = g.f32("blk.1.attn_q.weight");
  const float* k = g.f32("blk.1.attn_k.weight");
  const float* v = g.f32("blk.1.attn_v.weight");
  for (int64_t h = 0; h < 4; h++)
    for (int64_t i = 0; i < 8; i++)
      for (int64_t s = 0; s < 2; s++)
        for (int64_t col : {0, 5, 63}) {
          EXPECT_EQ(q[(h * 16 + 2 * i + s) * 64 + col], ours(h * 16 + s * 8 + i, col));
          if (h < 2) EXPECT_EQ(k[(h * 16 + 2 * i + s) * 64 + col], ours(64 + h * 16 + s * 8 + i, col));
        }
  for (int64_t r = 0; r < 32; r++) EXPECT_EQ(v[r * 64 + 7], ours(96 + r, 7));
  const float* emb = g.f32("token_embd.weight");
  EXPECT_EQ(emb[299 * 64 + 63], w.params.tensor(static_cast<size_t>(spec.token_embedding)).f32()[299 * 64 + 63]);
}

TEST_F(Gguf, Gpt2TensorsAndHalfTypes) {
  model::GptConfig c = model::gpt_preset("gpt2-tiny");
  c.vocab_size = 300;
  c.padded_vocab_size = 384;
  Weights w(c);
  const auto tok = byte_tokenizer();
  ck::save_gguf(dir + "/f32.gguf", c, w.params, ck::GgufType::kF32, *tok);
  GgufFile g(dir + "/f32.gguf");
  EXPECT_EQ(g.s("general.architecture"), "gpt2");
  EXPECT_EQ(g.u("gpt2.feed_forward_length"), 256u);
  EXPECT_FLOAT_EQ(static_cast<float>(g.d("gpt2.attention.layer_norm_epsilon")), 1e-5f);
  EXPECT_EQ(g.tensors.at("position_embd.weight").ne, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(g.tensors.at("blk.0.attn_qkv.weight").ne, (std::vector<uint64_t>{64, 192}));  // [out, in], not Conv1D's
  EXPECT_EQ(g.tensors.at("blk.0.attn_qkv.bias").ne, (std::vector<uint64_t>{192}));
  EXPECT_EQ(g.tensors.at("blk.1.ffn_down.weight").ne, (std::vector<uint64_t>{256, 64}));
  EXPECT_EQ(g.tensors.count("output.weight"), 0u);  // tied: llama.cpp takes token_embd
  const model::ModelSpec spec = model::model_spec(c);
  const float* qkvw = w.params.tensor(static_cast<size_t>(spec.index("qkvw")))[1].f32();
  EXPECT_EQ(g.f32("blk.1.attn_qkv.weight")[100 * 64 + 3], qkvw[100 * 64 + 3]);
  const float* qkvw0 = w.params.tensor(static_cast<size_t>(spec.index("qkvw")))[0].f32();

  // F16, BF16: matrices in two bytes, norms and biases F32; Q8_0: 34 bytes per 32 values
  for (auto [type, id] : {std::pair{ck::GgufType::kF16, 1u}, {ck::GgufType::kBF16, 30u}, {ck::GgufType::kQ8_0, 8u}}) {
    const std::string path = dir + "/" + std::string(ck::gguf_type_name(type)) + ".gguf";
    ck::save_gguf(path, c, w.params, type, *tok);
    GgufFile h(path);
    EXPECT_EQ(h.tensors.at("blk.0.attn_qkv.weight").type, id);
    EXPECT_EQ(h.tensors.at("blk.0.attn_qkv.bias").type, 0u);
    EXPECT_EQ(h.tensors.at("blk.0.attn_norm.weight").type, 0u);
    const auto& t = h.tensors.at("blk.0.attn_qkv.weight");
    const char* p = h.bytes.data() + h.data_start + t.offset;
    uint16_t first;
    std::memcpy(&first, p, 2);
    const float x = qkvw0[0];  // layer 0, element 0
    if (type == ck::GgufType::kF16) EXPECT_EQ(first, ck::f32_to_f16(x));
    if (type == ck::GgufType::kBF16) EXPECT_EQ(first, f32_to_bf16(x));
    if (type == ck::GgufType::kQ8_0) {  // the block's scale, then round(x / scale)
      float amax = 0;
      for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(qkvw0[i]));
      EXPECT_EQ(first, ck::f32_to_f16(amax / 127));
      EXPECT_EQ(static_cast<int8_t>(p[2]), static_cast<int8_t>(std::lround(x * 127 / amax)));
    }
  }
}

TEST_F(Gguf, Llama3RopeScalingAsRopeFreqs) {
  model::GptConfig c = llama_config();
  c.rope_theta = 500000.0;
  c.rope_scaling = {8.0, 1.0, 4.0, 8192};
  Weights w(c);
  ck::save_gguf(dir + "/m.gguf", c, w.params, ck::GgufType::kF32, *byte_tokenizer());
  GgufFile g(dir + "/m.gguf");
  ASSERT_EQ(g.tensors.at("rope_freqs.weight").ne, (std::vector<uint64_t>{8}));  // head size 16 / 2
  const float* f = g.f32("rope_freqs.weight");
  // frequency i: theta^(-2i/16); wavelengths below 8192/4 kept (1), above 8192/1 divided by 8, a blend between
  for (int i = 0; i < 8; i++) {
    const double wavelen = 2 * M_PI * std::pow(500000.0, 2.0 * i / 16);
    if (wavelen < 2048) {
      EXPECT_EQ(f[i], 1.0f) << i;
    } else if (wavelen > 8192) {
      EXPECT_EQ(f[i], 8.0f) << i;
    } else {
      EXPECT_GT(f[i], 1.0f) << i;
      EXPECT_LT(f[i], 8.0f) << i;
    }
  }
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[7], 8.0f);
}

// llama.cpp names its pre-tokenizers: GPT-2's and Llama 3's regexes are written by name, another refused
// (llama.cpp would split text its own way).
TEST_F(Gguf, PreTokenizerByName) {
  Weights w(llama_config());
  ck::save_gguf(dir + "/l3.gguf", w.config, w.params, ck::GgufType::kF32, *byte_tokenizer(0, text::kLlama3Pattern));
  EXPECT_EQ(GgufFile(dir + "/l3.gguf").s("tokenizer.ggml.pre"), "llama-bpe");
  try {
    ck::save_gguf(dir + "/x.gguf", w.config, w.params, ck::GgufType::kF32, *byte_tokenizer(0, R"(\p{L}+|\s+)"));
    FAIL() << "an unknown pre-tokenizer was written";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("pre-tokenizer that llama.cpp does not name"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf"));
}

TEST_F(Gguf, RefusesATokenizerLargerThanTheModel) {
  Weights w(llama_config());
  const auto tok = byte_tokenizer(100);  // 358 ids for a model of 300
  try {
    ck::save_gguf(dir + "/x.gguf", w.config, w.params, ck::GgufType::kF32, *tok);
    FAIL() << "a tokenizer of 358 ids was written for a model of 300";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("has 358 ids but the model's vocabulary 300"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--tokenizer"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf.tmp"));
  EXPECT_THROW(ck::parse_gguf_type("q4_0"), InvalidArgument);
}

// ---- the library's reader (checkpoint::GgufFile), against the test's own reader above and crafted files ----

namespace {

// The half's value by its definition (sign, 5-bit exponent, 10-bit mantissa).
float half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(1.0f + m / 1024.0f, e - 15);
  return (h & 0x8000) ? -mag : mag;
}

// A GGUF file built byte by byte: version, keys (raw bytes after the count), tensor infos, alignment padding, data.
struct Crafted {
  uint32_t version = 3;
  uint64_t n_keys = 0, n_tensors = 0;
  std::string keys, infos, data;
  template <class T>
  static void put(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  static void str(std::string& s, std::string_view v) {
    put<uint64_t>(s, v.size());
    s.append(v);
  }
  void u32(std::string_view k, uint32_t v) {
    str(keys, k);
    put<uint32_t>(keys, 4);
    put(keys, v);
    n_keys++;
  }
  void tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(infos, name);
    put<uint32_t>(infos, static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) put(infos, d);
    put(infos, type);
    put(infos, offset);
    n_tensors++;
  }
  std::string bytes() const {
    std::string s = "GGUF";
    put(s, version);
    put(s, n_tensors);
    put(s, n_keys);
    s += keys + infos;
    s.resize((s.size() + 31) / 32 * 32, '\0');
    return s + data;
  }
  void write(const std::string& path) const { std::ofstream(path, std::ios::binary) << bytes(); }
};

// The IoError's message of reading `path`, or "" if it reads.
std::string refusal(const std::string& path) {
  try {
    ck::GgufFile f(path);
    return "";
  } catch (const IoError& e) {
    return e.what();
  }
}

}  // namespace

TEST(GgufF16, WidensEveryHalfExactly) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    const float f = ck::f16_to_f32(static_cast<uint16_t>(h));
    if ((h & 0x7C00) == 0x7C00) {  // infinity and NaN
      EXPECT_EQ(std::isnan(f), (h & 0x3FF) != 0) << h;
      if ((h & 0x3FF) == 0) EXPECT_EQ(f, (h & 0x8000) ? -INFINITY : INFINITY);
      continue;
    }
    ASSERT_EQ(f, half_value(static_cast<uint16_t>(h))) << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
    ASSERT_EQ(ck::f32_to_f16(f), h) << h;
  }
}

// Every key, tensor info and value the writer put in a file, as the library's reader reads it back, for both
// families and every type the writer has.
TEST_F(Gguf, ReaderReadsWhatTheWriterWrote) {
  model::GptConfig gpt2 = model::gpt_preset("gpt2-tiny");
  gpt2.vocab_size = 300;
  gpt2.padded_vocab_size = 384;
  for (const model::GptConfig& c : {llama_config(), gpt2})
    for (ck::GgufType type : {ck::GgufType::kF32, ck::GgufType::kF16, ck::GgufType::kBF16, ck::GgufType::kQ8_0}) {
      SCOPED_TRACE(std::string(c.family == model::Family::kLlama ? "llama " : "gpt2 ") +
                   std::string(ck::gguf_type_name(type)));
      Weights w(c);
      const std::string path = dir + "/m.gguf";
      ck::save_gguf(path, c, w.params, type, *byte_tokenizer(), "tiny");
      GgufFile want(path);
      const ck::GgufFile got(path);
      EXPECT_EQ(got.version(), 3u);
      EXPECT_EQ(got.alignment(), 32u);
      EXPECT_EQ(got.data_offset(), want.data_start);
      EXPECT_EQ(got.file_bytes(), want.bytes.size());
      ASSERT_EQ(got.metadata().size(), want.kv.size());
      for (const auto& [key, value] : got.metadata()) {
        ASSERT_TRUE(want.kv.count(key)) << key;
        const auto& expected = want.kv.at(key);
        if (const auto* s = std::get_if<std::string>(&expected)) {
          EXPECT_EQ(std::get<std::string>(value.scalar), *s) << key;
        } else if (const auto* d = std::get_if<double>(&expected)) {
          EXPECT_EQ(value.number(), *d) << key;
        } else if (value.type == 9) {  // an array: the test's reader counted its items
          EXPECT_EQ(value.items, std::get<uint64_t>(expected)) << key;
          if (value.item_type == 8) EXPECT_EQ(value.strings, want.string_arrays.at(key)) << key;
          else EXPECT_EQ(value.numbers.size(), value.items) << key;
        } else if (value.type == 7) {
          EXPECT_EQ(std::get<bool>(value.scalar), std::get<uint64_t>(expected) == 1) << key;
        } else {
          EXPECT_EQ(value.integer(), static_cast<int64_t>(std::get<uint64_t>(expected))) << key;
        }
      }
      EXPECT_EQ(got.find("general.name")->str(), "\"tiny\"");
      if (c.family == model::Family::kLlama)  // an f32 printed as the shortest decimal that reads back as it
        EXPECT_EQ(got.find("llama.attention.layer_norm_rms_epsilon")->str(), "1e-05");
      EXPECT_EQ(got.find("tokenizer.ggml.merges")->str(), "[1 strings: \"a b\"]");
      EXPECT_EQ(got.find("tokenizer.ggml.tokens")->str(2), "[300 strings: \"\xC4\x80\", \"\xC4\x81\", ...]");  // Ā ā

      ASSERT_EQ(got.tensors().size(), want.order.size());
      for (size_t i = 0; i < want.order.size(); i++) {
        const ck::GgufTensorInfo& t = got.tensors()[i];
        const auto& info = want.tensors.at(want.order[i]);
        ASSERT_EQ(t.name, want.order[i]);
        EXPECT_EQ(t.ne, info.ne) << t.name;
        EXPECT_EQ(t.type, info.type) << t.name;
        EXPECT_EQ(t.offset, want.data_start + info.offset) << t.name;
        EXPECT_EQ(got.find_tensor(t.name), &t);
        // the values, decoded here from the bytes by the types' definitions
        const std::vector<float> v = got.read_floats(t);
        ASSERT_EQ(v.size(), t.elements()) << t.name;
        const char* p = want.bytes.data() + t.offset;
        for (size_t k = 0; k < v.size(); k += 7) {
          float expected = 0;
          uint16_t h = 0;
          if (t.type == 0) {
            std::memcpy(&expected, p + 4 * k, 4);
          } else if (t.type == 1 || t.type == 30) {
            std::memcpy(&h, p + 2 * k, 2);
            expected = t.type == 1 ? half_value(h) : bf16_to_f32(h);
          } else {
            std::memcpy(&h, p + k / 32 * 34, 2);
            expected = half_value(h) * static_cast<float>(static_cast<int8_t>(p[k / 32 * 34 + 2 + k % 32]));
          }
          ASSERT_EQ(v[k], expected) << t.name << " value " << k;
        }
      }
      // the model's values come back through the file (Q8_0 within half a step of its block)
      const ck::GgufTensorInfo& norm = *got.find_tensor("blk.1.ffn_norm.weight");
      const std::vector<float> nv = got.read_floats(norm);
      const model::ModelSpec spec = model::model_spec(c);
      const char* norm_name = c.family == model::Family::kLlama ? "post_attention_layernorm" : "ln2w";
      const float* ours = w.params.tensor(static_cast<size_t>(spec.index(norm_name)))[1].f32();
      for (size_t k = 0; k < nv.size(); k++) ASSERT_EQ(nv[k], ours[k]) << k;  // 1-D tensors stay F32
      const std::vector<float> emb = got.read_floats(*got.find_tensor("token_embd.weight"));
      const float* e = w.params.tensor(static_cast<size_t>(spec.token_embedding)).f32();
      const double step = type == ck::GgufType::kF32 ? 0 : type == ck::GgufType::kQ8_0 ? 0.5 / 127 : 1.0 / 256;
      for (size_t k = 0; k < emb.size(); k += 13)
        ASSERT_LE(std::fabs(emb[k] - e[k]), step * std::fabs(e[k]) + (type == ck::GgufType::kQ8_0 ? 0.03 : 0))
            << "token_embd value " << k;
    }
}

TEST_F(Gguf, ReaderRefusesDamagedFiles) {
  Weights w(llama_config());
  const std::string good = dir + "/good.gguf";
  ck::save_gguf(good, w.config, w.params, ck::GgufType::kQ8_0, *byte_tokenizer());
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  // every truncation: refused with a message, never read past the end
  const std::string cut = dir + "/cut.gguf";
  for (size_t n = 0; n < bytes.size(); n += n < 4096 ? 1 : 997) {
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << bytes.substr(0, n);
    const std::string why = refusal(cut);
    ASSERT_FALSE(why.empty()) << "a file cut to " << n << " of " << bytes.size() << " bytes was read";
  }
  EXPECT_NE(refusal(cut).find("run past the end of the file"), std::string::npos) << refusal(cut);

  auto expect_refused = [&](const Crafted& c, const std::string& want) {
    c.write(dir + "/c.gguf");
    const std::string why = refusal(dir + "/c.gguf");
    EXPECT_NE(why.find(want), std::string::npos) << "want '" << want << "', got '" << why << "'";
  };
  Crafted ok;
  ok.u32("general.alignment", 32);
  ok.tensor("t", {32, 2}, 8, 0);  // Q8_0: 2 blocks, 68 bytes
  ok.data = std::string(68, '\0');
  ok.write(dir + "/ok.gguf");
  EXPECT_EQ(refusal(dir + "/ok.gguf"), "");
  EXPECT_EQ(ck::GgufFile(dir + "/ok.gguf").read_floats(*ck::GgufFile(dir + "/ok.gguf").find_tensor("t")),
            std::vector<float>(64, 0.0f));

  Crafted c = ok;
  c.version = 1;
  expect_refused(c, "version 1: this reader knows versions 2 and 3");
  c = ok;
  c.u32("general.alignment", 32);
  expect_refused(c, "the metadata key \"general.alignment\" appears twice");
  c = ok;
  c.keys.clear();
  c.n_keys = 0;
  c.u32("general.alignment", 48);
  expect_refused(c, "general.alignment is 48: it must be a u32 power of two");
  c = ok;
  c.tensor("t", {32}, 0, 128);
  expect_refused(c, "the tensor name \"t\" appears twice");
  c = ok;
  c.tensor("u", {32}, 99, 128);
  expect_refused(c, "ggml type 99, which this reader does not know");
  c = ok;
  c.tensor("u", {16}, 8, 128);
  expect_refused(c, "rows of 16 values are not whole Q8_0 blocks of 32");
  c = ok;
  c.tensor("u", {32}, 0, 100);
  expect_refused(c, "offset 100 is not a multiple of the alignment 32");
  c = ok;
  c.tensor("u", {1, 1, 1, 1, 1}, 0, 128);
  expect_refused(c, "has 5 dimensions (ggml has 1 to 4)");
  c = ok;
  c.tensor("u", {4, 0}, 0, 128);
  expect_refused(c, "dimension 1 is 0 (empty)");
  c = ok;
  c.tensor("u", {1ull << 40, 1ull << 40}, 0, 128);
  expect_refused(c, "more values than the file can hold");
  c = ok;
  c.tensor("u", {32}, 0, 128);  // 128 bytes at data offset 128: past the 68 bytes of data
  expect_refused(c, "tensor \"u\"'s 128 bytes at data offset 128 run past the end of the file");
  c = ok;
  c.n_keys = 1ull << 60;
  expect_refused(c, "claims 1152921504606846976 metadata keys, more than it can hold");
  c = ok;
  Crafted::str(c.keys, "x");
  Crafted::put<uint32_t>(c.keys, 13);
  c.n_keys++;
  expect_refused(c, "unknown metadata value type 13");
  c = ok;
  Crafted::str(c.keys, "arr");
  Crafted::put<uint32_t>(c.keys, 9);
  Crafted::put<uint32_t>(c.keys, 8);
  Crafted::put<uint64_t>(c.keys, 1ull << 50);
  c.n_keys++;
  expect_refused(c, "an array of 1125899906842624 items");
  c = ok;  // a string value printed on one line, quoted and escaped
  Crafted::str(c.keys, "general.name");
  Crafted::put<uint32_t>(c.keys, 8);
  Crafted::str(c.keys, "a\"b\n");
  c.n_keys++;
  c.write(dir + "/c.gguf");
  EXPECT_EQ(ck::GgufFile(dir + "/c.gguf").find("general.name")->str(), "\"a\\\"b\\x0a\"");
  std::ofstream(dir + "/not.gguf") << "GGUX and more";
  EXPECT_NE(refusal(dir + "/not.gguf").find("does not start with \"GGUF\""), std::string::npos);
  EXPECT_FALSE(ck::looks_like_gguf(dir + "/not.gguf"));
  EXPECT_TRUE(ck::looks_like_gguf(good));
  const std::string missing = refusal(dir + "/missing.gguf");
  EXPECT_NE(missing.find("cannot open GGUF file"), std::string::npos) << missing;

  // a type the reader sizes but does not decode: read_floats names it
  Crafted q4;
  q4.tensor("q", {256}, 12, 0);
  q4.data = std::string(144, '\0');
  q4.write(dir + "/q4.gguf");
  const ck::GgufFile f(dir + "/q4.gguf");
  EXPECT_EQ(f.tensors()[0].bytes, 144u);
  EXPECT_EQ(ck::ggml_type_name(12), "Q4_K");
  try {
    (void)f.read_floats(f.tensors()[0]);
    FAIL() << "a Q4_K tensor was decoded";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("is Q4_K; axonn reads F32, F16, BF16 and Q8_0 tensors"), std::string::npos)
        << e.what();
  }
}

namespace {

// w's padded vocabulary rows set to zero, as every model has them (GGUF files leave them out).
void zero_vocab_padding(Weights& w) {
  const model::ModelSpec spec = model::model_spec(w.config);
  const int64_t C = w.config.channels;
  for (int t : {spec.token_embedding, spec.lm_head}) {
    float* x = w.params.tensor(static_cast<size_t>(t)).f32();
    std::fill(x + int64_t{w.config.vocab_size} * C, x + int64_t{w.config.padded_vocab_size} * C, 0.0f);
  }
}

// The offset of the 4-byte type of tensor `name` in a GGUF file's header (after its name and dimensions).
size_t type_offset(const std::string& bytes, const std::string& name) {
  std::string key(8, '\0');
  const uint64_t n = name.size();
  std::memcpy(key.data(), &n, 8);
  key += name;
  const size_t at = bytes.find(key);
  EXPECT_NE(at, std::string::npos) << name;
  uint32_t dims = 0;
  std::memcpy(&dims, bytes.data() + at + key.size(), 4);
  return at + key.size() + 4 + 8 * dims;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string model_refusal(const std::string& path) {
  try {
    ck::GgufModel m(path);
    m.tokenizer();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

// A model written by save_gguf comes back as the same configuration and weights: exact in F32, each matrix
// value rounded once in BF16 (the rotary rows of Q and K back in our order), for both families, grouped-query
// attention, an untied head, a head size other than C / NH, Llama 3.1's rope scaling, and tensors of more
// than the million values the reader takes at a time.
TEST_F(Gguf, ModelReadsBackTheModelItWrote) {
  model::GptConfig gpt2 = model::gpt_preset("gpt2-tiny");
  gpt2.vocab_size = 300;
  gpt2.padded_vocab_size = 384;
  model::GptConfig untied = llama_config();
  untied.tied_embeddings = false;
  untied.head_dim = 32;  // 4 heads of 32 over 64 channels
  untied.rope_theta = 500000.0;
  untied.rope_scaling = {8.0, 1.0, 4.0, 8192};
  model::GptConfig wide = llama_config();  // Q of 2048 x 2048: read in blocks of whole heads
  wide.channels = 2048;
  wide.num_heads = 8;
  wide.ffn_hidden = 64;
  wide.num_layers = 1;
  wide.vocab_size = 600;
  wide.padded_vocab_size = 640;
  for (const model::GptConfig& c : {llama_config(), untied, gpt2, wide})
    for (ck::GgufType type : {ck::GgufType::kF32, ck::GgufType::kBF16}) {
      SCOPED_TRACE(c.str() + " " + std::string(ck::gguf_type_name(type)));
      Weights w(c);
      zero_vocab_padding(w);
      const std::string path = dir + "/m.gguf";
      ck::save_gguf(path, c, w.params, type, *byte_tokenizer());
      const ck::GgufModel m(path);
      model::GptConfig want = c;
      if (c.family == model::Family::kLlama) want.eos_token_ids = {256};  // the tokenizer's end of text
      EXPECT_EQ(m.config(), want) << m.config().str();
      EXPECT_EQ(m.kind(), std::string("GGUF ") + (c.family == model::Family::kLlama ? "llama" : "gpt2") + " (" +
                              (type == ck::GgufType::kF32 ? "F32" : "BF16") + ")");
      Arena got("read");
      model::reserve_params(got, model::model_spec(c));
      got.allocate();
      m.load(got);
      const model::ModelSpec spec = model::model_spec(c);
      for (size_t t = 0; t < got.size(); t++) {
        const Tensor a = got.tensor(t), b = w.params.tensor(t);
        const bool matrix = spec.params[t].shape.ndim() >= 2 + (spec.params[t].per_layer ? 1 : 0);
        for (int64_t k = 0; k < a.numel(); k++) {
          const float expected = type == ck::GgufType::kBF16 && matrix ? bf16_to_f32(f32_to_bf16(b.f32()[k])) : b.f32()[k];
          ASSERT_EQ(a.f32()[k], expected) << spec.params[t].name << " element " << k;
        }
      }
    }
}

// The tokenizer inside a GGUF file comes back: byte-level BPE with GPT-2's and Llama 3's pre-tokenizers, and a
// SentencePiece model axonn trained; each encodes and decodes as the original, has its special ids and its
// own size (the writer's placeholder tokens left out), and as the file a Hugging Face directory holds
// (tokenizer.json, tokenizer.model) loads back as the same tokenizer.
TEST_F(Gguf, ModelTokenizerComesBack) {
  std::vector<std::unique_ptr<text::Tokenizer>> originals;
  originals.push_back(byte_tokenizer());
  originals.push_back(byte_tokenizer(3, text::kLlama3Pattern));
  std::vector<std::string> lines;
  for (int i = 0; i < 400; i++)
    lines.push_back("line " + std::to_string(i) + " of a small corpus about models, tokens and grids; " +
                    std::string(i % 3 ? "abab" : "the end") + ".");
  size_t next = 0;
  text::SentencePieceTrainOptions o;
  o.vocab_size = 300;
  o.threads = 2;
  originals.push_back(text::SentencePieceTokenizer::from_serialized(text::train_sentencepiece(o, [&](std::string& s) {
    if (next >= lines.size()) return false;
    s = lines[next++];
    return true;
  }), "trained in the test"));
  const std::vector<std::string> texts = {
      "ab abab <|endoftext|> line 12 of a small corpus", "  double  spaces,\ttabs\nand newlines ",
      "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", "the end."};
  for (const auto& original : originals) {
    SCOPED_TRACE(original->describe());
    const std::string path = dir + "/t.gguf";
    model::GptConfig c = llama_config();
    c.vocab_size = 320;  // more ids than any of the tokenizers: the writer pads with placeholders
    c.padded_vocab_size = 384;
    Weights w(c);
    ck::save_gguf(path, c, w.params, ck::GgufType::kF32, *original);
    const std::unique_ptr<text::Tokenizer> back = ck::GgufModel(path).tokenizer();
    ASSERT_TRUE(back);
    const std::optional<text::TokenizerListing> listing = ck::GgufModel(path).tokenizer_listing();
    const auto [name, contents] = text::tokenizer_file_from_listing(*listing, "from the test");
    const std::string hf = dir + "/hf";
    std::filesystem::create_directories(hf);
    std::ofstream(hf + "/" + name, std::ios::binary) << contents;
    const std::unique_ptr<text::Tokenizer> from_file = text::load_tokenizer(hf);
    for (const text::Tokenizer* t : {back.get(), from_file.get()}) {
      EXPECT_EQ(t->vocab_size(), original->vocab_size());
      EXPECT_EQ(t->bos_id(), original->bos_id());
      // GGUF's EOS is the tokenizer's, else its end of text (as save_gguf writes it)
      EXPECT_EQ(t->eos_id(), original->eos_id() >= 0 ? original->eos_id() : original->eot_id());
      EXPECT_EQ(t->eot_id(), original->eot_id());
      EXPECT_EQ(t->implies_leading_space(), original->implies_leading_space());
      for (const std::string& text : texts) {
        const std::vector<int> ids = original->encode(text);
        EXPECT_EQ(t->encode(text), ids) << text;
        EXPECT_EQ(t->encode_ordinary(text), original->encode_ordinary(text)) << text;
        EXPECT_EQ(t->decode(ids), original->decode(ids)) << text;
      }
    }
    std::filesystem::remove_all(hf);
  }
  EXPECT_TRUE(ck::GgufModel(dir + "/t.gguf").tokenizer_listing()->kind == text::TokenizerListing::Kind::kSentencePiece);
}

// What axonn's model cannot be is refused when the file is opened, naming the key or tensor: a quantised
// tensor, another architecture, rope frequencies that are not Llama 3.1's scaling, a pre-tokenizer axonn
// does not have.
TEST_F(Gguf, ModelRefusesWhatItCannotRun) {
  model::GptConfig c = llama_config();
  c.rope_scaling = {8.0, 1.0, 4.0, 8192};
  c.rope_theta = 500000.0;
  Weights w(c);
  const std::string path = dir + "/m.gguf";
  ck::save_gguf(path, c, w.params, ck::GgufType::kF32, *byte_tokenizer());
  ASSERT_EQ(model_refusal(path), "");
  const std::string good = read_bytes(path);
  auto refused = [&](std::string bytes, const std::string& want) {
    std::ofstream(dir + "/bad.gguf", std::ios::binary | std::ios::trunc) << bytes;
    const std::string why = model_refusal(dir + "/bad.gguf");
    EXPECT_NE(why.find(want), std::string::npos) << "want '" << want << "', got '" << why << "'";
  };
  std::string b = good;  // Q4_0: 18 bytes per 32 values, smaller than F32, so still inside the file
  const uint32_t q4_0 = 2;
  std::memcpy(b.data() + type_offset(b, "blk.0.ffn_up.weight"), &q4_0, 4);
  refused(b, "tensor 'blk.0.ffn_up.weight' is Q4_0; axonn reads weights stored as F32, F16, BF16 or Q8_0");
  b = good;
  b.replace(b.find("llama"), 5, "bloom");
  refused(b, "holds a 'bloom' model; axonn reads the llama and gpt2 architectures");
  b = good;  // the last rope frequency divisor, 8, made 7
  const float seven = 7.0f;
  GgufFile layout(path);
  std::memcpy(b.data() + layout.data_start + layout.tensors.at("rope_freqs.weight").offset + 7 * 4, &seven, 4);
  refused(b, "rope_freqs.weight[");
  b = good;
  b.replace(b.find("gpt-2"), 5, "qwen2");
  refused(b, "splits text with llama.cpp's pre-tokenizer 'qwen2', which axonn does not have");
}

// llama.cpp's converter writes GPT-2's tied LM head as output.weight, a copy of token_embd.weight: read as the
// tied head it is. A head that differs is refused (axonn's GPT-2 ties the two).
TEST_F(Gguf, ModelReadsGpt2HeadCopyAsTied) {
  model::GptConfig c = model::gpt_preset("gpt2-tiny");
  c.vocab_size = 300;
  c.padded_vocab_size = 384;
  Weights w(c);
  zero_vocab_padding(w);
  const std::string path = dir + "/m.gguf";
  ck::save_gguf(path, c, w.params, ck::GgufType::kF32, *byte_tokenizer());
  const std::string bytes = read_bytes(path);
  const GgufFile layout(path);
  // the file again with one more tensor info, output.weight, at `offset` of the data with token_embd's shape
  auto with_head = [&](uint64_t offset) {
    const std::string& last = layout.order.back();
    const size_t infos_end = type_offset(bytes, last) + 4 + 8;  // its type, then its offset
    std::string out = bytes.substr(0, infos_end);
    const uint64_t n_tensors = layout.order.size() + 1;
    std::memcpy(out.data() + 8, &n_tensors, 8);
    Crafted info;
    info.tensor("output.weight", layout.tensors.at("token_embd.weight").ne, 0, offset);
    out += info.infos;
    out.resize((out.size() + 31) / 32 * 32, '\0');
    return out + bytes.substr(layout.data_start);
  };
  const uint64_t embd = layout.tensors.at("token_embd.weight").offset;
  std::ofstream(dir + "/copy.gguf", std::ios::binary) << with_head(embd);
  const ck::GgufModel m(dir + "/copy.gguf");
  EXPECT_EQ(m.config(), c);
  Arena got("read");
  model::reserve_params(got, model::model_spec(c));
  got.allocate();
  m.load(got);
  for (size_t t = 0; t < got.size(); t++)
    ASSERT_EQ(std::memcmp(got.tensor(t).f32(), w.params.tensor(t).f32(), got.tensor(t).numel() * sizeof(float)), 0) << t;
  std::ofstream(dir + "/other.gguf", std::ios::binary) << with_head(embd + 32);
  EXPECT_NE(model_refusal(dir + "/other.gguf").find("whose LM head (output.weight) differs from its token embedding"),
            std::string::npos)
      << model_refusal(dir + "/other.gguf");
}
