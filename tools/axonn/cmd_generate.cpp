// axonn generate — continue a prompt with a trained model, on any 4D grid (docs/generate.md).
//
//   axonn generate --init model.bin --prompt "Once upon a time" --max-new-tokens 100 --temperature 0.8 --top-k 40
//   mpirun -np 4 axonn generate --init runs/x/checkpoints --grid 2,2,1,1 --prompt-ids 50256 --print-ids
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/host.hpp"
#include "axonn/core/log.hpp"
#include "axonn/infer/generator.hpp"
#include "axonn/infer/setup.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/text/tokenizer.hpp"
#include "axonn/train/run_dir.hpp"
#include "axonn/checkpoint/model_source.hpp"
#include "commands.hpp"

namespace axonn::tools {

namespace {

struct GenerateFlags {
  std::string init, grid, prompt, prompt_ids, tokenizer, kernels = "cpu", dtype = "fp32", decode_threads = "auto";
  std::string run_dir;  // append the prompt and samples to RUN_DIR/samples.txt (axonn report shows them)
  bool have_prompt = false, print_ids = false, print_logprobs = false;
  int max_new_tokens = 64, num_samples = 1;
  infer::Sampling sampling;
};

// --run-dir: a directory that exists, whose samples.txt, if any, is a plain file (not a link: a command writes
// only into what it owns, and never follows a link out of a run directory). Checked before any work.
std::string samples_file(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  AXONN_CHECK_ARG(fs::is_directory(run_dir, ec), "--run-dir '", run_dir, "' is not a directory: give the run "
                 "directory of the model's training (axonn train --run-dir), where axonn report will show the samples");
  const std::string path = train::RunDir(run_dir).samples();
  const fs::file_status st = fs::symlink_status(path, ec);
  AXONN_CHECK_ARG(!fs::exists(st) || fs::is_regular_file(st), "'", path, "' is not a plain file (a link or a "
                 "directory): generate appends its samples only to a samples.txt it can own; remove it or give "
                 "another --run-dir");
  return path;
}

// A sample as text: the prompt and its continuation, stop ids left out.
std::string sample_text(const std::vector<int>& prompt, const std::vector<int>& sample, const text::Tokenizer& tok,
                        const std::function<bool(int)>& is_stop) {
  std::vector<int> ids = prompt;
  for (int id : sample)
    if (!is_stop(id)) ids.push_back(id);
  return tok.decode(ids);
}

// Ids as --print-ids prints them: comma-separated.
std::string ids_line(const std::vector<int>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); i++) {
    if (i) line += ',';
    line += std::to_string(ids[i]);
  }
  return line;
}

// The samples as samples.txt keeps them: a header saying how they were made, then each sample's text (the
// prompt and its continuation) or ids.
std::string samples_entry(const GenerateFlags& f, const std::vector<int>& prompt,
                          const std::vector<std::vector<int>>& samples, const text::Tokenizer* tok,
                          const std::function<bool(int)>& is_stop) {
  std::string prompt_flag = " --prompt-ids " + f.prompt_ids;
  if (f.have_prompt) prompt_flag = " --prompt \"" + f.prompt + "\"";
  std::string out = ::axonn::detail::concat(
      "--- ", utc_now(), ": axonn generate --init ", f.init, prompt_flag, " --max-new-tokens ", f.max_new_tokens, " --temperature ", f.sampling.temperature, " --top-k ", f.sampling.top_k,
      " --top-p ", f.sampling.top_p, " --seed ", f.sampling.seed, " --dtype ", f.dtype, "\n");
  for (size_t s = 0; s < samples.size(); s++) {
    if (samples.size() > 1) out += "-- sample " + std::to_string(s + 1) + "\n";
    out += (tok && !f.print_ids ? sample_text(prompt, samples[s], *tok, is_stop) : ids_line(samples[s])) + "\n";
  }
  return out;
}

int run_generate(const GenerateFlags& f) {
  const auto started = std::chrono::steady_clock::now();
  set_log_info_to_stderr(true);  // stdout is the generated text (or ids) alone
  // everything is checked before the first collective (the grid's), alike on every rank
  AXONN_CHECK_ARG(f.have_prompt != !f.prompt_ids.empty(),
                  f.have_prompt ? "give either --prompt TEXT or --prompt-ids 1,2,3, not both"
                                : "no prompt: give --prompt TEXT or --prompt-ids 1,2,3");
  AXONN_CHECK_ARG(f.max_new_tokens >= 1, "--max-new-tokens must be >= 1, got ", f.max_new_tokens);
  AXONN_CHECK_ARG(f.num_samples >= 1, "--num-samples must be >= 1, got ", f.num_samples);
  infer::check_sampling(f.sampling);
  int decode_threads = 0;  // auto
  if (f.decode_threads != "auto") {
    char* end = nullptr;
    const long n = std::strtol(f.decode_threads.c_str(), &end, 10);
    AXONN_CHECK_ARG(!f.decode_threads.empty() && *end == '\0' && n >= 1 && n <= 4096, "--decode-threads must be "
                    "auto or a thread count >= 1, got '", f.decode_threads, "'");
    decode_threads = static_cast<int>(n);
  }
  const kernels::Backend backend = kernels::parse_backend(f.kernels);
  const DType precision = parse_precision(f.dtype);
  const std::string samples_path = f.run_dir.empty() ? "" : samples_file(f.run_dir);
  const checkpoint::ModelSource source = checkpoint::find_model_source(f.init);
  const model::GptConfig& mc = source.config;
  // a tokenizer for text in or out; ids in and out need none, but a named one still gives its stop ids
  std::unique_ptr<text::Tokenizer> tok;
  AXONN_CHECK_ARG(!f.print_logprobs || f.print_ids, "--print-logprobs goes with --print-ids (a line of ids, then a "
                  "line of their log-probabilities, per sample)");
  if (f.have_prompt || !f.print_ids || !f.tokenizer.empty()) {
    tok = infer::model_tokenizer(source, f.tokenizer);
    AXONN_CHECK_ARG(tok != nullptr, "no tokenizer is known for ", f.init, ": give --tokenizer PATH (or use ",
                    "--prompt-ids and --print-ids)");
    // now, not mid-sample when the model samples an id the tokenizer cannot decode (a tokenizer with more
    // ids than the model is met by the prompt's check below, id by id)
    AXONN_CHECK_ARG(tok->vocab_size() >= mc.vocab_size, "the model ", f.init, " has a vocabulary of ", mc.vocab_size,
                    " tokens but the tokenizer ", tok->describe(), " only ", tok->vocab_size(),
                    ": it cannot decode every id the model samples; give --tokenizer the model's own tokenizer "
                    "(or use --print-ids)");
    // more ids than the model: perhaps a padded vocabulary, more likely another model's tokenizer (the
    // quickstart's 4,096-id model with GPT-2's tokenizer printed garbage without a word)
    if (tok->vocab_size() > mc.vocab_size)
      log_warn("the tokenizer %s has %d ids and the model %s %d: unless it is the tokenizer the model was trained "
               "with, the text will be garbage; give --tokenizer the one its data was prepared with",
               tok->describe().c_str(), tok->vocab_size(), f.init.c_str(), mc.vocab_size);
  }
  const std::vector<int> prompt = f.have_prompt ? tok->encode(f.prompt) : text::parse_ids(f.prompt_ids);
  AXONN_CHECK_ARG(!prompt.empty(), "the prompt has no tokens");
  for (int id : prompt)
    AXONN_CHECK_ARG(id >= 0 && id < mc.vocab_size, "prompt token id ", id, " is outside the model's vocabulary [0, ",
                    mc.vocab_size, ")", tok ? "; the tokenizer " + tok->describe() + " is not the model's: give "
                    "--tokenizer the one its data was prepared with" : std::string());
  AXONN_CHECK_ARG(static_cast<int>(prompt.size()) < mc.max_seq_len, "the prompt has ", prompt.size(),
                  " tokens: the model's context of ", mc.max_seq_len, " positions leaves no room to generate; "
                  "shorten it");
  const int context = std::min<int>(mc.max_seq_len, static_cast<int>(prompt.size()) + f.max_new_tokens);

  infer::InferenceRequest request;
  request.config = mc;
  request.source = source;
  request.grid = f.grid;
  request.sequences = f.num_samples;
  request.context = context;
  request.backend = backend;
  request.precision = precision;
  request.command = "axonn generate with " + std::to_string(f.num_samples) + " sample" +
                    (f.num_samples > 1 ? "s" : "") + " of " + std::to_string(context) + " positions";
  request.advice = "use a smaller --num-samples or --max-new-tokens (the KV cache and the activations grow with the "
                   "samples and their length), more model-parallel ranks (--grid), or fewer ranks per node";
  const infer::InferenceSetup setup = infer::set_up_inference(request);
  // honest about what stands behind the GPU path: its kernels and the whole generation pass on the SIMT emulator
  // (tests/unit/cuda_emu) in every build, but the GPU test of it (GpuGenerate, scripts/device-check.sh's gpt,
  // generate_fp32 and generate_bf16 rows) has not yet had a GPU to run on; docs/generate.md
  if (backend == kernels::Backend::kCuda)
    log_warn("generation on a GPU is verified on the CPU's emulation of its kernels, not yet on a GPU: if its "
             "tokens look wrong, compare with --kernels cpu and report it");
  // after the set-up, which chose the command's threads (launch::setup_compute: the cores this rank may use)
  if (backend != kernels::Backend::kCuda && decode_threads > kernels::cpu_threads())
    log_warn("--decode-threads %d is more than the command's %d threads (OMP_NUM_THREADS, else the cores this rank "
             "may use): the decode runs on %d", decode_threads, kernels::cpu_threads(), kernels::cpu_threads());
  const parallel::Grid& grid = *setup.grid;
  infer::Generator& gen = *setup.generator;
  const std::string& loaded = setup.loaded;
  log_info("generate  %s: %s, grid %s, %d sample%s of up to %d tokens after a prompt of %zu", loaded.c_str(),
           mc.str().c_str(), grid.shape().str().c_str(), f.num_samples, f.num_samples == 1 ? "" : "s", f.max_new_tokens,
           prompt.size());

  // the start: from the command's entry to a model ready to prefill (the file read, the model built and loaded)
  const double start_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  infer::GenerateOptions o;
  o.max_new_tokens = f.max_new_tokens;
  o.sampling = f.sampling;
  o.stop_ids = infer::stop_ids(mc, tok.get());
  o.logprobs = f.print_logprobs;
  o.decode_threads = decode_threads;
  const bool printer = grid.rank() == 0;
  auto is_stop = [&](int id) { return std::find(o.stop_ids.begin(), o.stop_ids.end(), id) != o.stop_ids.end(); };
  // one sample streams its text as it comes; several are printed whole, one after another
  std::unique_ptr<text::StreamDecoder> stream;
  // the lines logged so far reach the terminal before the samples, and the samples before the rate line,
  // also under a launcher that forwards the two outputs separately (await_output_taken)
  if (printer) await_output_taken(STDERR_FILENO);
  if (printer && !f.print_ids && f.num_samples == 1) {
    stream = std::make_unique<text::StreamDecoder>(*tok);
    for (int id : prompt) std::fputs(stream->push(id).c_str(), stdout);
    std::fflush(stdout);
  }
  const auto samples = gen.generate(prompt, o, [&](int, int id) {
    if (!stream || is_stop(id)) return;
    std::fputs(stream->push(id).c_str(), stdout);
    std::fflush(stdout);
  });
  if (printer) {
    if (stream) {
      std::fputs((stream->finish() + "\n").c_str(), stdout);
    } else {
      for (size_t s = 0; s < samples.size(); s++) {
        std::string line;
        if (f.print_ids) {
          line = ids_line(samples[s]);
          if (f.print_logprobs) {
            line += "\n";
            const std::vector<double>& lp = gen.last_logprobs()[s];
            char buf[32];
            for (size_t i = 0; i < lp.size(); i++) {
              std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", lp[i]);
              line += buf;
            }
          }
        } else {
          line = "--- sample " + std::to_string(s + 1) + "\n" + sample_text(prompt, samples[s], *tok, is_stop);
        }
        std::printf("%s\n", line.c_str());
      }
    }
    await_output_taken(STDOUT_FILENO);
    if (!samples_path.empty()) {  // appended: the file keeps every generation's samples, oldest first
      const std::string before = std::filesystem::exists(samples_path) ? checkpoint::read_text_file(samples_path) : "";
      checkpoint::write_file_atomic(samples_path, before + samples_entry(f, prompt, samples, tok.get(), is_stop));
    }
  }
  const infer::GenerateStats& st = gen.last_stats();
  auto rate = [](int64_t tokens, double s) { return s > 0 ? static_cast<double>(tokens) / s : 0.0; };
  // the decode's threads, when the generator chose them (more than one thread on the CPU: infer/generator.cpp)
  const std::string threads =
      st.decode_threads > 0 ? " on " + std::to_string(st.decode_threads) + " of " +
                                  std::to_string(kernels::cpu_threads()) + " threads (the faster, measured)"
                            : "";
  log_info("generate  %lld new tokens in %.2f s after a start of %.2f s: prefill %lld tokens in %.3f s (%.0f "
           "tokens/s), decode %.1f tokens/s%s",
           static_cast<long long>(st.new_tokens), st.prefill_seconds + st.decode_seconds, start_seconds,
           static_cast<long long>(st.prompt_tokens), st.prefill_seconds, rate(st.prompt_tokens, st.prefill_seconds),
           rate(st.decode_tokens, st.decode_seconds), threads.c_str());
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, Action* action) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* sub = app.add_subcommand("generate", "continue a prompt with a trained model (KV cache, any 4D grid)");
  sub->footer(
      "Example:\n"
      "  axonn generate --init model.bin --prompt \"The meaning of life is\" --max-new-tokens 40 --top-k 40");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--init", f->init, "the model: an llm.c model file, a Hugging Face checkpoint (directory or "
                                     ".safetensors), a GGUF file, or a checkpoint directory")->required();
  sub->add_option("--grid", f->grid, "4D grid GX,GY,GZ,GD or tp-x=N,tp-y=N,fsdp=N,dp=N (default 1,1,1,<ranks>); every Z and data replica "
                                     "computes the same samples");
  sub->add_option("--prompt", f->prompt, "the prompt as text (through the tokenizer)");
  sub->add_option("--prompt-ids", f->prompt_ids, "the prompt as token ids: 1,2,3");
  sub->add_option("--max-new-tokens", f->max_new_tokens, "tokens to generate at most (also ends at end-of-text/EOS "
                                                          "and at the model's context)");
  sub->add_option("--temperature", f->sampling.temperature, "softmax temperature; 0: greedy (ties: the lowest id)");
  sub->add_option("--top-k", f->sampling.top_k, "sample among the k most likely tokens (0: all)");
  sub->add_option("--top-p", f->sampling.top_p, "then among the fewest most likely tokens whose probability "
                                                "reaches p, in (0, 1] (1: all)");
  sub->add_option("--seed", f->sampling.seed, "sampling seed: sample s's token at position t is drawn from "
                                              "(seed, s, t), the same on every grid")
      ->check(check_unsigned64);
  sub->add_option("--num-samples", f->num_samples, "continuations of the prompt, generated together");
  sub->add_option("--tokenizer", f->tokenizer, "gpt2 or a tokenizer path (default: the model's own: the one a "
                                               "checkpoint carries from the data `axonn prepare` made, or the Hugging "
                                               "Face directory's; else GPT-2's for GPT-2 models)");
  sub->add_flag("--print-ids", f->print_ids, "print only the generated ids, comma-separated, one line per sample");
  sub->add_flag("--print-logprobs", f->print_logprobs,
                "with --print-ids: after each sample's ids, a line of their log-probabilities under the model "
                "(log-softmax of the logits, before temperature and cuts)");
  sub->add_option("--decode-threads", f->decode_threads, "the decode's CPU threads: auto (default: the command's "
                  "threads or fewer, whichever decodes faster, timed as it runs) or a count (at most the command's); "
                  "the output is the same");
  sub->add_option("--kernels", f->kernels, "kernel backend: cpu, ref or cuda (one GPU, one rank)");
  sub->add_option("--run-dir", f->run_dir, "also append the prompt and the samples to DIR/samples.txt: the model's "
                                           "training run directory, whose report (axonn report DIR) then shows them");
  sub->add_option("--dtype", f->dtype, "fp32 (default) or bf16: bf16 weights, activations and KV cache with fp32 "
                                       "sums; half the memory, and decode reads half the bytes");
  sub->callback([f, action, sub] {
    f->have_prompt = sub->count("--prompt") > 0;
    *action = [f] { return run_generate(*f); };
  });
}

}  // namespace axonn::tools
