// The GPT-2 model: cpu kernels against ref kernels end to end, finite-difference gradients of the
// whole model, initialisation, shapes and configuration errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"
#include "tensor_expect.hpp"

using namespace axonn;
using model::Gpt;
using model::GptConfig;
using model::Param;

namespace {

GptConfig odd_config() {
  GptConfig c;
  c.max_seq_len = 16;
  c.vocab_size = 61;
  c.padded_vocab_size = 64;
  c.num_layers = 2;
  c.num_heads = 3;
  c.channels = 18;
  return c;
}

double stddev(const float* x, int64_t n) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) {
    s += x[i];
    s2 += (double)x[i] * x[i];
  }
  double m = s / n;
  return std::sqrt(s2 / n - m * m);
}

// A 1x1x1x1 grid over this process (MPI singleton), for the single-rank model.
struct OneRank {
  std::shared_ptr<comm::Communicator> world = comm::world();
  parallel::Grid grid{{1, 1, 1, 1}, world};
};

}  // namespace

TEST(GptConfig, ParameterCountOfGpt2Small) {
  EXPECT_EQ(model::gpt_preset("gpt2-124m").num_parameters(), 124475904);
  EXPECT_EQ(model::gpt_preset("gpt2-124m").padded_vocab_size, 50304);
}

TEST(GptConfig, HuggingFaceNamesAreAliases) {
  const std::pair<const char*, const char*> names[] = {
      {"gpt2", "gpt2-124m"}, {"gpt2-medium", "gpt2-350m"}, {"gpt2-large", "gpt2-774m"}, {"gpt2-xl", "gpt2-1558m"}};
  for (const auto& [alias, preset] : names) {
    const GptConfig a = model::gpt_preset(alias), b = model::gpt_preset(preset);
    EXPECT_EQ(a.num_layers, b.num_layers) << alias;
    EXPECT_EQ(a.num_heads, b.num_heads) << alias;
    EXPECT_EQ(a.channels, b.channels) << alias;
    EXPECT_EQ(a.vocab_size, b.vocab_size) << alias;
  }
  EXPECT_EQ(model::gpt_preset("gpt2-xl").num_layers, 48);
}

TEST(GptConfig, RejectsBadShapes) {
  OneRank one;
  GptConfig c = odd_config();
  c.num_heads = 4;  // 18 % 4 != 0
  EXPECT_THROW(c.validate(), InvalidArgument);
  c = odd_config();
  c.num_layers = 0;
  EXPECT_THROW(c.validate(), InvalidArgument);
  // sizes whose derived widths or parameter count would overflow (found by fuzz_llmc_model)
  for (auto set : {+[](GptConfig& g) { g.channels = 982582272; }, +[](GptConfig& g) {
                     g.num_layers = 1 << 20;
                     g.channels = 3 << 20;
                   },
                   +[](GptConfig& g) { g.padded_vocab_size = (1 << 24) + 128; }}) {
    c = odd_config();
    set(c);
    EXPECT_THROW(c.validate(), InvalidArgument);
  }
  EXPECT_THROW(model::gpt_preset("gpt5"), InvalidArgument);
  EXPECT_THROW(Gpt(odd_config(), one.grid, 2, 17, kernels::Backend::kCpu), InvalidArgument);  // T > maxT
  EXPECT_THROW(Gpt(odd_config(), one.grid, 0, 4, kernels::Backend::kCpu), InvalidArgument);
}

// The memory check's estimate (Gpt::memory_need, before any model exists) is what the model then holds,
// for every option that changes an arena: precision, recompute, the head's chunks, the block kind, the
// KV cache (after a forward_cached has filled it).
TEST(Gpt, MemoryNeedIsWhatTheModelAllocates) {
  OneRank r;
  struct Case {
    const char* preset;
    DType precision;
    bool recompute;
    int lm_head_chunk;
  };
  for (const Case& k : {Case{"gpt2-tiny", DType::kF32, false, 0}, Case{"gpt2-tiny", DType::kBF16, true, 16},
                        Case{"llama-tiny", DType::kF32, true, 0}, Case{"llama-tiny", DType::kBF16, false, 7}}) {
    model::GptRunOptions run;
    run.precision = k.precision;
    run.recompute = k.recompute;
    run.lm_head_chunk = k.lm_head_chunk;
    const GptConfig c = model::gpt_preset(k.preset);
    const model::GptMemory need = model::Gpt::memory_need(c, r.grid.shape(), r.grid.coords(), 3, 16,
                                                          kernels::Backend::kCpu, run);
    model::Gpt gpt(c, r.grid, 3, 16, kernels::Backend::kCpu, run);
    SCOPED_TRACE(k.preset);
    EXPECT_EQ(need.params, gpt.param_bytes());
    EXPECT_EQ(need.grads, gpt.grad_bytes());
    EXPECT_EQ(need.activations, gpt.activation_bytes());
    EXPECT_EQ(need.comm_buffers, gpt.comm_buffer_bytes());
    if (k.precision != DType::kF32) continue;  // the KV cache is fp32 only
    gpt.init_random(1);
    std::vector<int> tokens(3 * 2, 1);
    std::vector<float> logits(static_cast<size_t>(3 * c.vocab_size));
    gpt.forward_cached(tokens.data(), 0, 2, logits.data());
    EXPECT_EQ(model::Gpt::memory_need(c, r.grid.shape(), r.grid.coords(), 3, 16, kernels::Backend::kCpu, run, true)
                  .activations,
              gpt.activation_bytes());
  }
}

TEST(Gpt, RejectsTokensOutsideVocabulary) {
  OneRank one;
  Gpt g(odd_config(), one.grid, 1, 4, kernels::Backend::kCpu);
  g.init_random(1);
  std::vector<int> in = {1, 2, 61, 3}, tg = {2, 3, 4, 5};
  EXPECT_THROW(g.forward(in.data(), tg.data()), InvalidArgument);
}

TEST(Gpt, InitialisationFollowsGpt2AndIsCounterBased) {
  OneRank one;
  GptConfig c = odd_config();
  c.channels = 96;
  c.num_heads = 4;
  Gpt g(c, one.grid, 1, 4, kernels::Backend::kRef);
  g.init_random(42);
  Tensor wte = g.param(Param::kWte);
  EXPECT_NEAR(stddev(wte.f32(), (int64_t)c.vocab_size * c.channels), 0.02, 0.002);
  for (int64_t i = (int64_t)c.vocab_size * c.channels; i < wte.numel(); i++) ASSERT_EQ(wte.f32()[i], 0.0f);
  Tensor ap = g.param(Param::kAttprojw);
  EXPECT_NEAR(stddev(ap.f32(), ap.numel()), 0.02 / std::sqrt(2.0 * c.num_layers), 0.001);
  EXPECT_EQ(g.param(Param::kLn1w).f32()[5], 1.0f);
  EXPECT_EQ(g.param(Param::kLnfb).f32()[5], 0.0f);
  EXPECT_EQ(g.param(Param::kQkvb).f32()[7], 0.0f);
  // the same seed gives the same weights; another seed others; and an element's value does not
  // depend on the rest of the model (layer 0 of qkvw is the same with one more layer)
  Gpt g2(c, one.grid, 1, 4, kernels::Backend::kRef);
  g2.init_random(42);
  EXPECT_TRUE(test::allclose(g2.param(Param::kQkvw).f32(), g.param(Param::kQkvw).f32(),
                             g.param(Param::kQkvw).numel(), 0, 0));
  GptConfig c3 = c;
  c3.num_layers = 3;
  Gpt g3(c3, one.grid, 1, 4, kernels::Backend::kRef);
  g3.init_random(42);
  EXPECT_TRUE(test::allclose(g3.param(Param::kQkvw)[0].f32(), g.param(Param::kQkvw)[0].f32(),
                             g.param(Param::kQkvw)[0].numel(), 0, 0));
  g3.init_random(43);
  EXPECT_NE(g3.param(Param::kQkvw).f32()[0], g.param(Param::kQkvw).f32()[0]);
}

TEST(Gpt, CpuKernelsMatchRefKernelsEndToEnd) {
  OneRank one;
  const int B = 3, T = 11;
  GptConfig c = odd_config();
  Gpt fast(c, one.grid, B, T, kernels::Backend::kCpu), slow(c, one.grid, B, T, kernels::Backend::kRef);
  fast.init_random(7);
  slow.init_random(7);
  auto in = test::randint(B * T, c.vocab_size, 1), tg = test::randint(B * T, c.vocab_size, 2);
  float lf = fast.forward(in.data(), tg.data()), ls = slow.forward(in.data(), tg.data());
  EXPECT_NEAR(lf, ls, 1e-5f);
  EXPECT_NEAR(lf, std::log((float)c.vocab_size), 0.1f);  // near-uniform predictions at init
  fast.zero_grad();
  slow.zero_grad();
  fast.backward();
  slow.backward();
  for (int i = 0; i < model::kGpt2Tensors; i++) {
    auto p = static_cast<Param>(i);
    EXPECT_TRUE(test::allclose(fast.grad(p).f32(), slow.grad(p).f32(), fast.grad(p).numel(), 1e-6f, 1e-3f))
        << fast.spec().params[static_cast<size_t>(p)].name;
  }
}

TEST(Gpt, BackwardMatchesFiniteDifferencesOfTheLoss) {
  OneRank one;
  const int B = 2, T = 5;
  GptConfig c = odd_config();
  Gpt g(c, one.grid, B, T, kernels::Backend::kRef);
  g.init_random(3);
  // larger weights than GPT-2's init, so that every gradient is well above fp32 noise
  for (size_t s = 0; s < g.params().size(); s++) {
    Tensor t = g.params().tensor(s);
    auto noise = test::randn(t.numel(), 100 + (uint32_t)s, 0.3f);
    for (int64_t j = 0; j < t.numel(); j++) t.f32()[j] += noise[j];
  }
  auto in = test::randint(B * T, c.vocab_size, 1), tg = test::randint(B * T, c.vocab_size, 2);
  g.forward(in.data(), tg.data());
  g.zero_grad();
  g.backward();
  int checked = 0;
  for (int i = 0; i < model::kGpt2Tensors; i++) {
    auto p = static_cast<Param>(i);
    float* w = g.param(p).f32();
    const float* dw = g.grad(p).f32();
    // the element with the largest gradient in each tensor
    int64_t best = 0;
    for (int64_t j = 0; j < g.param(p).numel(); j++)
      if (std::fabs(dw[j]) > std::fabs(dw[best])) best = j;
    const float h = 1e-2f;
    float w0 = w[best];
    w[best] = w0 + h;
    double lp = g.forward(in.data(), tg.data());
    w[best] = w0 - h;
    double lm = g.forward(in.data(), tg.data());
    w[best] = w0;
    double fd = (lp - lm) / (2 * h);
    EXPECT_NEAR(dw[best], fd, 2e-3 + 3e-2 * std::fabs(fd)) << g.spec().params[static_cast<size_t>(p)].name << "[" << best << "]";
    checked++;
  }
  EXPECT_EQ(checked, model::kGpt2Tensors);
}

// A training forward (ForwardOptions::loss_scale) takes the LM head's gradient itself. With the head all
// at once it runs the same kernels on the same buffers in the same order as the backward did, so every
// gradient and loss keeps its bits, in both precisions and with a mask. By chunks (7 rows of 33) it
// computes no logits again; its chunks' weight gradients are summed first to last (the backward's
// recompute goes last to first), so they match to rounding.
TEST(Gpt, TrainingForwardTakesTheHeadsGradient) {
  OneRank one;
  const int B = 3, T = 11;
  const GptConfig c = odd_config();
  auto in = test::randint(B * T, c.vocab_size, 1), tg = test::randint(B * T, c.vocab_size, 2);
  std::vector<uint8_t> keep(static_cast<size_t>(B * T));
  for (size_t i = 0; i < keep.size(); i++) keep[i] = i % 3 != 1;
  for (DType precision : {DType::kF32, DType::kBF16})
    for (int chunk : {0, 7})
      for (const uint8_t* mask : {static_cast<const uint8_t*>(nullptr), static_cast<const uint8_t*>(keep.data())}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(precision) << ", chunk " << chunk << (mask ? ", masked" : ""));
        model::GptRunOptions run;
        run.precision = precision;
        run.lm_head_chunk = chunk;
        Gpt later(c, one.grid, B, T, kernels::Backend::kCpu, run), now(c, one.grid, B, T, kernels::Backend::kCpu, run);
        later.init_random(5);
        now.init_random(5);
        // two micro-batches' worth: the second forward and backward accumulate onto the first's gradients
        later.zero_grad();
        now.zero_grad();
        for (int k = 0; k < 2; k++) {
          const float l_later = later.forward(in.data(), tg.data(), mask);
          later.backward({0.5, k == 1});
          const float l_now = now.forward(in.data(), tg.data(), mask, {.loss_scale = 0.5});
          if (k == 0) {  // the head's gradient is there before the backward
            const Tensor head = now.grad(Param::kWte);
            double sum = 0;
            for (int64_t j = 0; j < head.numel(); j++) sum += std::fabs(head.f32()[j]);
            EXPECT_GT(sum, 0.0);
          }
          now.backward({0.5, k == 1});
          EXPECT_EQ(l_now, l_later);
        }
        for (size_t t = 0; t < now.spec().params.size(); t++) {
          const Tensor a = now.grads().tensor(t), b = later.grads().tensor(t);
          if (chunk == 0)
            EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * sizeof(float)), 0)
                << now.spec().params[t].name;
          else
            EXPECT_TRUE(test::allclose(a.f32(), b.f32(), a.numel(), 1e-7f, 1e-5f)) << now.spec().params[t].name;
        }
      }
}

// The misuses of a training forward are refused, each with what to do instead.
TEST(Gpt, TrainingForwardRefusesItsMisuses) {
  OneRank one;
  const int B = 2, T = 5;
  const GptConfig c = odd_config();
  Gpt g(c, one.grid, B, T, kernels::Backend::kCpu);
  g.init_random(3);
  auto in = test::randint(B * T, c.vocab_size, 1), tg = test::randint(B * T, c.vocab_size, 2);
  auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(nothing thrown)";
  };
  EXPECT_NE(message_of([&] { g.forward(in.data(), nullptr, nullptr, {.loss_scale = 1.0}); }).find("needs the targets"),
            std::string::npos);
  g.zero_grad();
  g.forward(in.data(), tg.data(), nullptr, {.loss_scale = 1.0});
  EXPECT_NE(message_of([&] { g.zero_grad(); }).find("zero the gradients before the forward"), std::string::npos);
  EXPECT_NE(message_of([&] { g.forward(in.data(), tg.data()); }).find("whose backward() has not run"),
            std::string::npos);
  EXPECT_NE(message_of([&] { g.backward({0.5}); }).find("pass the same scale to both"), std::string::npos);
  // refused without harm: the forward's backward still runs, and then the next forward
  g.backward({1.0});
  EXPECT_TRUE(std::isfinite(g.forward(in.data(), tg.data(), nullptr, {.loss_scale = 1.0})));
  g.backward({1.0});
}

TEST(Gpt, FlopsOfGpt2Small) {
  OneRank one;
  // 3 x (2 x (12 C^2 L + C Vp) + 4 T C L) per token
  Gpt g(model::gpt_preset("gpt2-tiny"), one.grid, 1, 8, kernels::Backend::kRef);
  double C = 64, L = 2, Vp = 512, T = 8;
  EXPECT_DOUBLE_EQ(g.flops_per_step(), 3 * (2 * (12 * C * C * L + C * Vp) + 4 * T * C * L) * T);
}

// Mixed precision: AdamW that rounds the bf16 copies of the weights in its pass (train::train_step's update,
// the bf16 table's fused adamw_update) trains as AdamW on the masters with the copies rounded at the next
// forward (the fp32 table's update): after each step every copy is round(master) exactly, and the masters agree
// to the last bits of the step (cpu's kernels are built with -ffast-math, so the fp32 and bf16 instantiations of
// the update may round differently: measured at most 7.5e-9 at lr 1e-2); claiming the copies written while a
// step is under way, or a copy arena without its table, is refused.
TEST(Gpt, Bf16CopiesWrittenByAdamWTrainAsCopiesRoundedAtTheForward) {
  OneRank one;
  const int B = 2, T = 9;
  const GptConfig c = odd_config();
  auto in = test::randint(B * T, c.vocab_size, 3), tg = test::randint(B * T, c.vocab_size, 4);
  model::GptRunOptions run;
  run.precision = DType::kBF16;
  Gpt fused(c, one.grid, B, T, kernels::Backend::kCpu, run), rounded(c, one.grid, B, T, kernels::Backend::kCpu, run);
  fused.init_random(7);
  rounded.init_random(7);
  ASSERT_NE(fused.bf16_copies(), nullptr);
  const auto& ops = kernels::ops_for(kernels::Backend::kCpu);
  const optim::AdamWConfig hp{0.9f, 0.95f, 1e-8f, 0.1f};
  const float lr = 1e-2f;
  optim::AdamW fused_opt(fused.params(), hp, fused.decay_mask(), ops), rounded_opt(rounded.params(), hp,
                                                                                   rounded.decay_mask(), ops);
  for (int step = 0; step < 3; step++) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    fused.zero_grad();
    rounded.zero_grad();
    const float loss = fused.forward(in.data(), tg.data());
    EXPECT_NEAR(loss, rounded.forward(in.data(), tg.data()), 1e-5f * loss);
    // the step is under way: its backward is still to come
    EXPECT_THROW(fused.update([](Arena&, Arena&, Arena*, const kernels::OpsBf16*) {}), Error);
    fused.backward();
    rounded.backward();
    fused.sync_gradients();
    rounded.sync_gradients();
    fused.update([&](Arena& params, Arena& grads, Arena* copies, const kernels::OpsBf16* bf16_ops) {
      fused_opt.step(params, grads, lr, 1.0f, {copies, bf16_ops});
    });
    rounded_opt.step(rounded.params(), rounded.grads(), lr);
    for (size_t t = 0; t < fused.params().size(); t++) {
      const Tensor master = fused.params().tensor(t), copy = fused.bf16_copies()->tensor(t);
      const Tensor other = rounded.params().tensor(t);
      for (int64_t j = 0; j < master.numel(); j++) {
        ASSERT_EQ(copy.bf16()[j], f32_to_bf16(master.f32()[j])) << fused.spec().params[t].name << "[" << j << "]";
        ASSERT_NEAR(master.f32()[j], other.f32()[j], 1e-5f * lr) << fused.spec().params[t].name << "[" << j << "]";
      }
    }
  }
  // the next forward reads the copies the update wrote: the same loss as rounding them from the masters now
  const float loss = fused.forward(in.data(), tg.data());
  fused.weights_updated();  // forget them: the next forward rounds the copies from the masters
  EXPECT_EQ(fused.forward(in.data(), tg.data()), loss);
  EXPECT_THROW(fused_opt.step(fused.params(), fused.grads(), lr, 1.0f, {fused.bf16_copies(), nullptr}),
               InvalidArgument);
}
