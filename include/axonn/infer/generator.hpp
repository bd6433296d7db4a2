// infer/generator.hpp — text generation with a KV cache on any 4D grid (docs/generate.md).
//
// The model runs as tensor-parallel inference on the training layers (model::Gpt::forward_cached):
// prefill runs each prompt as one chunk, decode one token per step; each block appends its keys and
// values to its cache. Every rank of X*Y receives the full logits row of each sequence's last position,
// and every Z and data replica computes the same sequences (the weights are still gathered over Z, once
// per generation). The sampled tokens are broadcast from world rank 0, so every rank continues with
// the same tokens.
//
//   auto src = checkpoint::find_model_source(path);
//   infer::Generator gen(src.config, grid, /*sequences=*/4, /*context=*/256, kernels::Backend::kCpu);
//   checkpoint::load_weights(src, grid, gen.model());
//   infer::GenerateOptions o;
//   o.max_new_tokens = 100;
//   o.sampling = {0.8f, 40, 0.95f, /*seed=*/7};
//   auto samples = gen.generate(prompt_ids, o, [](int seq, int id) { ... });  // 4 samples of the prompt
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "axonn/infer/decode_threads.hpp"
#include "axonn/infer/sampler.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/text/tokenizer.hpp"
#include "axonn/checkpoint/model_source.hpp"

namespace axonn::infer {

struct GenerateOptions {
  int max_new_tokens = 64;
  Sampling sampling;
  // A sequence ends after one of these (the id is part of its output). Empty: default_stop_ids(model).
  std::vector<int> stop_ids;
  // Keep each new token's log-probability under the model (log-softmax of its logits, before any
  // temperature or cut): Generator::last_logprobs().
  bool logprobs = false;
  // The decode's CPU threads: 0 measures them (infer/decode_threads.hpp: the command's threads or fewer,
  // whichever decodes faster); n > 0 runs the decode on min(n, the command's threads). The output is the same.
  int decode_threads = 0;
};

// GPT-2's end of text (50256, when the vocabulary has it); Llama's eos ids (config.json's eos_token_id).
std::vector<int> default_stop_ids(const model::GptConfig& config);

// The tokenizer of a model: `name` (gpt2 or a path, as text::load_tokenizer takes them) when given; else the
// tokenizer files of a Hugging Face checkpoint's directory (tokenizer.json, vocab.json + merges.txt,
// tokenizer.model) or of a checkpoint step (the prepared data's, which train carries), or the one inside a GGUF
// file; else GPT-2's for the
// GPT-2 family; else null (none is known: the user names one).
std::unique_ptr<text::Tokenizer> model_tokenizer(const checkpoint::ModelSource& source, const std::string& name);
// default_stop_ids(config) and the tokenizer's end-of-text and end-of-sequence ids within the vocabulary.
std::vector<int> stop_ids(const model::GptConfig& config, const text::Tokenizer* tokenizer);

// Tokens generated and the time taken, on this rank.
struct GenerateStats {
  int64_t prompt_tokens = 0, new_tokens = 0;  // over all sequences
  int64_t decode_tokens = 0;                  // tokens run through the model by the decode steps (B per step)
  double prefill_seconds = 0, decode_seconds = 0;
  int decode_threads = 0;  // the CPU threads the decode settled on (measured, generator.cpp); 0: not chosen
};

class Generator {
 public:
  // The model on the grid for `sequences` sequences at once and `context` positions each
  // (<= the model's max_seq_len). Collective-free; InvalidArgument if the grid does not divide the model.
  // The weights are random until set through model() (checkpoint::load_weights, Gpt::init_random).
  // precision kBF16: bf16 weights (no fp32 copy), activations and KV cache, fp32 sums (docs/generate.md).
  Generator(const model::GptConfig& config, const parallel::Grid& grid, int sequences, int context,
            kernels::Backend backend, DType precision = DType::kF32);
  ~Generator();
  // What the Generator of these arguments allocates on the rank at `coords` of a grid of `shape`
  // (model::Gpt::memory_need with the KV cache), before it is built.
  static model::GptMemory memory_need(const model::GptConfig& config, const parallel::GridShape& shape,
                                      const parallel::GridCoords& coords, int sequences, int context,
                                      kernels::Backend backend, DType precision = DType::kF32);
  model::Gpt& model() { return *gpt_; }
  int sequences() const { return gpt_->batch_size(); }
  int context() const { return gpt_->seq_len(); }

  // Continues prompts[b], b < prompts.size() <= sequences() (prompts of any lengths >= 1; ids in the
  // vocabulary; with fewer prompts than sequences the rest of the batch runs copies of the first, not
  // returned) and returns each one's new tokens: up to max_new_tokens, ending at a stop id or at the
  // context's end. Sequence b's token at position t is drawn with uniform_at(seed, b, t). on_token(b, id)
  // is called for each new token as it is produced, in order. Collective over the grid's world; every
  // rank passes the same prompts and options and gets the same result. InvalidArgument (alike on every
  // rank, before any collective) for a bad prompt or option.
  using OnToken = std::function<void(int sequence, int id)>;
  std::vector<std::vector<int>> generate(const std::vector<std::vector<int>>& prompts, const GenerateOptions& options,
                                         const OnToken& on_token = {});
  // sequences() samples of one prompt.
  std::vector<std::vector<int>> generate(const std::vector<int>& prompt, const GenerateOptions& options,
                                         const OnToken& on_token = {});
  const GenerateStats& last_stats() const { return stats_; }
  // With GenerateOptions::logprobs: the log-probability of each new token of the last generate(), per sequence.
  const std::vector<std::vector<double>>& last_logprobs() const { return logprobs_; }

 private:
  const parallel::Grid& grid_;
  kernels::Backend backend_;
  std::unique_ptr<model::Gpt> gpt_;
  GenerateStats stats_;
  std::vector<std::vector<double>> logprobs_;
  std::optional<DecodeThreads> decode_threads_;  // the decode's thread search, kept from one call to the next
};

}  // namespace axonn::infer
