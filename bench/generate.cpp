// bench/generate — greedy generation with the KV cache against full recompute, one rank (issue 15's
// benchmark): a model preset with random weights, set up as `axonn generate` sets up (infer/setup.hpp), a
// prompt of --prompt-len ids, --new-tokens greedy tokens.
//
//   build/bin/bench_generate [--model gpt2-124m] [--prompt-len 16] [--new-tokens 256] [--recompute-tokens N]
//
// KV cache: infer::Generator (prefill, then one token per step through Gpt::forward_cached). Full
// recompute: the same inference path without a cache's reuse — each new token runs the whole sequence so
// far as one chunk from position 0 (forward_cached(seq, 0, len)), the cost of decoding with no cache. Both
// produce the same ids (checked). --recompute-tokens times only the first N recomputed tokens (the cost
// grows with the length, so the rate of the first N overstates recompute's rate over all of them: the
// ratio printed is then a lower bound).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/infer/generator.hpp"
#include "axonn/infer/setup.hpp"
#include "axonn/model/gpt_config.hpp"

using namespace axonn;

int main(int argc, char** argv) {
  comm::Runtime mpi(&argc, &argv);
  std::string model = "gpt2-124m";
  int prompt_len = 16, new_tokens = 256, recompute_tokens = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--model") model = argv[i + 1];
    else if (a == "--prompt-len") prompt_len = std::atoi(argv[i + 1]);
    else if (a == "--new-tokens") new_tokens = std::atoi(argv[i + 1]);
    else if (a == "--recompute-tokens") recompute_tokens = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_generate: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (recompute_tokens <= 0 || recompute_tokens > new_tokens) recompute_tokens = new_tokens;
  const model::GptConfig cfg = model::gpt_preset(model);
  const int context = prompt_len + new_tokens;
  if (context > cfg.max_seq_len) {
    std::fprintf(stderr, "bench_generate: %d + %d tokens exceed the model's context of %d\n", prompt_len, new_tokens,
                 cfg.max_seq_len);
    return 2;
  }
  // the set-up generate and memorization run (infer/setup.hpp), with random weights: data parallel over the job
  infer::InferenceRequest request;
  request.config = cfg;
  request.context = context;
  request.tag = "bench";
  request.command = "bench_generate of " + std::to_string(context) + " positions";
  request.advice = "use a smaller --model or fewer tokens";
  const infer::InferenceSetup setup = infer::set_up_inference(request);
  infer::Generator& gen = *setup.generator;
  auto world = comm::world();
  std::vector<int> prompt(static_cast<size_t>(prompt_len));
  for (int i = 0; i < prompt_len; i++) prompt[static_cast<size_t>(i)] = (i * 7919 + 13) % cfg.vocab_size;

  infer::GenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.sampling.temperature = 0;
  o.stop_ids = {-1};  // never stop early: every run makes new_tokens tokens
  (void)gen.generate(prompt, o);  // warm-up (first-touch of the arenas, GEMM set-up)
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int> cached = gen.generate(prompt, o)[0];
  const double kv_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<int> seq = prompt, recomputed;
  std::vector<float> logits(static_cast<size_t>(cfg.vocab_size));
  const auto t1 = std::chrono::steady_clock::now();
  for (int k = 0; k < recompute_tokens; k++) {
    gen.model().forward_cached(seq.data(), 0, static_cast<int>(seq.size()), logits.data());
    const int next = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    seq.push_back(next);
    recomputed.push_back(next);
  }
  const double re_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  const bool same = std::equal(recomputed.begin(), recomputed.end(), cached.begin());
  if (world->rank() == 0) {
    const double kv_rate = new_tokens / kv_s, re_rate = recompute_tokens / re_s;
    std::printf("model %s, prompt %d, %d new tokens, batch 1, %d rank(s)\n", model.c_str(), prompt_len, new_tokens,
                world->size());
    std::printf("kv cache    %8.2f s  %8.2f tokens/s (prefill + decode)\n", kv_s, kv_rate);
    std::printf("recompute   %8.2f s  %8.2f tokens/s (first %d tokens)\n", re_s, re_rate, recompute_tokens);
    std::printf("ratio       %8.1fx%s; ids %s\n", kv_rate / re_rate,
                recompute_tokens < new_tokens ? " (lower bound)" : "", same ? "identical" : "DIFFER");
  }
  return same ? 0 : 1;
}
