// axonn memorization — how much of a set of documents a model reproduces: each document's greedy
// 50-token continuation of its prefix against its suffix (exact match, per-token match, Rouge-L), the
// protocol of the Goldfish loss's authors, on any 4D grid (docs/memorization.md).
//
//   axonn memorization --init run/model.bin --tokenizer tok.model --output canaries.json canaries.jsonl
//   mpirun -np 4 axonn memorization --init ck --grid 2,2,1,1 --shards data/ --max-documents 500
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/output_file.hpp"
#include "axonn/eval/memorization.hpp"
#include "axonn/infer/generator.hpp"
#include "axonn/infer/setup.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/checkpoint/model_source.hpp"
#include "commands.hpp"

namespace axonn::tools {

namespace {

struct MemorizationFlags {
  std::string init, grid, tokenizer, shards, output, doc_separator, invalid_utf8 = "error";
  std::vector<std::string> inputs, exclude;
  int suffix_len = 50, batch = 8;
  int64_t max_documents = 0;
};

int run_memorization(const MemorizationFlags& f) {
  // everything is checked before the first collective (the grid's), alike on every rank
  AXONN_CHECK_ARG(f.shards.empty() != f.inputs.empty(),
                  f.shards.empty() ? "no documents: give text inputs (files, directories, .jsonl) or --shards DIR"
                                   : "give either text inputs or --shards, not both");
  AXONN_CHECK_ARG(f.batch >= 1, "--batch must be >= 1, got ", f.batch);
  AXONN_CHECK_ARG(f.max_documents >= 0, "--max-documents must be >= 0, got ", f.max_documents);
  AXONN_CHECK_ARG(f.invalid_utf8 == "error" || f.invalid_utf8 == "replace",
                  "--invalid-utf8 must be error or replace, got '", f.invalid_utf8, "'");
  if (!f.output.empty()) {
    std::vector<NamedPath> inputs = {{"--init", f.init}};
    for (const std::string& in : f.inputs) inputs.push_back({"the input", in});
    if (!f.shards.empty()) inputs.push_back({"--shards", f.shards});
    if (!f.tokenizer.empty()) inputs.push_back({"--tokenizer", f.tokenizer});
    check_output_file({"--output", f.output});
    check_output_apart({"--output", f.output}, inputs);
  }
  const checkpoint::ModelSource source = checkpoint::find_model_source(f.init);
  const model::GptConfig& mc = source.config;
  AXONN_CHECK_ARG(f.suffix_len >= 1 && f.suffix_len < mc.max_seq_len, "--suffix-len must be in [1, ", mc.max_seq_len,
                  "), the model's context; got ", f.suffix_len);
  std::unique_ptr<text::Tokenizer> tok = infer::model_tokenizer(source, f.tokenizer);
  AXONN_CHECK_ARG(tok != nullptr, "no tokenizer is known for ", f.init, ": give --tokenizer PATH");
  AXONN_CHECK_ARG(tok->vocab_size() <= mc.vocab_size, "the tokenizer ", tok->describe(), " has ", tok->vocab_size(),
                  " ids, more than the model's vocabulary of ", mc.vocab_size, ": give --tokenizer the one its data was "
                  "prepared with");
  text::DocumentOptions dopt;
  dopt.separator = f.doc_separator;
  dopt.exclude = f.exclude;
  dopt.invalid_utf8 = f.invalid_utf8 == "replace" ? text::InvalidUtf8::kReplace : text::InvalidUtf8::kError;
  const std::vector<std::vector<int>> documents =
      f.shards.empty() ? eval::documents_from_text(f.inputs, dopt, *tok)
                       : eval::documents_from_shards(f.shards, tok->document_separator(), mc.vocab_size);
  AXONN_CHECK_ARG(!documents.empty(), "the inputs hold no documents");

  infer::InferenceRequest request;
  request.config = mc;
  request.source = source;
  request.grid = f.grid;
  request.sequences = f.batch;
  request.context = mc.max_seq_len;
  request.tag = "memorize";
  request.command = "axonn memorization with --batch " + std::to_string(f.batch) + " of " +
                    std::to_string(mc.max_seq_len) + " positions";
  request.advice = "use a smaller --batch (the KV cache and the activations grow with it), more model-parallel ranks "
                   "(--grid), or fewer ranks per node";
  const infer::InferenceSetup setup = infer::set_up_inference(request);
  const parallel::Grid& grid = *setup.grid;
  infer::Generator& gen = *setup.generator;
  const std::string& loaded = setup.loaded;
  log_info("memorize  %s: %s, grid %s; %zu documents, suffix %d tokens, %d at a time", loaded.c_str(), mc.str().c_str(),
           grid.shape().str().c_str(), documents.size(), f.suffix_len, f.batch);

  eval::MemorizationOptions o;
  o.suffix_len = f.suffix_len;
  o.max_documents = f.max_documents;
  const eval::MemorizationReport r = eval::measure_memorization(gen, *tok, documents, o, infer::stop_ids(mc, tok.get()));
  if (grid.rank() == 0) {
    const eval::ExtractionSummary& s = r.summary;
    std::printf("documents         %lld (skipped %lld shorter than %d tokens + a prefix)\n",
                static_cast<long long>(s.documents), static_cast<long long>(r.skipped), f.suffix_len);
    std::printf("exact match       %.4f\n", s.exact_match_rate);
    std::printf("token match       %.4f\n", s.token_match_rate);
    std::printf("Rouge-L tokens    %.4f\n", s.rouge_l_tokens);
    std::printf("Rouge-L words     %.4f\n", s.rouge_l_words);
    std::printf("time              %.1f s\n", r.seconds);
    std::fflush(stdout);
    if (!f.output.empty()) checkpoint::write_file_atomic(f.output, eval::report_json(r, o, f.init));
  }
  return 0;
}

}  // namespace

void add_memorization_command(CLI::App& app, Action* action) {
  auto f = std::make_shared<MemorizationFlags>();
  CLI::App* sub = app.add_subcommand(
      "memorization", "how much of a set of documents a model reproduces: greedy continuations of each document's "
                      "prefix against its last --suffix-len tokens (exact match, Rouge-L)");
  sub->footer(
      "Example:\n"
      "  axonn memorization --init runs/x/checkpoints --tokenizer gpt2 --output memo.json docs.jsonl");
  sub->option_defaults()->always_capture_default();
  sub->add_option("INPUT", f->inputs, "documents: text files, JSON Lines files (a \"text\" field) or directories");
  sub->add_option("--init", f->init, "the model: an llm.c model file, a Hugging Face checkpoint, a GGUF file, or "
                                     "a checkpoint directory")->required();
  sub->add_option("--shards", f->shards, "documents from token shards instead (a file, a glob or a directory, as "
                                         "axonn prepare writes them; cut at the document separator)");
  sub->add_option("--tokenizer", f->tokenizer, "gpt2 or a tokenizer path (default: the model's own: the one a "
                                               "checkpoint carries from the data `axonn prepare` made, or the Hugging "
                                               "Face directory's; else GPT-2's for GPT-2 models)");
  sub->add_option("--suffix-len", f->suffix_len, "tokens at the end of each document (cut to the model's context) "
                                                 "to reproduce");
  sub->add_option("--max-documents", f->max_documents, "score the first N documents that are long enough (0: all)");
  sub->add_option("--batch", f->batch, "documents generated together");
  sub->add_option("--grid", f->grid, "4D grid GX,GY,GZ,GD or tp-x=N,tp-y=N,fsdp=N,dp=N (default 1,1,1,<ranks>)");
  sub->add_option("--output", f->output, "write the summary and every document's ids and scores to this JSON file");
  sub->add_option("--doc-separator", f->doc_separator, "as for axonn prepare (fortune files: %)");
  sub->add_option("--exclude", f->exclude, "as for axonn prepare");
  sub->add_option("--invalid-utf8", f->invalid_utf8, "error|replace, as for axonn prepare");
  sub->callback([f, action] { *action = [f] { return run_memorization(*f); }; });
}

}  // namespace axonn::tools
