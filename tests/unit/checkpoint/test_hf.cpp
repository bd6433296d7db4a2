// GPT-2 and Llama in Hugging Face's layout: the name and layout mapping, bit-exact round trips through HF
// safetensors (files, model directories, shards, F32 and BF16) and llm.c .bin, config.json, and refusal
// of files that are not a model we can represent.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/checkpoint/hf.hpp"
#include "axonn/checkpoint/llmc.hpp"
#include "axonn/checkpoint/model_source.hpp"
#include "axonn/core/error.hpp"
#include "axonn/model/gpt.hpp"
#include "data_dirs.hpp"
#include "llmc_files.hpp"
#include "tensor_expect.hpp"

using namespace axonn;
namespace ck = axonn::checkpoint;
using model::Param;

namespace {

// GPT-2's structure at a small size, with an odd vocabulary so that wte has padding rows.
model::GptConfig small() {
  model::GptConfig c;
  c.max_seq_len = 16;
  c.vocab_size = 50;
  c.padded_vocab_size = 64;
  c.num_layers = 3;
  c.num_heads = 2;
  c.channels = 8;
  return c;
}

// Random values in every parameter (biases and LayerNorms too), padding rows of wte zero.
void fill_random(Arena& a, const model::GptConfig& c, uint32_t seed) {
  for (size_t i = 0; i < a.size(); i++) {
    Tensor t = a.tensor(i);
    std::vector<float> v = test::randn(static_cast<size_t>(t.numel()), seed + static_cast<uint32_t>(i));
    std::memcpy(t.f32(), v.data(), t.bytes());
  }
  Tensor wte = a.tensor(static_cast<size_t>(Param::kWte));
  std::memset(wte.f32() + static_cast<size_t>(c.vocab_size) * c.channels, 0,
              static_cast<size_t>(c.padded_vocab_size - c.vocab_size) * c.channels * sizeof(float));
}

Arena make_params(const model::GptConfig& c) {
  Arena a("parameters");
  model::reserve_params(a, model::model_spec(c));
  a.allocate();
  return a;
}

void expect_bit_equal(const Arena& a, const Arena& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i++) {
    ASSERT_EQ(a.tensor(i).bytes(), b.tensor(i).bytes()) << a.slot_name(i);
    EXPECT_EQ(std::memcmp(a.tensor(i).data(), b.tensor(i).data(), a.tensor(i).bytes()), 0) << a.slot_name(i);
  }
}

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

float at(const ck::SafetensorsFile& f, const std::string& name, size_t i) {
  const ck::TensorInfo& t = f.get(name);
  float v;
  std::memcpy(&v, f.data(t) + 4 * i, 4);
  return v;
}

template <typename F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.what();
  }
  return "<no IoError>";
}

// Rewrites an HF file through `edit`, which may rename, drop or add tensors and metadata.
template <typename Edit>
void rewrite(const std::string& from, const std::string& to, Edit edit) {
  ck::SafetensorsFile f(from);
  ck::SafetensorsWriter w;
  std::map<std::string, std::string> meta = f.metadata();
  std::vector<std::pair<std::string, const ck::TensorInfo*>> tensors;
  for (const auto& t : f.tensors()) tensors.emplace_back(t.name, &t);
  edit(tensors, meta);
  for (auto& [name, t] : tensors) w.add(name, t->dtype, t->shape, f.data(*t));
  for (auto& [k, v] : meta) w.set_metadata(k, v);
  w.write(to);
}

}  // namespace

TEST(HfGpt2, UsesHuggingFaceNamesAndConv1dLayouts) {
  test::TempDir d;
  model::GptConfig c = small();
  Arena p = make_params(c);
  fill_random(p, c, 1);
  ck::save_hf_safetensors(d.file("m.safetensors"), c, p);
  ck::SafetensorsFile f(d.file("m.safetensors"));
  // 2 embeddings + 12 per layer + final LayerNorm
  EXPECT_EQ(f.tensors().size(), 2u + 12u * 3 + 2u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("n_layer"), "3");
  EXPECT_EQ(f.metadata().at("n_head"), "2");
  EXPECT_EQ(f.metadata().at("n_embd"), "8");
  EXPECT_EQ(f.metadata().at("vocab_size"), "50");
  EXPECT_EQ(f.metadata().at("n_positions"), "16");
  const int64_t C = 8;
  EXPECT_EQ(f.get("wte.weight").shape, (std::vector<int64_t>{50, C}));  // unpadded
  EXPECT_EQ(f.get("wpe.weight").shape, (std::vector<int64_t>{16, C}));
  EXPECT_EQ(f.get("h.2.ln_1.weight").shape, (std::vector<int64_t>{C}));
  EXPECT_EQ(f.get("h.0.attn.c_attn.weight").shape, (std::vector<int64_t>{C, 3 * C}));
  EXPECT_EQ(f.get("h.0.attn.c_attn.bias").shape, (std::vector<int64_t>{3 * C}));
  EXPECT_EQ(f.get("h.0.attn.c_proj.weight").shape, (std::vector<int64_t>{C, C}));
  EXPECT_EQ(f.get("h.1.mlp.c_fc.weight").shape, (std::vector<int64_t>{C, 4 * C}));
  EXPECT_EQ(f.get("h.1.mlp.c_fc.bias").shape, (std::vector<int64_t>{4 * C}));
  EXPECT_EQ(f.get("h.1.mlp.c_proj.weight").shape, (std::vector<int64_t>{4 * C, C}));
  EXPECT_EQ(f.get("ln_f.bias").shape, (std::vector<int64_t>{C}));
  EXPECT_EQ(f.find("lm_head.weight"), nullptr);

  // Conv1D weight[in][out] == llm.c weight[out][in], per layer
  auto llmc = [&](Param prm, int64_t layer, int64_t out, int64_t in, int64_t in_dim, int64_t out_dim) {
    return p.tensor(static_cast<size_t>(prm)).f32()[(layer * out_dim + out) * in_dim + in];
  };
  for (int64_t l = 0; l < 3; l++) {
    std::string h = "h." + std::to_string(l) + ".";
    for (int64_t in = 0; in < C; in++)
      for (int64_t out = 0; out < 3 * C; out++)
        ASSERT_EQ(at(f, h + "attn.c_attn.weight", static_cast<size_t>(in * 3 * C + out)),
                  llmc(Param::kQkvw, l, out, in, C, 3 * C));
    for (int64_t in = 0; in < C; in++)
      for (int64_t out = 0; out < 4 * C; out++)
        ASSERT_EQ(at(f, h + "mlp.c_fc.weight", static_cast<size_t>(in * 4 * C + out)),
                  llmc(Param::kFcw, l, out, in, C, 4 * C));
    for (int64_t in = 0; in < 4 * C; in++)
      for (int64_t out = 0; out < C; out++)
        ASSERT_EQ(at(f, h + "mlp.c_proj.weight", static_cast<size_t>(in * C + out)),
                  llmc(Param::kFcprojw, l, out, in, 4 * C, C));
    for (int64_t in = 0; in < C; in++)
      for (int64_t out = 0; out < C; out++)
        ASSERT_EQ(at(f, h + "attn.c_proj.weight", static_cast<size_t>(in * C + out)),
                  llmc(Param::kAttprojw, l, out, in, C, C));
    // biases and LayerNorms are copied as they are
    for (int64_t i = 0; i < 3 * C; i++)
      ASSERT_EQ(at(f, h + "attn.c_attn.bias", static_cast<size_t>(i)), llmc(Param::kQkvb, l, i, 0, 1, 3 * C));
    for (int64_t i = 0; i < C; i++)
      ASSERT_EQ(at(f, h + "ln_2.bias", static_cast<size_t>(i)), llmc(Param::kLn2b, l, i, 0, 1, C));
  }
}

TEST(HfGpt2, RoundTripsBitForBit) {
  test::TempDir d;
  model::GptConfig c = small();
  Arena p = make_params(c), q = make_params(c);
  fill_random(p, c, 2);
  std::memset(q.tensor(0).data(), 0x7f, q.tensor(0).bytes());  // garbage in the padding rows on purpose
  ck::save_hf_safetensors(d.file("m.safetensors"), c, p);
  ck::HfCheckpoint f(d.file("m.safetensors"));
  model::GptConfig r = f.config();
  EXPECT_EQ(r.str(), c.str());
  EXPECT_EQ(r.num_heads, c.num_heads);
  f.load(q);
  expect_bit_equal(p, q);
  // writing the loaded parameters again gives the same file, byte for byte
  ck::save_hf_safetensors(d.file("m2.safetensors"), r, q);
  EXPECT_EQ(read_all(d.file("m.safetensors")), read_all(d.file("m2.safetensors")));
}

TEST(HfGpt2, LlmcFilesRoundTripThroughHfByteForByte) {
  test::TempDir d;
  model::GptConfig c = small();
  Arena p = make_params(c);
  fill_random(p, c, 3);
  for (int version : {3, 5}) {
    std::string v = std::to_string(version);
    ck::save_llmc(d.file("a" + v + ".bin"), c, p, version);
    Arena a = make_params(c), b = make_params(c);
    ck::load_llmc_params(d.file("a" + v + ".bin"), ck::read_llmc_config(d.file("a" + v + ".bin")), a);
    ck::save_hf_safetensors(d.file("a" + v + ".safetensors"), c, a);
    ck::HfCheckpoint f(d.file("a" + v + ".safetensors"));
    model::GptConfig r = f.config();
    f.load(b);
    ck::save_llmc(d.file("b" + v + ".bin"), r, b, version);
    EXPECT_EQ(read_all(d.file("a" + v + ".bin")), read_all(d.file("b" + v + ".bin"))) << "version " << version;
  }
}

TEST(HfGpt2, TheSharedReferenceRoundTrips) {
  test::TempDir d;
  const std::string ref = test::reference_file("gpt2-tiny/model.bin");
  model::GptConfig c = ck::read_llmc_config(ref);
  Arena p = make_params(c), q = make_params(c);
  ck::load_llmc_params(ref, c, p);
  ck::save_hf_safetensors(d.file("ref.safetensors"), c, p);
  ck::HfCheckpoint(d.file("ref.safetensors")).load(q);
  ck::save_llmc(d.file("ref.bin"), c, q);
  EXPECT_EQ(read_all(ref), read_all(d.file("ref.bin")));
}

TEST(HfGpt2, ReadsHfVariants) {
  test::TempDir d;
  model::GptConfig c = small();
  c.padded_vocab_size = 128;  // without our metadata, the vocabulary is padded as llm.c pads it
  Arena p = make_params(c);
  fill_random(p, c, 4);
  ck::save_hf_safetensors(d.file("m.safetensors"), c, p);

  // GPT2LMHeadModel's names ("transformer." prefix), HF's attention-mask buffers, a tied head, and
  // transformers' own metadata only ({"format": "pt"}): the heads then come from config.json
  std::vector<float> mask(16 * 16, 1.0f);
  {
    ck::SafetensorsFile src(d.file("m.safetensors"));
    ck::SafetensorsWriter w;
    for (const auto& t : src.tensors()) w.add("transformer." + t.name, t.dtype, t.shape, src.data(t));
    for (int l = 0; l < c.num_layers; l++)
      w.add("transformer.h." + std::to_string(l) + ".attn.bias", DType::kF32, {1, 1, 16, 16}, mask.data());
    const ck::TensorInfo& wte = src.get("wte.weight");
    w.add("lm_head.weight", wte.dtype, wte.shape, src.data(wte));
    w.set_metadata("format", "pt");
    std::filesystem::create_directories(d.file("hf"));
    w.write(d.file("hf/model.safetensors"));
  }
  const std::string hf = d.file("hf/model.safetensors");
  std::string e = io_error_of([&] { ck::HfCheckpoint f(hf); });
  EXPECT_NE(e.find("give it with --heads"), std::string::npos) << e;
  model::GptConfig r = ck::HfCheckpoint(hf, 2).config();
  EXPECT_EQ(r.str(), c.str());
  EXPECT_EQ(r.num_heads, 2);
  ck::write_file_atomic(d.file("hf/config.json"), ck::hf_config_json(c));
  ck::HfCheckpoint f(hf);
  r = f.config();
  EXPECT_EQ(r.num_heads, 2);
  Arena q = make_params(r);
  f.load(q);
  // the directory is an HF model directory too
  EXPECT_TRUE(ck::is_hf_model_dir(d.file("hf")));
  Arena q2 = make_params(r);
  ck::HfCheckpoint(d.file("hf")).load(q2);
  expect_bit_equal(p, q2);
  expect_bit_equal(p, q);

  // BF16 weights widen exactly
  {
    ck::SafetensorsFile src(d.file("m.safetensors"));
    std::vector<std::vector<uint16_t>> halves;
    ck::SafetensorsWriter w;
    for (const auto& t : src.tensors()) {
      std::vector<uint16_t> h(static_cast<size_t>(t.numel()));
      for (size_t i = 0; i < h.size(); i++) {
        float v;
        std::memcpy(&v, src.data(t) + 4 * i, 4);
        h[i] = f32_to_bf16(v);
      }
      halves.push_back(std::move(h));
      w.add(t.name, DType::kBF16, t.shape, halves.back().data());
    }
    for (const auto& [k, v] : src.metadata()) w.set_metadata(k, v);
    w.write(d.file("bf16.safetensors"));
  }
  Arena b = make_params(c);
  ck::HfCheckpoint(d.file("bf16.safetensors")).load(b);
  for (size_t i = 0; i < p.size(); i++) {
    const float* x = p.tensor(i).f32();
    const float* y = b.tensor(i).f32();
    for (int64_t j = 0; j < p.tensor(i).numel(); j++)
      ASSERT_EQ(y[j], bf16_to_f32(f32_to_bf16(x[j]))) << p.slot_name(i) << "[" << j << "]";
  }
}

// A Hugging Face model directory and a checkpoint directory are never one: --init read the HF files of a
// directory that held both, in the place of checkpoints that had moved on since (`axonn convert --to ck/`).
TEST(HfGpt2, NeverOneDirectoryWithCheckpoints) {
  test::TempDir d;
  const model::GptConfig c = small();
  Arena p = make_params(c);
  fill_random(p, c, 3);
  const std::string hf = d.file("hf"), ck_root = d.file("ck"), step = d.file("ck/step-00000007");
  ck::save_hf_dir(hf, c, p);
  EXPECT_FALSE(ck::holds_checkpoints(hf));
  EXPECT_EQ(ck::model_source_kind(hf), ck::ModelSource::Kind::kHuggingFace);
  // a root with a committed step (its manifest), a step directory, a root with only `latest`
  std::filesystem::create_directories(step);
  ck::write_file_atomic(step + "/manifest.json", "{}");
  std::filesystem::create_directories(d.file("pointer"));
  ck::write_file_atomic(d.file("pointer/latest"), "step-00000001\n");
  for (const std::string& dir : {ck_root, step, d.file("pointer")}) {
    EXPECT_TRUE(ck::holds_checkpoints(dir)) << dir;
    EXPECT_THROW(ck::save_hf_dir(dir, c, p), InvalidArgument) << dir;
    EXPECT_FALSE(std::filesystem::exists(dir + "/config.json")) << dir << ": written although refused";
  }
  EXPECT_EQ(ck::model_source_kind(ck_root), ck::ModelSource::Kind::kCheckpoint);
  // both in one directory (by hand, or by an older axonn): refused as a source, naming both
  for (const char* name : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(hf + "/" + name, ck_root + "/" + name);
  try {
    ck::model_source_kind(ck_root);
    ADD_FAILURE() << "a directory with a Hugging Face model and checkpoints was taken as one of them";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("holds both a Hugging Face model (config.json and its weights) and the checkpoint of step 7"),
              std::string::npos)
        << what;
  }
  EXPECT_THROW(ck::find_model_source(ck_root), InvalidArgument);
}

TEST(HfConfig, FieldsOfTheWrongTypeAreIoErrors) {
  // found by fuzz_hf_config: nlohmann's type_error escaped from value() and get<>
  for (const char* text : {R"({"model_type": 4})", R"({"model_type": "gpt2", "n_layer": "two"})",
                           R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": [2]})"}) {
    std::string e = io_error_of([&] { (void)ck::parse_hf_config_json(text, "cfg.json"); });
    EXPECT_NE(e.find("cfg.json"), std::string::npos) << text << ": " << e;
  }
}

TEST(HfGpt2, RefusesWhatItCannotRepresent) {
  test::TempDir d;
  model::GptConfig c = small();
  Arena p = make_params(c);
  fill_random(p, c, 5);
  const std::string good = d.file("m.safetensors");
  ck::save_hf_safetensors(good, c, p);
  auto load_error = [&](const std::string& path) {
    return io_error_of([&] {
      ck::HfCheckpoint f(path);
      Arena q = make_params(f.config());
      f.load(q);
    });
  };
  using Tensors = std::vector<std::pair<std::string, const ck::TensorInfo*>>;
  using Meta = std::map<std::string, std::string>;

  // a missing tensor
  rewrite(good, d.file("missing.safetensors"),
          [](Tensors& t, Meta&) { std::erase_if(t, [](auto& x) { return x.first == "h.1.mlp.c_fc.bias"; }); });
  std::string e = load_error(d.file("missing.safetensors"));
  EXPECT_NE(e.find("has no tensor 'h.1.mlp.c_fc.bias'"), std::string::npos) << e;
  EXPECT_NE(e.find("missing.safetensors"), std::string::npos) << e;

  // a tensor it does not know
  rewrite(good, d.file("extra.safetensors"), [](Tensors& t, Meta&) { t.emplace_back("score.weight", t[2].second); });
  e = load_error(d.file("extra.safetensors"));
  EXPECT_NE(e.find("does not know: 'score.weight'"), std::string::npos) << e;

  // a head tied to wte (identical bytes) is accepted; an untied one is refused
  rewrite(good, d.file("tied.safetensors"), [](Tensors& t, Meta&) {
    for (auto& x : t)
      if (x.first == "wte.weight") {
        t.emplace_back("lm_head.weight", x.second);
        break;
      }
  });
  EXPECT_EQ(load_error(d.file("tied.safetensors")), "<no IoError>");
  {
    ck::SafetensorsFile src(good);
    std::vector<float> other(static_cast<size_t>(src.get("wte.weight").numel()), 0.5f);
    ck::SafetensorsWriter w;
    for (const auto& t : src.tensors()) w.add(t.name, t.dtype, t.shape, src.data(t));
    w.add("lm_head.weight", DType::kF32, src.get("wte.weight").shape, other.data());
    for (const auto& [k, v] : src.metadata()) w.set_metadata(k, v);
    w.write(d.file("untied.safetensors"));
  }
  e = load_error(d.file("untied.safetensors"));
  EXPECT_NE(e.find("lm_head.weight differs from wte.weight"), std::string::npos) << e;

  // a wrong shape: c_attn stored as llm.c's [3C, C] (someone forgot the transpose)
  {
    ck::SafetensorsFile src(good);
    ck::SafetensorsWriter w;
    for (const auto& t : src.tensors()) {
      std::vector<int64_t> shape = t.shape;
      if (t.name == "h.0.attn.c_attn.weight") std::swap(shape[0], shape[1]);
      w.add(t.name, t.dtype, shape, src.data(t));
    }
    for (const auto& [k, v] : src.metadata()) w.set_metadata(k, v);
    w.write(d.file("shape.safetensors"));
  }
  e = load_error(d.file("shape.safetensors"));
  EXPECT_NE(e.find("'h.0.attn.c_attn.weight' has shape [24, 8], expected [8, 24]"), std::string::npos) << e;

  // metadata that contradicts the tensors
  rewrite(good, d.file("meta.safetensors"), [](Tensors&, Meta& m) { m["n_layer"] = "4"; });
  e = load_error(d.file("meta.safetensors"));
  EXPECT_NE(e.find("metadata n_layer=4 disagrees with the tensors (3)"), std::string::npos) << e;
  rewrite(good, d.file("meta2.safetensors"), [](Tensors&, Meta& m) { m["n_head"] = "two"; });
  e = load_error(d.file("meta2.safetensors"));
  EXPECT_NE(e.find("metadata 'n_head' is 'two', not an integer"), std::string::npos) << e;
  rewrite(good, d.file("meta3.safetensors"), [](Tensors&, Meta& m) { m["n_head"] = "3"; });
  e = load_error(d.file("meta3.safetensors"));
  EXPECT_NE(e.find("invalid model"), std::string::npos) << e;
  e = io_error_of([&] { ck::HfCheckpoint f(good, 4); });
  EXPECT_NE(e.find("has n_head 2, but 4 heads were asked for"), std::string::npos) << e;

  // not a GPT-2 at all
  float x = 1;
  ck::SafetensorsWriter w;
  w.add("encoder.weight", DType::kF32, {1}, &x);
  w.write(d.file("other.safetensors"));
  e = load_error(d.file("other.safetensors"));
  EXPECT_NE(e.find("is neither a GPT-2 nor a Llama safetensors file"), std::string::npos) << e;

  // integer weights
  {
    ck::SafetensorsFile src(good);
    ck::SafetensorsWriter w2;
    for (const auto& t : src.tensors())
      w2.add(t.name, t.name == "wpe.weight" ? DType::kI32 : t.dtype, t.shape, src.data(t));
    for (const auto& [k, v] : src.metadata()) w2.set_metadata(k, v);
    w2.write(d.file("int.safetensors"));
  }
  e = load_error(d.file("int.safetensors"));
  EXPECT_NE(e.find("'wpe.weight' is I32; weights must be F32 or BF16"), std::string::npos) << e;
}
