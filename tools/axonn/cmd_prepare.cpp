// axonn prepare — text files, directories or JSON Lines to llm.c token shards (data/prepare.hpp).
//
// One process (it is threaded): under mpirun with several ranks it refuses, so that ranks do not
// race on the output. Progress: a bar on a terminal, plain lines (each tenth of the input) otherwise.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/data/prepare.hpp"
#include "axonn/text/tokenizer.hpp"
#include "commands.hpp"

namespace axonn::tools {

namespace {

struct PrepareFlags {
  data::PrepareOptions o;
  std::string token_type = "auto", invalid_utf8 = "error";
  bool quiet = false;
};

double mb(uint64_t bytes) { return static_cast<double>(bytes) / 1e6; }

// The progress display: \r-redrawn bar on a terminal, a line per 10% otherwise.
struct Progress {
  bool tty = ::isatty(::fileno(stderr)) != 0;
  int next_tenth = 1;
  void operator()(const data::PrepareProgress& p) {
    const double frac = p.bytes_total ? static_cast<double>(p.bytes_read) / static_cast<double>(p.bytes_total) : 1.0;
    const double rate = p.seconds > 0 ? mb(p.bytes_read) / p.seconds : 0.0;
    if (tty) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(frac * kWidth);
      std::fprintf(stderr, "\rprepare   [%-*s] %3.0f%%  %.1f/%.1f MB  %.2f MB/s  %lld documents  %lld tokens", kWidth,
                   std::string(static_cast<size_t>(filled), '#').c_str(), frac * 100, mb(p.bytes_read),
                   mb(p.bytes_total), rate, static_cast<long long>(p.documents), static_cast<long long>(p.tokens));
      std::fflush(stderr);
      return;
    }
    if (frac * 10 < next_tenth) return;
    while (next_tenth <= frac * 10) next_tenth++;
    log_info("prepare   %3.0f%%  %.1f/%.1f MB  %.2f MB/s  %lld documents  %lld tokens", frac * 100, mb(p.bytes_read),
             mb(p.bytes_total), rate, static_cast<long long>(p.documents), static_cast<long long>(p.tokens));
  }
  void done() const {
    if (tty) std::fprintf(stderr, "\n");
  }
};

}  // namespace

void add_prepare_command(CLI::App& app, Action* action) {
  auto f = std::make_shared<PrepareFlags>();
  data::PrepareOptions& o = f->o;
  auto* sub = app.add_subcommand("prepare", "tokenise text into llm.c token shards (train and validation splits)");
  sub->footer("Example:\n  axonn prepare --tokenizer gpt2 --output data/ corpus/");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--tokenizer", o.tokenizer_name,
                  "gpt2 (GPT-2's files, fetched by scripts/fetch-gpt2-tokenizer.sh), or a tokenizer.json, "
                  "vocab.json / encoder.json, SentencePiece .model, or a directory holding one")
      ->required();
  sub->add_option("--output", o.output, "directory for the shards (train_*.bin, val_*.bin, prepare.json)")->required();
  sub->add_option("--val-fraction", o.val_fraction,
                  "fraction of the documents held out for validation, spread evenly through the corpus");
  sub->add_option("--shard-size", o.shard_tokens, "tokens per shard (llm.c's FineWeb shards: 10^8)");
  sub->add_option("--token-type", f->token_type,
                  "auto|uint16|uint32: uint16 (llm.c's GPT-2 shards) or uint32 (llm.c's Llama 3 shards, magic "
                  "20240801); auto: uint16 for vocabularies up to 65,535 ids");
  sub->add_option("--threads", o.threads, "encoding threads (0: one per core); the output is the same for any number");
  sub->add_option("--doc-separator", o.documents.separator,
                  "a line exactly equal to this ends a document inside a text file (fortune files: %); empty: each "
                  "file is one document");
  sub->add_option("--exclude", o.documents.exclude, "skip files whose name matches this glob inside directories "
                  "(repeatable), e.g. '*.dat'");
  sub->add_option("--invalid-utf8", f->invalid_utf8,
                  "error|replace: text that is not UTF-8 is an error naming the file and offset, or is replaced "
                  "by U+FFFD");
  sub->add_flag("--dedup", o.dedup, "drop documents whose text repeats an earlier document's exactly");
  sub->add_flag("--overwrite", o.overwrite, "replace --output if it exists and is not empty");
  sub->add_flag("--quiet", f->quiet, "no progress");
  sub->add_option("INPUT", o.inputs, "text files, JSON Lines files (.jsonl, a \"text\" field per line) or directories")
      ->required();
  sub->callback([f, action] {
    *action = [f] {
      AXONN_CHECK_ARG(comm::Runtime::process_world_size() == 1,
                      "axonn prepare runs as one process (it uses threads: --threads); run it without mpirun");
      data::PrepareOptions& opts = f->o;
      opts.token_type = data::parse_token_type(f->token_type);
      AXONN_CHECK_ARG(f->invalid_utf8 == "error" || f->invalid_utf8 == "replace",
                      "--invalid-utf8 must be error or replace, got '", f->invalid_utf8, "'");
      opts.documents.invalid_utf8 = f->invalid_utf8 == "replace" ? text::InvalidUtf8::kReplace : text::InvalidUtf8::kError;
      auto tok = text::load_tokenizer(opts.tokenizer_name);
      log_info("tokenizer %s: %d ids, document separator %d", tok->describe().c_str(), tok->vocab_size(),
               tok->document_separator());
      Progress progress;
      auto r = data::prepare(*tok, opts, [&](const data::PrepareProgress& p) {
        if (!f->quiet) progress(p);
      });
      if (!f->quiet) progress.done();
      const std::string dropped =
          r.duplicates_skipped ? ", " + std::to_string(r.duplicates_skipped) + " duplicates dropped" : "";
      log_info("prepare   %lld documents (%lld validation%s), %.2f MB of text in %.2f s: %.2f MB/s on %d thread%s "
               "(%.2f MB/s per thread)",
               static_cast<long long>(r.documents), static_cast<long long>(r.val_documents), dropped.c_str(),
               mb(r.bytes), r.seconds, mb(r.bytes) / r.seconds, r.threads, r.threads > 1 ? "s" : "",
               mb(r.bytes) / r.seconds / r.threads);
      if (r.documents_split)
        log_info("prepare   %lld document%s longer than %.1f MB encoded in pieces cut at spaces (bounded memory)",
                 static_cast<long long>(r.documents_split), r.documents_split > 1 ? "s" : "", mb(r.piece_bytes));
      log_info("train     %lld tokens in %zu shard%s (%s)", static_cast<long long>(r.train_tokens), r.train_shards.size(),
               r.train_shards.size() == 1 ? "" : "s", r.token_bytes == 2 ? "uint16" : "uint32");
      log_info("val       %lld tokens in %zu shard%s", static_cast<long long>(r.val_tokens), r.val_shards.size(),
               r.val_shards.size() == 1 ? "" : "s");
      log_info("output    %s", opts.output.c_str());
      return 0;
    };
  });
}

}  // namespace axonn::tools
