// Generation with the KV cache (infer::Generator, model::Gpt::forward_cached), GPT-2 and Llama (GQA,
// tied, RoPE scaling), on every 4D grid of this world's size:
//   * greedy decoding with the cache equals greedy decoding by the training forward (Gpt::forward
//     without targets) over the whole prefix at each step, token for token, over 64 new tokens, and
//     equals one rank's;
//   * the logits of every position of a prefill (and of chunked prefill + decode) match the training
//     forward's to 1e-5;
//   * seeded sampling (temperature 1, top-k, top-p) gives one rank's samples on every grid; another
//     seed gives other samples;
//   * prompts of different lengths in one batch give each prompt's own continuation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/infer/generator.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/model/gpt.hpp"
#include "common/grid_shapes.hpp"
#include "common/test_models.hpp"
#include "tensor_expect.hpp"

namespace axonn {
namespace {

constexpr int kNewTokens = 64, kSeed = 11;

// The parallel tests' tiny models with room for a prompt and 64 new tokens.
std::vector<model::GptConfig> configs() {
  std::vector<model::GptConfig> out = {test::tiny_gpt2(), test::tiny_llama_gqa(), test::tiny_llama_tied_scaled()};
  for (auto& c : out) c.max_seq_len = 80;
  return out;
}

// Random weights 8x the initialisation's (std 0.16 instead of 0.02): attention then depends on the
// context enough that a wrong position or cache entry changes the greedy tokens. Every grid scales its
// shards alike: the same model.
void init_sharp(model::Gpt& gpt, float scale = 8.0f) {
  gpt.init_random(kSeed);
  for (size_t i = 0; i < gpt.params().size(); i++) {
    Tensor p = gpt.params().tensor(i);
    for (int64_t j = 0; j < p.numel(); j++) p.f32()[j] *= scale;
  }
  gpt.weights_updated();
}

std::shared_ptr<comm::Communicator> self_world() {
  auto world = comm::world();
  return std::shared_ptr<comm::Communicator>(world->split(world->rank(), 0, "self"));
}

// Calls f(grid) for every grid of this world's size that admits the model (the same on every rank).
template <class F>
int for_each_grid(const model::GptConfig& cfg, F f) {
  auto world = comm::world();
  int tried = 0;
  for (const parallel::GridShape& shape : test::grid_shapes(world->size())) {
    auto grid = std::make_unique<parallel::Grid>(shape, world);
    try {
      model::Gpt probe(cfg, *grid, 1, 1, kernels::Backend::kCpu);
    } catch (const InvalidArgument&) {
      continue;  // a grid this model does not admit (thrown alike on every rank, before any collective)
    }
    SCOPED_TRACE(grid->str());
    tried++;
    f(*grid);
  }
  return tried;
}

// The training forward's full-vocabulary logits [B*T, V]: each rank's vocabulary columns placed into a
// zeroed row and summed over X*Y.
std::vector<float> training_logits(model::Gpt& gpt, const std::vector<int>& inputs) {
  gpt.forward(inputs.data(), nullptr);
  const model::GptConfig& c = gpt.config();
  const int64_t rows = static_cast<int64_t>(gpt.batch_size()) * gpt.seq_len();
  const int Vp = c.padded_vocab_size, Vr = gpt.vocab_rows();
  std::vector<float> full(static_cast<size_t>(rows) * Vp, 0.0f);
  const float* mine = gpt.output().f32();
  for (int64_t r = 0; r < rows; r++)
    for (int j = 0; j < Vr; j++) full[static_cast<size_t>(r * Vp + gpt.vocab_begin() + j)] = mine[r * Vr + j];
  gpt.grid().xy().all_reduce(full.data(), full.size(), DType::kF32);
  std::vector<float> out(static_cast<size_t>(rows) * c.vocab_size);
  for (int64_t r = 0; r < rows; r++)
    std::copy_n(full.begin() + r * Vp, c.vocab_size, out.begin() + r * c.vocab_size);
  return out;
}

int argmax(const float* row, int V) {
  int best = 0;
  for (int i = 1; i < V; i++)
    if (row[i] > row[best]) best = i;
  return best;
}

// Greedy decoding by the training forward: at each step the whole sequence so far (padded to T; causal
// attention keeps the padding out of the positions before it), the argmax at its last position.
std::vector<int> greedy_by_recompute(const model::GptConfig& cfg, const parallel::Grid& grid,
                                     const std::vector<int>& prompt, int T) {
  model::Gpt gpt(cfg, grid, 1, T, kernels::Backend::kCpu);
  init_sharp(gpt);
  std::vector<int> seq = prompt, out;
  for (int i = 0; i < kNewTokens; i++) {
    std::vector<int> padded = seq;
    padded.resize(static_cast<size_t>(T), 0);
    const std::vector<float> logits = training_logits(gpt, padded);
    const int next = argmax(logits.data() + (seq.size() - 1) * cfg.vocab_size, cfg.vocab_size);
    seq.push_back(next);
    out.push_back(next);
  }
  return out;
}

infer::GenerateOptions greedy(int n) {
  infer::GenerateOptions o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0.0f;
  return o;
}

const std::vector<int> kPromptA = {3, 14, 15, 9, 2}, kPromptB = {65, 35};

}  // namespace

TEST(Generate, GreedyWithKvCacheEqualsRecomputingThePrefixOnEveryGrid) {
  for (const model::GptConfig& cfg : configs()) {
    SCOPED_TRACE(cfg.str());
    const int T = static_cast<int>(kPromptA.size()) + kNewTokens;
    parallel::Grid one({1, 1, 1, 1}, self_world());
    const std::vector<int> single = greedy_by_recompute(cfg, one, kPromptA, T);
    const int tried = for_each_grid(cfg, [&](const parallel::Grid& grid) {
      infer::Generator gen(cfg, grid, 1, T, kernels::Backend::kCpu);
      init_sharp(gen.model());
      const std::vector<std::vector<int>> cached = gen.generate(kPromptA, greedy(kNewTokens));
      ASSERT_EQ(cached.size(), 1u);
      EXPECT_EQ(cached[0], greedy_by_recompute(cfg, grid, kPromptA, T)) << "KV cache vs recompute";
      EXPECT_EQ(cached[0], single) << "this grid vs one rank";
      EXPECT_EQ(gen.last_stats().new_tokens, kNewTokens);
    });
    EXPECT_GT(tried, 0);
  }
}

TEST(Generate, PrefillAndDecodeLogitsMatchTheTrainingForward) {
  for (const model::GptConfig& cfg : configs()) {
    SCOPED_TRACE(cfg.str());
    constexpr int B = 2, T = 12;
    const std::vector<int> tokens = test::randint(B * T, cfg.vocab_size, 5);
    for_each_grid(cfg, [&](const parallel::Grid& grid) {
      model::Gpt gpt(cfg, grid, B, T, kernels::Backend::kCpu);
      gpt.init_random(kSeed);
      const std::vector<float> want = training_logits(gpt, tokens);
      const int V = cfg.vocab_size;
      // one chunk: every position's logits
      std::vector<float> got(static_cast<size_t>(B) * T * V);
      gpt.forward_cached(tokens.data(), 0, T, got.data(), /*all_positions=*/true);
      EXPECT_TRUE(test::allclose(got, want, 1e-5f, 1e-5f)) << "prefill of " << T;
      // a prefill of 5, then one position at a time: each sequence's last position
      constexpr int P = 5;
      std::vector<int> chunk(static_cast<size_t>(B) * P);
      for (int b = 0; b < B; b++) std::copy_n(tokens.begin() + b * T, P, chunk.begin() + b * P);
      std::vector<float> last(static_cast<size_t>(B) * V);
      gpt.forward_cached(chunk.data(), 0, P, last.data());
      for (int pos = P - 1; pos < T; pos++) {
        if (pos >= P) {
          const int step[B] = {tokens[static_cast<size_t>(pos)], tokens[static_cast<size_t>(T + pos)]};
          gpt.forward_cached(step, pos, 1, last.data());
        }
        for (int b = 0; b < B; b++)
          EXPECT_TRUE(test::allclose(last.data() + b * V, want.data() + (static_cast<size_t>(b) * T + pos) * V,
                                     static_cast<size_t>(V), 1e-5f, 1e-5f))
              << "sequence " << b << " position " << pos;
      }
    });
  }
}

TEST(Generate, SameSeedSameSamplesOnEveryGridAnotherSeedOthers) {
  for (const model::GptConfig& cfg : configs()) {
    SCOPED_TRACE(cfg.str());
    constexpr int S = 3, N = 40;
    const int T = static_cast<int>(kPromptA.size()) + N;
    infer::GenerateOptions o;
    o.max_new_tokens = N;
    o.sampling = {1.0f, 30, 0.9f, 1234};
    infer::GenerateOptions other = o;
    other.sampling.seed = 1235;
    parallel::Grid one({1, 1, 1, 1}, self_world());
    infer::Generator single(cfg, one, S, T, kernels::Backend::kCpu);
    single.model().init_random(kSeed);
    const auto want = single.generate(kPromptA, o);
    // the samples differ from each other (a different sample index draws differently)
    EXPECT_NE(want[0], want[1]);
    for_each_grid(cfg, [&](const parallel::Grid& grid) {
      infer::Generator gen(cfg, grid, S, T, kernels::Backend::kCpu);
      gen.model().init_random(kSeed);
      EXPECT_EQ(gen.generate(kPromptA, o), want) << "seed " << o.sampling.seed;
      const auto others = gen.generate(kPromptA, other);
      for (int s = 0; s < S; s++) EXPECT_NE(others[static_cast<size_t>(s)], want[static_cast<size_t>(s)]) << "sample " << s;
    });
  }
}

TEST(Generate, PromptsOfDifferentLengthsInOneBatchGetTheirOwnContinuations) {
  for (const model::GptConfig& cfg : configs()) {
    SCOPED_TRACE(cfg.str());
    constexpr int N = 20;
    const int T = static_cast<int>(kPromptA.size()) + N;
    for_each_grid(cfg, [&](const parallel::Grid& grid) {
      infer::Generator alone(cfg, grid, 1, T, kernels::Backend::kCpu), both(cfg, grid, 2, T, kernels::Backend::kCpu);
      init_sharp(alone.model());
      init_sharp(both.model());
      const auto a = alone.generate(kPromptA, greedy(N)), b = alone.generate(kPromptB, greedy(N));
      const auto ab = both.generate({kPromptB, kPromptA}, greedy(N));
      EXPECT_EQ(ab[0], b[0]);
      EXPECT_EQ(ab[1], a[0]);
      // fewer prompts than sequences: the batch is filled, only the prompts' continuations come back
      const auto only_b = both.generate(std::vector<std::vector<int>>{kPromptB}, greedy(N));
      ASSERT_EQ(only_b.size(), 1u);
      EXPECT_EQ(only_b[0], b[0]);
    });
  }
}

TEST(Generate, StopsAtAStopIdAndAtTheContextsEnd) {
  const model::GptConfig cfg = configs()[0];
  parallel::Grid one({1, 1, 1, 1}, self_world());
  infer::Generator gen(cfg, one, 1, 12, kernels::Backend::kCpu);
  gen.model().init_random(kSeed);
  const auto full = gen.generate(kPromptA, greedy(100));
  ASSERT_EQ(full[0].size(), 12u - kPromptA.size());  // positions [5, 12) of the context
  infer::GenerateOptions o = greedy(100);
  o.stop_ids = {full[0][2]};
  const auto stopped = gen.generate(kPromptA, o);
  const auto first = std::find(full[0].begin(), full[0].end(), full[0][2]);
  EXPECT_EQ(stopped[0], std::vector<int>(full[0].begin(), first + 1));  // up to the stop id, included
}

// The decode's thread search (infer/decode_threads.hpp) goes on from one generate() to the next: memorization
// calls it once per batch of documents, and each call began again at the command's threads, with its trials.
TEST(Generate, TheDecodesThreadSearchGoesOnFromOneCallToTheNext) {
  const model::GptConfig cfg = configs()[0];
  parallel::Grid one({1, 1, 1, 1}, self_world());
  const int threads = kernels::cpu_threads();
  kernels::set_cpu_threads(2);
  infer::Generator gen(cfg, one, 1, 80, kernels::Backend::kCpu);
  gen.model().init_random(kSeed);
  (void)gen.generate(kPromptA, greedy(40));  // 39 decode steps: the first epoch's trials (9 steps) end
  EXPECT_GT(gen.last_stats().decode_threads, 0);
  (void)gen.generate(kPromptA, greedy(3));  // 2 decode steps, too few for trials of their own
  EXPECT_GT(gen.last_stats().decode_threads, 0) << "the second call began the search again";
  EXPECT_EQ(kernels::cpu_threads(), 2) << "the command's threads are restored after each call";
  kernels::set_cpu_threads(threads);
}

TEST(Generate, BadPromptsAndOptionsAreRefused) {
  const model::GptConfig cfg = configs()[0];
  parallel::Grid one({1, 1, 1, 1}, self_world());
  infer::Generator gen(cfg, one, 1, 8, kernels::Backend::kCpu);
  EXPECT_THROW(gen.generate(std::vector<int>{}, greedy(4)), InvalidArgument);
  EXPECT_THROW(gen.generate(std::vector<std::vector<int>>{kPromptB, kPromptB}, greedy(4)), InvalidArgument);  // 2 > 1
  EXPECT_THROW(gen.generate(std::vector<int>(8, 1), greedy(4)), InvalidArgument);  // no room left
  EXPECT_THROW(gen.generate(std::vector<int>{70}, greedy(4)), InvalidArgument);    // outside the vocabulary
  infer::GenerateOptions o = greedy(4);
  o.sampling.temperature = -1;
  EXPECT_THROW(gen.generate(kPromptB, o), InvalidArgument);
  o = greedy(4);
  o.sampling.top_p = 0;
  EXPECT_THROW(gen.generate(kPromptB, o), InvalidArgument);
  EXPECT_THROW(infer::Generator(cfg, one, 1, 81, kernels::Backend::kCpu), InvalidArgument);
}

}  // namespace axonn

namespace axonn {

// An inference model (GptRunOptions::inference, as infer::Generator builds it) allocates no gradients,
// refuses the calls of training, and its LM head by chunks of rows gives the logits of the model that
// computes the head at once, on every grid.
TEST(Generate, AnInferenceModelHasNoGradientsAndTheLogitsOfTheWholeHead) {
  for (const model::GptConfig& cfg : configs()) {
    SCOPED_TRACE(cfg.str());
    constexpr int B = 2, T = 12;
    const std::vector<int> tokens = test::randint(B * T, cfg.vocab_size, 7);
    for_each_grid(cfg, [&](const parallel::Grid& grid) {
      model::Gpt whole(cfg, grid, B, T, kernels::Backend::kCpu);
      whole.init_random(kSeed);
      model::GptRunOptions run;
      run.inference = true;
      run.recompute = true;
      run.lm_head_chunk = 5;  // 24 rows: chunks of 5, 5, 5, 5, 4
      model::Gpt inference(cfg, grid, B, T, kernels::Backend::kCpu, run);
      inference.init_random(kSeed);
      EXPECT_EQ(inference.grad_bytes(), 0u);
      EXPECT_EQ(model::Gpt::memory_need(cfg, grid.shape(), grid.coords(), B, T, kernels::Backend::kCpu, run, true).grads,
                0u);
      EXPECT_EQ(infer::Generator::memory_need(cfg, grid.shape(), grid.coords(), B, T, kernels::Backend::kCpu).grads, 0u);
      const int V = cfg.vocab_size;
      std::vector<float> want(static_cast<size_t>(B) * T * V), got(want.size());
      whole.forward_cached(tokens.data(), 0, T, want.data(), /*all_positions=*/true);
      inference.forward_cached(tokens.data(), 0, T, got.data(), /*all_positions=*/true);
      EXPECT_TRUE(test::allclose(got, want, 1e-6f, 1e-6f));
      EXPECT_THROW(inference.zero_grad(), InvalidArgument);
      EXPECT_THROW(inference.backward(), InvalidArgument);
      EXPECT_THROW(inference.grad_norm(), InvalidArgument);
      EXPECT_THROW(inference.forward(tokens.data(), tokens.data(), nullptr, model::ForwardOptions{1.0, {}}),
                   InvalidArgument);
    });
  }
}

// Loading a shard by pieces of the full tensors (Gpt::load_full_range, as the HF reader delivers them) fills
// the shard load_full_layer fills from the whole layer, bit for bit, on every grid.
TEST(Generate, LoadingByRangesEqualsLoadingWholeLayers) {
  for (const model::GptConfig& cfg : configs()) {
    SCOPED_TRACE(cfg.str());
    for_each_grid(cfg, [&](const parallel::Grid& grid) {
      model::Gpt by_layer(cfg, grid, 1, 4, kernels::Backend::kCpu), by_range(cfg, grid, 1, 4, kernels::Backend::kCpu);
      const model::ModelSpec& spec = by_layer.spec();
      for (int t = 0; t < static_cast<int>(spec.params.size()); t++) {
        const int layers = spec.params[static_cast<size_t>(t)].per_layer ? cfg.num_layers : 1;
        const int64_t n = by_layer.full_layer_numel(t);
        for (int l = 0; l < layers; l++) {
          std::vector<float> full(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; i++) full[static_cast<size_t>(i)] = static_cast<float>(t * 1000003 + l * 7919 + i);
          by_layer.load_full_layer(t, l, full.data());
          // three uneven pieces, the last one first
          const int64_t a = n / 3, b = n / 3 + n / 5;
          by_range.load_full_range(t, l, b, n - b, full.data() + b);
          by_range.load_full_range(t, l, 0, a, full.data());
          by_range.load_full_range(t, l, a, b - a, full.data() + a);
        }
      }
      for (size_t i = 0; i < spec.params.size(); i++)
        EXPECT_TRUE(test::allclose(by_range.params().tensor(i).f32(), by_layer.params().tensor(i).f32(),
                                   static_cast<size_t>(by_layer.params().tensor(i).numel()), 0.0f, 0.0f))
            << spec.params[i].name;
    });
  }
}

}  // namespace axonn

namespace axonn {
namespace {

// log-softmax of each row of V logits
std::vector<double> log_softmax_rows(const std::vector<float>& logits, int V) {
  std::vector<double> out(logits.size());
  for (size_t r = 0; r < logits.size() / static_cast<size_t>(V); r++) {
    const float* x = logits.data() + r * static_cast<size_t>(V);
    double m = x[0], sum = 0.0;
    for (int i = 1; i < V; i++) m = std::max(m, static_cast<double>(x[i]));
    for (int i = 0; i < V; i++) sum += std::exp(x[i] - m);
    for (int i = 0; i < V; i++) out[r * static_cast<size_t>(V) + static_cast<size_t>(i)] = x[i] - m - std::log(sum);
  }
  return out;
}

// A prefill of P positions, then one position at a time up to T: each step's last-position logits [T - P + 1, B, V].
std::vector<float> cached_logits(model::Gpt& gpt, const std::vector<int>& tokens, int B, int T, int P) {
  const int V = gpt.config().vocab_size;
  std::vector<float> out, last(static_cast<size_t>(B) * V);
  std::vector<int> chunk(static_cast<size_t>(B) * P);
  for (int b = 0; b < B; b++) std::copy_n(tokens.begin() + b * T, P, chunk.begin() + b * P);
  gpt.forward_cached(chunk.data(), 0, P, last.data());
  out.insert(out.end(), last.begin(), last.end());
  for (int pos = P; pos < T; pos++) {
    std::vector<int> step(static_cast<size_t>(B));
    for (int b = 0; b < B; b++) step[static_cast<size_t>(b)] = tokens[static_cast<size_t>(b * T + pos)];
    gpt.forward_cached(step.data(), pos, 1, last.data());
    out.insert(out.end(), last.begin(), last.end());
  }
  return out;
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace

// bf16 inference (generate --dtype bf16): the model keeps bf16 weights only (no fp32 arena: half the weights'
// bytes), and its log-probabilities over a prefill and a decode follow fp32's within bf16's bound, on every
// grid and against one rank's bf16. The weights are 2x the initialisation's: there, bf16 moves a
// log-probability by at most 0.011 (measured over the three models), while another context moves them by 1 to
// 1.5, so a wrong cache entry or position cannot hide. (At 8x, the sharp weights of the tests above, bf16's own
// rounding grows through the layers: two correct bf16 forwards differ by up to 0.9 in a logit.)
TEST(Generate, Bf16InferenceHoldsBf16WeightsOnlyAndFollowsFp32) {
  constexpr double kBound = 0.03;  // largest |log p(bf16) - log p(fp32)| over every id, position and model
  constexpr float kScale = 2.0f;
  double worst_seen = 0.0;
  for (const model::GptConfig& cfg : configs()) {
    SCOPED_TRACE(cfg.str());
    constexpr int B = 2, T = 14, P = 5;
    const int V = cfg.vocab_size;
    const std::vector<int> tokens = test::randint(B * T, V, 9);
    parallel::Grid one({1, 1, 1, 1}, self_world());
    infer::Generator one16(cfg, one, B, T, kernels::Backend::kCpu, DType::kBF16);
    {
      infer::Generator one32(cfg, one, B, T, kernels::Backend::kCpu);
      init_sharp(one32.model(), kScale);
      one16.model().load_params(one32.model().params());
    }
    const std::vector<double> single16 = log_softmax_rows(cached_logits(one16.model(), tokens, B, T, P), V);
    for_each_grid(cfg, [&](const parallel::Grid& grid) {
      infer::Generator gen32(cfg, grid, B, T, kernels::Backend::kCpu);
      infer::Generator gen16(cfg, grid, B, T, kernels::Backend::kCpu, DType::kBF16);
      init_sharp(gen32.model(), kScale);
      gen16.model().load_params(gen32.model().params());
      EXPECT_FALSE(gen16.model().keeps_fp32_weights());
      EXPECT_FALSE(gen16.model().params().allocated());
      const model::GptMemory m32 = infer::Generator::memory_need(cfg, grid.shape(), grid.coords(), B, T,
                                                                 kernels::Backend::kCpu),
                             m16 = infer::Generator::memory_need(cfg, grid.shape(), grid.coords(), B, T,
                                                                 kernels::Backend::kCpu, DType::kBF16);
      EXPECT_EQ(m16.params, gen16.model().param_bytes());
      EXPECT_LE(static_cast<double>(m16.params), 0.55 * static_cast<double>(m32.params));
      EXPECT_LT(m16.activations, m32.activations);  // the KV cache and activations in bf16

      const std::vector<double> lp32 = log_softmax_rows(cached_logits(gen32.model(), tokens, B, T, P), V);
      const std::vector<double> lp16 = log_softmax_rows(cached_logits(gen16.model(), tokens, B, T, P), V);
      const double vs_fp32 = max_abs_difference(lp16, lp32), vs_one = max_abs_difference(lp16, single16);
      worst_seen = std::max(worst_seen, vs_fp32);
      EXPECT_LE(vs_fp32, kBound) << "bf16 against fp32";
      EXPECT_LE(vs_one, kBound) << "bf16 on this grid against bf16 on one rank";
      // and greedy generation runs in bf16 to its end
      EXPECT_EQ(gen16.generate(kPromptA, greedy(T - static_cast<int>(kPromptA.size())))[0].size(),
                static_cast<size_t>(T) - kPromptA.size());
    });
  }
  std::printf("bf16 inference: largest |log p(bf16) - log p(fp32)| %.4f (bound %.2f)\n", worst_seen, kBound);
}

}  // namespace axonn
