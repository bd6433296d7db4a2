// A model trained on the CUDA tables' kernels, run on the CPU by the SIMT emulator (emulated_ops.hpp): the
// reference tables with every emulated kernel in place (the norms, the cross-entropy's steps and its one pass,
// AdamW writing the bf16 copies, SwiGLU, RoPE, and in bf16 the register-resident tensor-core flash attention)
// registered as the CUDA tables, with host memory registered as the device's. model::Gpt on Backend::kCuda then
// calls them exactly as it calls the GPU's, on its own buffers (arena offsets, chunks of the LM head, in-place
// aliasing, the Goldfish weights), which the kernel tests' own buffers cannot show. Three training steps of a
// GPT-2 and a Llama whose head size (64) the tensor-core attention takes, fp32 and bf16, against the same steps
// on the reference tables: losses and gradient norms at every step, the weights after the last. The bounds are
// the GPU tests' (tests/cuda/model: fp32 1e-5 relative on the loss; bf16 1e-3), over three steps.
#include "emulated_ops.hpp"
//
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/memory.hpp"
#include "axonn/infer/generator.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"
#include "axonn/parallel/grid.hpp"
#include "greedy_generation.hpp"
#include "tensor_expect.hpp"
#include "test_models.hpp"

namespace axonn {
namespace {

namespace emulated = test::emulated;
using kernels::bf16;

// The emulated tables, registered once as the CUDA backend's, and host memory as the device's.
void register_emulated_tables() {
  static const kernels::Ops fp32 = emulated::Emulated<float>::table(kernels::ops_for(kernels::Backend::kRef));
  static const kernels::OpsBf16 mixed =
      emulated::MmaAttention::table(emulated::Emulated<bf16>::table(kernels::ref_bf16_ops()));
  static const MemoryOps device = [] {  // host memory's operations, as the device's
    MemoryOps m = host_memory();
    m.device = Device::kCuda;
    return m;
  }();
  register_device_memory(&device);
  kernels::register_cuda_ops(&fp32);
  kernels::register_cuda_bf16_ops(&mixed);
}

struct Trajectory {
  std::vector<float> losses;
  std::vector<double> norms;
  std::vector<float> weights;  // every parameter after the last step, back to back
};

// Three steps as train::train_step runs them (a training forward, backward, gradient sums, norm, AdamW writing the
// bf16 copies), on one rank.
Trajectory train(const model::GptConfig& cfg, kernels::Backend backend, DType precision, int lm_head_chunk,
                 bool masked) {
  const int B = 2, T = 64;
  std::shared_ptr<comm::Communicator> self = comm::world()->split(comm::world()->rank(), 0, "alone");
  parallel::Grid grid({1, 1, 1, 1}, self);
  model::GptRunOptions run;
  run.precision = precision;
  run.lm_head_chunk = lm_head_chunk;
  model::Gpt gpt(cfg, grid, B, T, backend, run);
  gpt.init_random(11);
  // eps well above the smallest gradients: there AdamW's step, lr * m / (sqrt(v) + eps), would be about lr whatever
  // the gradient's value, so that two sums of a near-zero gradient in another order move a weight apart by 2 lr
  optim::AdamW opt(gpt.params(), {0.9f, 0.95f, 1e-3f, 0.1f}, gpt.decay_mask(), kernels::ops_for(backend));
  model::ForwardOptions training;
  training.loss_scale = 1.0;
  std::vector<uint8_t> keep(static_cast<size_t>(B) * T);
  for (size_t i = 0; i < keep.size(); i++) keep[i] = i % 4 != 2;  // a quarter of the targets dropped
  Trajectory r;
  for (int step = 0; step < 3; step++) {
    const std::vector<int> in = test::randint(B * T, cfg.vocab_size, 10 + step);
    const std::vector<int> tg = test::randint(B * T, cfg.vocab_size, 20 + step);
    gpt.zero_grad();
    r.losses.push_back(gpt.forward(in.data(), tg.data(), masked ? keep.data() : nullptr, training));
    gpt.backward();
    gpt.sync_gradients();
    r.norms.push_back(gpt.grad_norm());
    gpt.update([&](Arena& params, Arena& grads, Arena* copies, const kernels::OpsBf16* bf16_ops) {
      opt.step(params, grads, 1e-2f, 1.0f, {copies, bf16_ops});
    });
  }
  for (size_t i = 0; i < gpt.params().size(); i++) {
    const Tensor p = gpt.params().tensor(i);  // host memory: the emulated device's
    r.weights.insert(r.weights.end(), p.f32(), p.f32() + p.numel());
  }
  return r;
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double d2 = 0, w2 = 0;
  for (size_t i = 0; i < want.size(); i++) {
    const double d = static_cast<double>(got[i]) - want[i];
    d2 += d * d;
    w2 += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(d2 / w2);
}

void check(const model::GptConfig& cfg, int lm_head_chunk, bool masked) {
  register_emulated_tables();
  for (const DType precision : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(::testing::Message() << dtype_name(precision) << ", LM head chunk " << lm_head_chunk
                                      << (masked ? ", Goldfish mask" : ""));
    const bool mixed = precision == DType::kBF16;
    const Trajectory want = train(cfg, kernels::Backend::kRef, precision, lm_head_chunk, masked);
    const Trajectory got = train(cfg, kernels::Backend::kCuda, precision, lm_head_chunk, masked);
    for (size_t s = 0; s < want.losses.size(); s++) {
      EXPECT_NEAR(got.losses[s], want.losses[s], (mixed ? 1e-3 : 1e-5) * std::fabs(want.losses[s])) << "step " << s;
      EXPECT_NEAR(got.norms[s], want.norms[s], (mixed ? 2e-2 : 1e-4) * want.norms[s]) << "step " << s;
    }
    EXPECT_LE(relative_l2(got.weights, want.weights), mixed ? 1e-2 : 1e-5) << "the weights after the last step";
  }
}

// GPT-2 with two heads of 64: LayerNorm, the cross-entropy (one pass for the training forward's chunk; with
// chunks, the backward's recomputed ones too), AdamW, and in bf16 the tensor-core attention.
model::GptConfig gpt2_hs64() {
  model::GptConfig c = test::tiny_gpt2();
  c.max_seq_len = 64;
  c.channels = 128;
  c.num_heads = 2;
  return c;
}

TEST(EmuModel, Gpt2TrainsAsOnTheReference) { check(gpt2_hs64(), 0, false); }
TEST(EmuModel, Gpt2ByHeadChunksWithTheGoldfishMask) { check(gpt2_hs64(), 48, true); }

// Llama with grouped queries (2 heads of 64, 1 KV head): RMSNorm, RoPE on the q|k|v rows, SwiGLU.
model::GptConfig llama_hs64() {
  model::GptConfig c = test::tiny_llama_gqa();
  c.max_seq_len = 64;
  c.channels = 128;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.ffn_hidden = 96;
  return c;
}

TEST(EmuModel, LlamaTrainsAsOnTheReference) { check(llama_hs64(), 0, false); }

// Generation on them, as GpuGenerate runs it on a GPU (the KV cache's append and the attention over the cache,
// the norms, the LM head by chunks): two prompts of different lengths, 20 greedy tokens each, on a random GPT-2 and
// a random grouped-query Llama in fp32: the reference's ids, and each token's log-probability within 1e-4.
TEST(EmuModel, GenerationEqualsTheReference) {
  register_emulated_tables();
  std::shared_ptr<comm::Communicator> self = comm::world()->split(comm::world()->rank(), 0, "alone");
  parallel::Grid grid({1, 1, 1, 1}, self);
  const std::vector<std::vector<int>>& prompts = test::kGreedyPrompts;
  infer::GenerateOptions o = test::greedy_with_logprobs();
  o.decode_threads = 1;
  for (const model::GptConfig& cfg : {gpt2_hs64(), llama_hs64()}) {
    SCOPED_TRACE(cfg.family == model::Family::kLlama ? "llama" : "gpt-2");
    auto run = [&](kernels::Backend backend) {
      infer::Generator g(cfg, grid, 2, 32, backend);
      g.model().init_random(7);
      std::vector<std::vector<int>> ids = g.generate(prompts, o);
      return std::pair{ids, g.last_logprobs()};
    };
    const auto [want_ids, want_logprobs] = run(kernels::Backend::kRef);
    const auto [ids, logprobs] = run(kernels::Backend::kCuda);
    ASSERT_EQ(ids, want_ids);
    for (size_t b = 0; b < want_logprobs.size(); b++)
      for (size_t i = 0; i < want_logprobs[b].size(); i++)
        EXPECT_NEAR(logprobs[b][i], want_logprobs[b][i], 1e-4) << "sequence " << b << ", token " << i;
  }
}

}  // namespace
}  // namespace axonn
