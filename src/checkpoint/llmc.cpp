#include "axonn/checkpoint/llmc.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/core/dtype.hpp"
#include "axonn/core/error.hpp"
#include "axonn/model/spec.hpp"
#include "axonn/core/input_file.hpp"

namespace axonn::checkpoint {

namespace {

constexpr int kHeaderInts = 256;
constexpr size_t kHeaderBytes = kHeaderInts * sizeof(int32_t);

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

File open_or_throw(const std::string& path, const char* mode) {
  if (mode[0] == 'r') return File(fopen_input_file(path, "checkpoint"));  // a named pipe is refused
  FILE* f = std::fopen(path.c_str(), mode);
  AXONN_CHECK_IO(f, "cannot open checkpoint '", path, "': ", std::strerror(errno));
  return File(f);
}

}  // namespace

model::GptConfig read_llmc_config(const std::string& path) {
  File f = open_or_throw(path, "rb");
  int32_t h[kHeaderInts];
  AXONN_CHECK_IO(std::fread(h, sizeof(int32_t), kHeaderInts, f.get()) == kHeaderInts, "checkpoint '", path,
                 "' is truncated: it is shorter than the 1024-byte llm.c header");
  AXONN_CHECK_IO(h[0] == kLlmcModelMagic, "checkpoint '", path, "' has magic ", h[0], ", not llm.c's ",
                 kLlmcModelMagic, "; is it an llm.c model file (gpt2_124M.bin, model_*.bin)?");
  AXONN_CHECK_IO(h[1] == 3 || h[1] == 5, "checkpoint '", path, "' has version ", h[1],
                 "; supported: 3 (fp32) and 5 (bf16). Re-export it with llm.c's train_gpt2.py");
  model::GptConfig c;
  c.max_seq_len = h[2];
  c.vocab_size = h[3];
  c.num_layers = h[4];
  c.num_heads = h[5];
  c.channels = h[6];
  c.padded_vocab_size = h[7];
  try {
    c.validate();
  } catch (const InvalidArgument& e) {
    throw IoError("checkpoint '" + path + "' has a bad header: " + e.what());
  }
  // the file holds exactly the header and the parameters
  size_t elem = h[1] == 3 ? 4 : 2;
  auto expected = kHeaderBytes + static_cast<size_t>(c.num_parameters()) * elem;
  std::error_code ec;
  auto actual = std::filesystem::file_size(path, ec);
  AXONN_CHECK_IO(!ec, "cannot stat checkpoint '", path, "': ", ec.message());
  AXONN_CHECK_IO(actual == expected, "checkpoint '", path, "' is ", actual, " bytes, but a version ", h[1],
                 " file for ", c.str(), " is ", expected, " bytes: the file is ",
                 actual < expected ? "truncated" : "too long (wrong header?)");
  return c;
}

void read_llmc_tensors(const std::string& path, const model::GptConfig& config,
                       const std::function<void(int, int, const float*)>& consume) {
  AXONN_CHECK_ARG(config.family == model::Family::kGpt2, "llm.c model files hold GPT-2 models, not ", config.str());
  model::GptConfig file_config = read_llmc_config(path);
  AXONN_CHECK_IO(file_config.channels == config.channels && file_config.num_layers == config.num_layers &&
                     file_config.padded_vocab_size == config.padded_vocab_size &&
                     file_config.max_seq_len == config.max_seq_len,
                 "checkpoint '", path, "' is for ", file_config.str(), ", not ", config.str());
  File f = open_or_throw(path, "rb");
  int32_t h[kHeaderInts];
  AXONN_CHECK_IO(std::fread(h, sizeof(int32_t), kHeaderInts, f.get()) == kHeaderInts, "checkpoint '", path,
                 "' is truncated");
  const bool bf16 = h[1] == 5;
  std::vector<float> layer;
  std::vector<uint16_t> raw;
  const model::ModelSpec spec = model::model_spec(config);
  for (int p = 0; p < static_cast<int>(spec.params.size()); p++) {
    const model::ParamSpec& ps = spec.params[static_cast<size_t>(p)];
    Shape s = ps.shape;
    const int layers = ps.per_layer ? static_cast<int>(s[0]) : 1;
    auto n = static_cast<size_t>(s.numel() / layers);
    layer.resize(n);
    for (int l = 0; l < layers; l++) {
      size_t got;
      if (bf16) {
        raw.resize(n);
        got = std::fread(raw.data(), sizeof(uint16_t), n, f.get());
        for (size_t j = 0; j < got; j++) layer[j] = bf16_to_f32(raw[j]);
      } else {
        got = std::fread(layer.data(), sizeof(float), n, f.get());
      }
      AXONN_CHECK_IO(got == n, "checkpoint '", path, "' is truncated inside tensor '", ps.name, "'");
      consume(p, l, layer.data());
    }
  }
}

void load_llmc_params(const std::string& path, const model::GptConfig& config, Arena& params, Progress* progress) {
  const model::ModelSpec spec = model::model_spec(config);
  read_llmc_tensors(path, config, [&](int p, int l, const float* data) {
    Tensor t = params.tensor(static_cast<size_t>(p));
    Tensor dst = spec.params[static_cast<size_t>(p)].per_layer ? t[l] : t;
    std::memcpy(dst.f32(), data, dst.bytes());
    if (progress) progress->add(static_cast<int64_t>(dst.bytes()));
  });
}

void save_llmc(const std::string& path, const model::GptConfig& config, const Arena& params, int version,
               Progress* progress) {
  AXONN_CHECK_ARG(config.family == model::Family::kGpt2, "llm.c model files hold GPT-2 models; ", config.str(),
                  " is not one: write a sharded checkpoint or Hugging Face safetensors instead");
  AXONN_CHECK_ARG(version == 3 || version == 5, "llm.c checkpoint version must be 3 or 5, got ", version);
  // temporary file, fsync, rename, fsync of the directory: the old file or the new, never a mix
  AtomicFile f(path);
  int32_t h[kHeaderInts] = {};
  h[0] = kLlmcModelMagic;
  h[1] = version;
  h[2] = config.max_seq_len;
  h[3] = config.vocab_size;
  h[4] = config.num_layers;
  h[5] = config.num_heads;
  h[6] = config.channels;
  h[7] = config.padded_vocab_size;
  f.write(h, sizeof h);
  std::vector<uint16_t> buf;
  for (size_t i = 0; i < params.size(); i++) {
    Tensor t = params.tensor(i);
    auto n = static_cast<size_t>(t.numel());
    if (version == 5) {
      buf.resize(n);
      for (size_t j = 0; j < n; j++) buf[j] = f32_to_bf16(t.f32()[j]);
      f.write(buf.data(), n * sizeof(uint16_t));
    } else {
      f.write(t.f32(), n * sizeof(float));
    }
    if (progress) progress->add(static_cast<int64_t>(n * (version == 5 ? sizeof(uint16_t) : sizeof(float))));
  }
  f.commit();
}

}  // namespace axonn::checkpoint
