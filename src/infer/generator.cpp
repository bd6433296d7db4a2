// Generation with a KV cache (infer/generator.hpp): prefill, then decode one token per step.
#include "axonn/infer/generator.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "axonn/checkpoint/gguf.hpp"
#include "axonn/core/error.hpp"
#include "axonn/infer/decode_threads.hpp"
#include "axonn/kernels/gemm.hpp"

namespace axonn::infer {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Inference holds the weights, the KV cache and the activations of one chunk of positions: no gradients, no
// optimizer state, and the logits of at most kHeadRows rows at a time.
constexpr int kHeadRows = 64;

model::GptRunOptions inference_run(DType precision) {
  model::GptRunOptions run;
  run.precision = precision;           // bf16: bf16 weights only (no fp32 masters), activations, KV cache
  run.inference = true;                // no gradient arena
  run.cache_gathered_weights = true;   // each weight block gathered over Z once per generation
  run.recompute = true;                // the training activations of one block only (inference keeps none)
  run.lm_head_chunk = kHeadRows;       // [64, V] logits at most, not [sequences x context, V]
  return run;
}

}  // namespace

std::vector<int> default_stop_ids(const model::GptConfig& config) {
  if (config.family == model::Family::kLlama) return config.eos_token_ids;
  constexpr int kGpt2EndOfText = 50256;
  if (config.vocab_size > kGpt2EndOfText) return {kGpt2EndOfText};
  return {};
}

std::unique_ptr<text::Tokenizer> model_tokenizer(const checkpoint::ModelSource& source, const std::string& name) {
  if (!name.empty()) return text::load_tokenizer(name);
  // the tokenizer the model carries: an HF directory's files, those a checkpoint step holds (train copies
  // them from the prepared data), or the one inside a GGUF file
  if (const std::string dir = checkpoint::carried_tokenizer_dir(source); !dir.empty()) return text::load_tokenizer(dir);
  if (source.kind == checkpoint::ModelSource::Kind::kGguf)
    if (auto tok = source.gguf->tokenizer()) return tok;
  if (source.config.family == model::Family::kGpt2) return text::load_tokenizer("gpt2");
  return nullptr;
}

std::vector<int> stop_ids(const model::GptConfig& config, const text::Tokenizer* tokenizer) {
  std::vector<int> ids = default_stop_ids(config);
  if (tokenizer)
    for (int id : {tokenizer->eot_id(), tokenizer->eos_id()})
      if (id >= 0 && id < config.vocab_size && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

Generator::Generator(const model::GptConfig& config, const parallel::Grid& grid, int sequences, int context,
                     kernels::Backend backend, DType precision)
    : grid_(grid), backend_(backend) {
  AXONN_CHECK_ARG(sequences >= 1, "the number of sequences (--num-samples) must be >= 1, got ", sequences);
  AXONN_CHECK_ARG(context >= 1 && context <= config.max_seq_len, "the context of ", context,
                  " positions does not fit the model's ", config.max_seq_len);
  gpt_ = std::make_unique<model::Gpt>(config, grid, sequences, context, backend, inference_run(precision));
}

Generator::~Generator() = default;

model::GptMemory Generator::memory_need(const model::GptConfig& config, const parallel::GridShape& shape,
                                        const parallel::GridCoords& coords, int sequences, int context,
                                        kernels::Backend backend, DType precision) {
  return model::Gpt::memory_need(config, shape, coords, sequences, context, backend, inference_run(precision), true);
}

std::vector<std::vector<int>> Generator::generate(const std::vector<int>& prompt, const GenerateOptions& options,
                                                  const OnToken& on_token) {
  return generate(std::vector<std::vector<int>>(static_cast<size_t>(sequences()), prompt), options, on_token);
}

std::vector<std::vector<int>> Generator::generate(const std::vector<std::vector<int>>& given,
                                                  const GenerateOptions& options, const OnToken& on_token) {
  const int B = sequences(), T = context(), V = gpt_->config().vocab_size;
  // every check before the first collective, alike on every rank
  AXONN_CHECK_ARG(!given.empty() && static_cast<int>(given.size()) <= B, "generate: ", given.size(),
                  " prompts for ", B, " sequences (give 1 to ", B, ")");
  // fewer prompts than sequences: the rest run copies of the first, and are not returned
  std::vector<std::vector<int>> prompts = given;
  prompts.resize(static_cast<size_t>(B), given[0]);
  check_sampling(options.sampling);
  AXONN_CHECK_ARG(options.max_new_tokens >= 0, "--max-new-tokens must be >= 0, got ", options.max_new_tokens);
  AXONN_CHECK_ARG(options.decode_threads >= 0, "--decode-threads must be auto or >= 1, got ", options.decode_threads);
  int shortest = T;
  for (const std::vector<int>& p : prompts) {
    AXONN_CHECK_ARG(!p.empty(), "the prompt is empty: give at least one token");
    AXONN_CHECK_ARG(static_cast<int>(p.size()) < T, "the prompt of ", p.size(),
                    " tokens leaves no room in the context of ", T, " positions (the model's max_seq_len is ",
                    gpt_->config().max_seq_len, "); shorten the prompt");
    for (int id : p)
      AXONN_CHECK_ARG(id >= 0 && id < V, "prompt token id ", id, " is outside the model's vocabulary [0, ", V, ")");
    shortest = std::min(shortest, static_cast<int>(p.size()));
  }
  const std::vector<int> stop = options.stop_ids.empty() ? default_stop_ids(gpt_->config()) : options.stop_ids;
  stats_ = {};
  for (const auto& p : prompts) stats_.prompt_tokens += static_cast<int64_t>(p.size());

  std::vector<std::vector<int>> out(static_cast<size_t>(B));
  logprobs_.assign(options.logprobs ? given.size() : 0, {});
  std::vector<bool> done(static_cast<size_t>(B), options.max_new_tokens == 0);
  auto all_done = [&] { return std::all_of(done.begin(), done.end(), [](bool d) { return d; }); };
  std::vector<float> logits(static_cast<size_t>(B) * V);
  // The next token of each sequence at position `pos`: the prompt's while the prompt lasts (prompts of
  // different lengths: the shorter ones are past theirs), else drawn from the logits. Drawn on every
  // rank alike, then broadcast from world rank 0 so that all ranks go on with the same tokens.
  std::vector<int> next(static_cast<size_t>(B));
  auto choose = [&](int pos) {
    for (int b = 0; b < B; b++) {
      const std::vector<int>& p = prompts[static_cast<size_t>(b)];
      if (pos < static_cast<int>(p.size())) {
        next[static_cast<size_t>(b)] = p[static_cast<size_t>(pos)];
      } else {
        const std::span<const float> row(logits.data() + static_cast<size_t>(b) * V, static_cast<size_t>(V));
        next[static_cast<size_t>(b)] = done[static_cast<size_t>(b)]
                                           ? 0  // a finished sequence runs on (its tokens are not kept)
                                           : sample_token(row, options.sampling, uniform_at(options.sampling.seed, b, pos));
      }
    }
    grid_.world().broadcast(next.data(), next.size(), DType::kI32, 0);  // over the world, from rank 0
    for (int b = 0; b < B; b++) {
      if (done[static_cast<size_t>(b)] || pos < static_cast<int>(prompts[static_cast<size_t>(b)].size())) continue;
      const int id = next[static_cast<size_t>(b)];
      out[static_cast<size_t>(b)].push_back(id);
      stats_.new_tokens++;
      if (options.logprobs && b < static_cast<int>(given.size()))
        logprobs_[static_cast<size_t>(b)].push_back(
            log_softmax_at({logits.data() + static_cast<size_t>(b) * V, static_cast<size_t>(V)}, id));
      if (on_token && b < static_cast<int>(given.size())) on_token(b, id);
      if (static_cast<int>(out[static_cast<size_t>(b)].size()) >= options.max_new_tokens ||
          std::find(stop.begin(), stop.end(), id) != stop.end() || pos + 1 >= T)
        done[static_cast<size_t>(b)] = true;
    }
  };

  // prefill: the positions [0, shortest) that every prompt has, as one chunk
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int> chunk(static_cast<size_t>(B) * shortest);
  for (int b = 0; b < B; b++)
    std::copy_n(prompts[static_cast<size_t>(b)].begin(), shortest, chunk.begin() + static_cast<std::ptrdiff_t>(b) * shortest);
  gpt_->forward_cached(chunk.data(), 0, shortest, logits.data());
  int pos = shortest;  // the position of the token chosen next
  if (!all_done()) choose(pos);
  stats_.prefill_seconds = seconds_since(t0);
  // decode: one position per step, until every sequence is done (the longer prompts' tokens first)
  t0 = std::chrono::steady_clock::now();
  // the decode's CPU threads: measured (with more than one), or as asked
  const bool cpu = backend_ != kernels::Backend::kCuda;
  const int command_threads = kernels::cpu_threads();
  // the command's threads again for what follows, also when a step throws (a collective's error, a bad id)
  struct RestoreThreads {
    bool cpu;
    int count;
    ~RestoreThreads() {
      if (cpu) kernels::set_cpu_threads(count);
    }
  } restore{cpu, command_threads};
  // the search goes on from one generate() to the next (memorization calls it per batch of documents), so
  // that each call does not begin again at the command's threads
  DecodeThreads* threads = nullptr;
  if (cpu && options.decode_threads == 0 && command_threads > 1) {
    if (!decode_threads_ || decode_threads_->widest() != command_threads)
      decode_threads_.emplace(command_threads, kernels::set_cpu_threads);
    threads = &*decode_threads_;
  }
  if (cpu && options.decode_threads > 0) kernels::set_cpu_threads(std::min(options.decode_threads, command_threads));
  while (!all_done() && pos < T - 1) {  // (a token at position T - 1 ends every sequence)
    const auto step_start = std::chrono::steady_clock::now();
    if (threads) threads->before_step();
    gpt_->forward_cached(next.data(), pos, 1, logits.data());
    stats_.decode_tokens += B;
    pos++;
    choose(pos);
    if (threads) threads->after_step(seconds_since(step_start));
  }
  stats_.decode_seconds = seconds_since(t0);
  if (threads) stats_.decode_threads = threads->chosen();
  out.resize(given.size());
  return out;
}

}  // namespace axonn::infer
