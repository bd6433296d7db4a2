#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "axonn/checkpoint/llmc.hpp"
#include "axonn/core/error.hpp"
#include "axonn/model/gpt.hpp"
#include "data_dirs.hpp"
#include "llmc_files.hpp"
#include "tensor_expect.hpp"

using namespace axonn;

namespace {
model::GptConfig small() {
  model::GptConfig c;
  c.max_seq_len = 8;
  c.vocab_size = 30;
  c.padded_vocab_size = 32;
  c.num_layers = 2;
  c.num_heads = 2;
  c.channels = 6;
  return c;
}

void expect_io_error(const std::string& path, const std::string& needle) {
  try {
    checkpoint::read_llmc_config(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::vector<char> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
}  // namespace

TEST(LlmcCheckpoint, RoundTripsFp32AndBf16) {
  test::TempDir d;
  model::GptConfig c = small();
  Arena a("a");
  model::reserve_params(a, model::model_spec(c));
  a.allocate();
  model::init_params(a, model::model_spec(c), 5);
  checkpoint::save_llmc(d.file("v3.bin"), c, a, 3);
  checkpoint::save_llmc(d.file("v5.bin"), c, a, 5);
  EXPECT_EQ(std::filesystem::file_size(d.file("v3.bin")), 1024 + 4 * (size_t)c.num_parameters());
  EXPECT_FALSE(std::filesystem::exists(d.file("v3.bin.tmp")));
  model::GptConfig r = checkpoint::read_llmc_config(d.file("v5.bin"));
  EXPECT_EQ(r.channels, 6);
  EXPECT_EQ(r.padded_vocab_size, 32);
  Arena b("b"), h("h");
  model::reserve_params(b, model::model_spec(c));
  model::reserve_params(h, model::model_spec(c));
  b.allocate();
  h.allocate();
  checkpoint::load_llmc_params(d.file("v3.bin"), c, b);
  checkpoint::load_llmc_params(d.file("v5.bin"), c, h);
  for (size_t i = 0; i < a.size(); i++) {
    EXPECT_TRUE(test::allclose(b.tensor(i).f32(), a.tensor(i).f32(), a.tensor(i).numel(), 0, 0));
    EXPECT_TRUE(test::allclose(h.tensor(i).f32(), a.tensor(i).f32(), a.tensor(i).numel(), 0, 1.0f / 256));
  }
}

TEST(LlmcCheckpoint, ReadsTheSharedReference) {
  model::GptConfig c = checkpoint::read_llmc_config(test::reference_file("gpt2-tiny/model.bin"));
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.channels, 64);
  EXPECT_EQ(c.vocab_size, 500);
  EXPECT_EQ(c.padded_vocab_size, 512);
  EXPECT_EQ(c.max_seq_len, 64);
}

TEST(LlmcCheckpoint, RejectsBadFilesWithClearErrors) {
  test::TempDir d;
  model::GptConfig c = small();
  Arena a("a");
  model::reserve_params(a, model::model_spec(c));
  a.allocate();
  checkpoint::save_llmc(d.file("good.bin"), c, a);
  std::vector<char> good = slurp(d.file("good.bin"));

  expect_io_error(d.file("missing.bin"), "cannot open");
  test::write_bytes(d.file("short.bin"), std::vector<char>(good.begin(), good.begin() + 500));
  expect_io_error(d.file("short.bin"), "truncated");
  test::write_bytes(d.file("trunc.bin"), std::vector<char>(good.begin(), good.end() - 4));
  expect_io_error(d.file("trunc.bin"), "truncated");
  auto patch = [&](int index, int32_t value, const char* name) {
    std::vector<char> b = good;
    std::memcpy(b.data() + 4 * index, &value, 4);
    test::write_bytes(d.file(name), b);
    return d.file(name);
  };
  expect_io_error(patch(0, 20240520, "magic.bin"), "magic 20240520");
  expect_io_error(patch(1, 4, "version.bin"), "version 4");
  expect_io_error(patch(5, 4, "heads.bin"), "not divisible by heads");
  expect_io_error(patch(4, -1, "layers.bin"), "bad header");
  // a v5 header over fp32 data: sizes disagree
  expect_io_error(patch(1, 5, "v5size.bin"), "too long");
  // sizes whose products overflow (found by fuzz_llmc_model: 4 * C overflowed int, undefined behaviour)
  expect_io_error(patch(6, 982582272, "channels.bin"), "channels is 982582272, above the 16777216");
  expect_io_error(patch(6, 1 << 24, "params.bin"), "parameters, above the");
}
