// End-to-end: `axonn train`'s loop reproduces llm.c's own loss trajectory on the shared reference,
// within test::kLlmcLossBound at every step, and an independent PyTorch GPT-2's on odd shapes
// (tests/golden) within test::kPyTorchLossBound.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "axonn/checkpoint/hf.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/data/token_dataset.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/train/trainer.hpp"
#include "common/data_dirs.hpp"
#include "common/reference_run.hpp"

using namespace axonn;

namespace {

// Trains and returns the largest per-step difference to the expected losses (each within `bound`).
double max_loss_diff(const train::TrainConfig& c, const std::vector<double>& expected, double bound) {
  auto history = train::train(c, comm::world());
  EXPECT_EQ(history.size(), expected.size());
  double worst = 0;
  for (size_t i = 0; i < history.size() && i < expected.size(); i++) {
    EXPECT_EQ(history[i].step, (int)i);
    EXPECT_NEAR(history[i].loss, expected[i], bound) << "step " << i;
    worst = std::max(worst, std::fabs(history[i].loss - expected[i]));
  }
  return worst;
}

// A run of tests/golden: the model `init` and the tokens of `dir`, quiet.
train::TrainConfig golden_config(const std::string& init, const std::string& dir, int B, int T, int steps, float lr) {
  train::TrainConfig c;
  c.init = test::golden_file(init);
  c.data = test::golden_file(dir + "/tokens.bin");
  c.batch_size = B;
  c.seq_len = T;
  c.steps = steps;
  c.lr = lr;
  c.peak_gflops = 100;
  c.quiet = true;
  return c;
}

// The second golden cases' schedule: 3 warmup steps then cosine, decay 0.1 on matrices, clipping at 0.5.
void decay_clip_cosine(train::TrainConfig& c) {
  c.lr_schedule = "cosine";
  c.warmup_steps = 3;
  c.weight_decay = 0.1f;
  c.grad_clip = 0.5f;
}

train::TrainConfig reference_config(const std::string& kernels) {
  train::TrainConfig c = test::reference_config();
  c.kernels = kernels;
  return c;
}

}  // namespace

class ReferenceTrajectory : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTrajectory, ReproducesLlmcLosses) {
  auto expected = test::read_losses(test::reference_file("gpt2-tiny/losses.txt"));
  ASSERT_EQ(expected.size(), 30u);
  double worst = max_loss_diff(reference_config(GetParam()), expected, test::kLlmcLossBound);
  RecordProperty("max_abs_diff", std::to_string(worst));
  std::printf("max |loss - llm.c| over 30 steps (%s kernels): %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReferenceTrajectory, ::testing::Values("cpu", "ref"));

// bf16 mixed precision stays within the stated bound of llm.c's fp32 trajectory, and it is not the fp32
// run: bf16 rounding must show in the losses.
TEST_P(ReferenceTrajectory, Bf16StaysCloseToLlmcLosses) {
  auto expected = test::read_losses(test::reference_file("gpt2-tiny/losses.txt"));
  train::TrainConfig c = reference_config(GetParam());
  c.dtype = "bf16";
  double worst = max_loss_diff(c, expected, test::kBf16LossBound);
  EXPECT_GT(worst, 1e-3) << "bf16 gave fp32's losses: is the bf16 path running?";
  RecordProperty("max_abs_diff", std::to_string(worst));
  std::printf("bf16: max |loss - llm.c fp32| over 30 steps (%s kernels): %.3g (bound %.3g)\n", GetParam().c_str(),
              worst, test::kBf16LossBound);
}

TEST(GoldenTrajectory, OddShapesMatchPyTorch) {
  // L=2 NH=3 C=48 V=397 (padded 512) maxT=32; B=3 T=13
  train::TrainConfig c = golden_config("odd-shapes/model.bin", "odd-shapes", 3, 13, 20, 3e-3f);
  c.lr_schedule = "constant";
  c.grad_clip = 0;
  double worst = max_loss_diff(c, test::read_losses(test::golden_file("odd-shapes/losses.txt")), test::kPyTorchLossBound);
  std::printf("odd shapes: max |loss - pytorch| = %.3g\n", worst);
}

TEST(GoldenTrajectory, WeightDecayClippingCosineWarmupMatchPyTorch) {
  // L=3 NH=5 C=40 V=203 (padded 256) maxT=24; B=5 T=11; decay on matrices only
  train::TrainConfig c = golden_config("decay-clip-cosine/model.bin", "decay-clip-cosine", 5, 11, 15, 2e-3f);
  decay_clip_cosine(c);
  double worst = max_loss_diff(c, test::read_losses(test::golden_file("decay-clip-cosine/losses.txt")),
                               test::kPyTorchLossBound);
  std::printf("decay+clip+cosine: max |loss - pytorch| = %.3g\n", worst);
}

// Llama against the float64 PyTorch oracle of tests/golden/gen_llama_golden.py (written from Hugging
// Face's formulas, not from axonn's code): 20 AdamW steps from the oracle's Hugging Face directory,
// every loss within 1e-4, with both kernel backends.
class LlamaGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaGolden, GroupedQueryAttentionUntiedMatchesPyTorch) {
  // L=2 C=48 NH=6 KV=2 FFN=136 V=397 (padded 512) theta 1e4, untied; B=3 T=13, constant lr
  train::TrainConfig c = test::llama_oracle_config();
  c.kernels = GetParam();
  double worst = max_loss_diff(c, test::read_losses(test::golden_file("llama-gqa/losses.txt")), test::kLlamaOracleLossBound);
  std::printf("llama gqa (%s kernels): max |loss - pytorch| = %.3g\n", GetParam().c_str(), worst);
}

TEST_P(LlamaGolden, TiedLlama3RopeScalingDecayClipCosineMatchesPyTorch) {
  // L=3 C=40 NH=5 KV=1 FFN=100 V=203 (padded 256) theta 5e5, llama3 rope_scaling (factor 8, original
  // 16 positions), tied; B=5 T=11; warmup + cosine, weight decay on matrices, clipping at 0.5
  train::TrainConfig c = golden_config("llama-tied-scaled", "llama-tied-scaled", 5, 11, 20, 2e-3f);
  c.kernels = GetParam();
  decay_clip_cosine(c);
  double worst = max_loss_diff(c, test::read_losses(test::golden_file("llama-tied-scaled/losses.txt")),
                               test::kLlamaOracleLossBound);
  std::printf("llama tied + rope scaling (%s kernels): max |loss - pytorch| = %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Kernels, LlamaGolden, ::testing::Values("cpu", "ref"));

// tests/golden/llama-export is axonn's Hugging Face export (sharded: 4 shards of at most 100 kB, fp32)
// of the oracle's llama-gqa model, and logits.txt the logits the oracle computes after reading that
// export with its own few lines of Python. Exporting again gives the same bytes, and axonn's model,
// loading the export, gives the oracle's logits.
TEST(LlamaExport, IsReproducibleAndTheOracleReadsItAsAxonnDoes) {
  namespace fs = std::filesystem;
  const std::string golden = test::golden_file("llama-gqa"), exported = test::golden_file("llama-export");
  checkpoint::HfCheckpoint source(golden);
  const model::GptConfig cfg = source.config();
  const model::ModelSpec spec = model::model_spec(cfg);
  Arena full("full");
  model::reserve_params(full, spec);
  full.allocate();
  source.load(full);
  const fs::path tmp = fs::temp_directory_path() / ("axonn-llama-export-" + std::to_string(::getpid()));
  checkpoint::save_hf_dir(tmp.string(), cfg, full, DType::kF32, 100000);
  auto bytes = [](const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  int files = 0;
  for (const auto& e : fs::directory_iterator(tmp)) {
    EXPECT_EQ(bytes(e.path()), bytes(fs::path(exported) / e.path().filename())) << e.path().filename();
    files++;
  }
  EXPECT_EQ(files, 7) << "config.json, generation_config.json, the index and 4 shards";
  fs::remove_all(tmp);

  // the model from the export, on one rank: its logits against the oracle's
  const int B = 3, T = 13, V = cfg.vocab_size;
  auto world = comm::world();
  parallel::Grid grid({1, 1, 1, 1}, world);
  model::Gpt gpt(cfg, grid, B, T, kernels::Backend::kCpu);
  checkpoint::HfCheckpoint hf(exported);
  Arena back("back");
  model::reserve_params(back, spec);
  back.allocate();
  hf.load(back);
  for (int i = 0; i < static_cast<int>(spec.params.size()); i++) {
    Tensor t = back.tensor(static_cast<size_t>(i));
    const bool per_layer = spec.params[static_cast<size_t>(i)].per_layer;
    for (int l = 0; l < (per_layer ? cfg.num_layers : 1); l++) gpt.load_full_layer(i, l, per_layer ? t[l].f32() : t.f32());
  }
  data::TokenShard tokens(golden + "/tokens.bin", V);
  std::vector<int> in(B * T);
  for (int i = 0; i < B * T; i++) in[static_cast<size_t>(i)] = tokens.token(i);
  gpt.forward(in.data(), nullptr);
  const float* logits = gpt.output().f32();
  std::ifstream f(exported + "/logits.txt");
  std::string line;
  double worst = 0;
  int rows = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    for (int v = 0; v < V; v++) {
      double want = 0;
      is >> want;
      worst = std::max(worst, std::fabs(logits[static_cast<size_t>(rows) * gpt.vocab_rows() + v] - want));
    }
    rows++;
  }
  EXPECT_EQ(rows, B * T);
  EXPECT_LE(worst, 1e-5) << "axonn's logits against the oracle's, from the same export";
  std::printf("logits of axonn's export: max |axonn - oracle| = %.3g over %d x %d\n", worst, rows, V);
}

TEST(Train, BuiltInDefaultLearns) {
  train::TrainConfig c;  // gpt2-tiny shape, synthetic corpus
  c.steps = 100;
  c.batch_size = 8;
  c.lr = 1e-2f;
  c.warmup_steps = 10;
  c.peak_gflops = 100;
  c.quiet = true;
  auto h = train::train(c, comm::world());
  ASSERT_EQ(h.size(), 100u);
  EXPECT_GT(h.front().loss, 6.0f);  // ln(500) = 6.2 at init
  EXPECT_LT(h.back().loss, 3.5f) << "the loss did not fall";
  EXPECT_GT(h.front().tokens_per_s, 0);
  EXPECT_GT(h.front().mfu, 0);
}

TEST(Train, RejectsBadConfiguration) {
  auto bad = [](auto mutate) {
    train::TrainConfig c;
    c.peak_gflops = 100;
    c.quiet = true;
    c.steps = 1;
    mutate(c);
    EXPECT_THROW(train::train(c, comm::world()), InvalidArgument);
  };
  bad([](auto& c) { c.batch_size = 0; });
  bad([](auto& c) { c.seq_len = -3; });
  bad([](auto& c) { c.steps = 0; });
  bad([](auto& c) { c.seq_len = 65; });  // gpt2-tiny has maxT 64
  bad([](auto& c) { c.grad_clip = -1; });
  bad([](auto& c) { c.lr_schedule = "step"; });  // constant, cosine, linear and wsd exist
  bad([](auto& c) { c.kernels = "tpu"; });
  bad([](auto& c) { c.gemm = "mkl"; });
  bad([](auto& c) { c.model = "gpt9"; });
  bad([](auto& c) { c.channels = 66; });  // not divisible by 4 heads
  bad([](auto& c) {
    c.init = test::reference_file("gpt2-tiny/model.bin");
    c.layers = 3;
  });
}
