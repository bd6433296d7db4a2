// axonn tokenizer — train a SentencePiece model on your own text, and look at what a tokenizer does.
//
//   axonn tokenizer train --vocab-size 8000 --output my.model corpus/
//   axonn tokenizer encode --tokenizer gpt2 "Hello world"        # 15496,995
//   axonn tokenizer decode --tokenizer gpt2 15496,995            # Hello world
//   axonn tokenizer info --tokenizer tokenizer.json
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/output_file.hpp"
#include "axonn/text/documents.hpp"
#include "axonn/text/sentencepiece.hpp"
#include "axonn/text/tokenizer.hpp"
#include "axonn/text/utf8.hpp"
#include "commands.hpp"

namespace axonn::tools {

namespace {

struct TrainFlags {
  text::SentencePieceTrainOptions o;
  text::DocumentOptions documents;
  std::vector<std::string> inputs;
  std::string output, invalid_utf8 = "error";
};

int run_train(const TrainFlags& f) {
  AXONN_CHECK_ARG(comm::Runtime::process_world_size() == 1, "axonn tokenizer train runs as one process; run it "
                                                            "without mpirun");
  AXONN_CHECK_ARG(f.invalid_utf8 == "error" || f.invalid_utf8 == "replace",
                  "--invalid-utf8 must be error or replace, got '", f.invalid_utf8, "'");
  std::vector<NamedPath> inputs;
  for (const std::string& in : f.inputs) inputs.push_back({"the input", in});
  check_output_file({"--output", f.output});
  check_output_apart({"--output", f.output}, inputs);
  text::DocumentOptions d = f.documents;
  d.invalid_utf8 = f.invalid_utf8 == "replace" ? text::InvalidUtf8::kReplace : text::InvalidUtf8::kError;
  text::DocumentReader reader(f.inputs, d);
  // SentencePiece learns from sentences: the documents' non-empty lines
  text::Document doc;
  std::istringstream lines;
  int64_t sentences = 0;
  auto next = [&](std::string& s) {
    while (true) {
      if (std::getline(lines, s)) {
        if (s.empty()) continue;
        sentences++;
        return true;
      }
      if (!reader.next(doc)) return false;
      lines.clear();
      lines.str(doc.text);
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  const std::string model = text::train_sentencepiece(f.o, next);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // check that it loads before it takes the name
  auto tok = text::SentencePieceTokenizer::from_serialized(model, "the trained model");
  checkpoint::write_file_atomic(f.output, model);
  log_info("tokenizer %s: SentencePiece %s, %d ids (unk 0, bos %d, eos %d), trained on %lld lines of %zu file%s in %.1f s",
           f.output.c_str(), f.o.model_type.c_str(), tok->vocab_size(), tok->bos_id(), tok->eos_id(),
           static_cast<long long>(sentences), reader.files().size(), reader.files().size() == 1 ? "" : "s", s);
  return 0;
}

}  // namespace

void add_tokenizer_command(CLI::App& app, Action* action) {
  auto* sub = app.add_subcommand("tokenizer", "train a SentencePiece tokenizer; encode, decode, describe");
  sub->require_subcommand(1);

  auto t = std::make_shared<TrainFlags>();
  auto* train = sub->add_subcommand("train", "train a SentencePiece BPE model on your text (Llama 2's settings)");
  train->footer("Example:\n  axonn tokenizer train --vocab-size 16000 --output tokenizer.model corpus/");
  train->option_defaults()->always_capture_default();
  train->add_option("--vocab-size", t->o.vocab_size, "number of ids")->required();
  train->add_option("--output", t->output, "the model file to write (e.g. tokenizer.model)")->required();
  train->add_option("--model-type", t->o.model_type, "bpe|unigram");
  train->add_option("--character-coverage", t->o.character_coverage,
                    "fraction of characters the alphabet covers; rarer ones are encoded as bytes");
  train->add_option("--max-sentences", t->o.max_sentences, "train on a sample of at most this many lines (0: all)");
  train->add_option("--threads", t->o.threads, "training threads (0: one per core)");
  train->add_option("--doc-separator", t->documents.separator, "as for axonn prepare");
  train->add_option("--exclude", t->documents.exclude, "skip files whose name matches this glob inside directories");
  train->add_option("--invalid-utf8", t->invalid_utf8, "error|replace, as for axonn prepare");
  train->add_flag("--verbose", t->o.verbose, "SentencePiece's own log");
  train->add_option("INPUT", t->inputs, "text files, JSON Lines files or directories")->required();
  train->callback([t, action] { *action = [t] { return run_train(*t); }; });

  struct Use {
    std::string tokenizer, input;
    bool ordinary = false;
  };
  auto u = std::make_shared<Use>();
  auto* encode = sub->add_subcommand("encode", "print the ids of a text, comma-separated");
  encode->footer("Example:\n  axonn tokenizer encode --tokenizer gpt2 \"Hello world\"");
  encode->add_option("--tokenizer", u->tokenizer, "gpt2 or a path, as for axonn prepare")->required();
  encode->add_flag("--ordinary", u->ordinary, "special-token text (<|endoftext|>) stays text");
  encode->add_option("TEXT", u->input, "the text; '-' or none: standard input (all of it, one text)");
  encode->callback([u, action] {
    *action = [u] {
      if (u->input.empty() || u->input == "-") {  // the text from a pipe: `cat doc.txt | axonn tokenizer encode`
        std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
        u->input = std::move(text);
      }
      // refused as axonn prepare refuses a file that is not UTF-8, so encode shows only ids prepare could write
      const auto bad = text::find_invalid_utf8(u->input);
      AXONN_CHECK_ARG(!bad, "TEXT is not UTF-8: ", text::where_invalid_utf8(u->input, *bad),
                      ". Give UTF-8 text (convert it, e.g. with iconv -f latin1 -t utf-8)");
      auto tok = text::load_tokenizer(u->tokenizer);
      const auto ids = u->ordinary ? tok->encode_ordinary(u->input) : tok->encode(u->input);
      std::string line;
      for (size_t i = 0; i < ids.size(); i++) line += (i ? "," : "") + std::to_string(ids[i]);
      if (comm::world()->rank() == 0) std::printf("%s\n", line.c_str());
      return 0;
    };
  });
  auto* decode = sub->add_subcommand("decode", "print the text of comma-separated ids");
  decode->footer("Example:\n  axonn tokenizer decode --tokenizer gpt2 15496,995");
  decode->add_option("--tokenizer", u->tokenizer, "gpt2 or a path, as for axonn prepare")->required();
  decode->add_option("IDS", u->input, "ids, e.g. 15496,995")->required();
  decode->callback([u, action] {
    *action = [u] {
      auto tok = text::load_tokenizer(u->tokenizer);
      const std::string s = tok->decode(text::parse_ids(u->input));
      if (comm::world()->rank() != 0) return 0;
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::printf("\n");
      return 0;
    };
  });
  auto* info = sub->add_subcommand("info", "what a tokenizer is: kind, vocabulary, special ids");
  info->footer("Example:\n  axonn tokenizer info --tokenizer gpt2");
  info->add_option("--tokenizer", u->tokenizer, "gpt2 or a path")->required();
  info->callback([u, action] {
    *action = [u] {
      auto tok = text::load_tokenizer(u->tokenizer);
      if (comm::world()->rank() != 0) return 0;
      std::printf("tokenizer  %s\nvocab      %d\neot        %d\nbos        %d\neos        %d\nseparator  %d\nencodes    %s\n",
                  tok->describe().c_str(), tok->vocab_size(), tok->eot_id(), tok->bos_id(), tok->eos_id(),
                  tok->document_separator(), tok->can_encode() ? "yes" : "no (decode only)");
      return 0;
    };
  });
}

}  // namespace axonn::tools
