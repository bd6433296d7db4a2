// data/prepare.hpp — text to llm.c token shards (`axonn prepare`; docs/text.md).
//
// Documents are read in order (text/documents.hpp), each is encoded as ordinary text (special-token
// text in a document stays text) with the document separator before it (tokenizer.hpp: BOS where
// the tokenizer has one, else end-of-text), and goes to the validation split or the training split:
// document i (counting the documents kept) is a validation document when floor((i+1)·F) >
// floor(i·F), which spreads exactly round-down(N·F) of them evenly through the corpus. Each split is
// cut into shards of `shard_tokens` tokens (documents run on across shard boundaries, as llm.c's
// shards do): DIR/train_000000.bin ..., DIR/val_000000.bin ..., and DIR/prepare.json records what
// was done. Encoding runs on `threads` threads over batches of documents whose results are written
// in document order, so the files are the same for any thread count.
//
// Nothing half-written: the shards go to DIR.tmp, renamed to DIR once complete; on any error the
// staging directory is removed and DIR is untouched. A document longer than 1 MiB is encoded in
// pieces cut at spaces (text::split_for_encoding), which bounds the memory encoding takes.
//
// Only what it owns (docs/text.md): prepare writes DIR, DIR.tmp, DIR.old and DIR.lock, nothing else.
// prepare.json ("format": "axonn-prepare") marks a directory prepare made; `overwrite` replaces only
// such a DIR, and a DIR.tmp or DIR.old left by a killed run is removed only if marked or empty. An
// input (or the tokenizer file) that is, lies inside or lies above DIR, DIR.tmp or DIR.old is refused
// (same device and inode), and so is a DIR that is a link. An flock on DIR.lock (O_NOFOLLOW), held
// for the whole run, stops a second run into the same DIR at once.
//
//   data::PrepareOptions o;  o.inputs = {"corpus/"};  o.output = "data/";
//   data::PrepareResult r = data::prepare(*text::load_tokenizer("gpt2"), o, nullptr);
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "axonn/text/documents.hpp"
#include "axonn/text/tokenizer.hpp"

namespace axonn::data {

enum class TokenType { kAuto, kUint16, kUint32 };
// "auto" | "uint16" | "uint32"; InvalidArgument otherwise.
TokenType parse_token_type(const std::string& s);

struct PrepareOptions {
  std::vector<std::string> inputs;
  text::DocumentOptions documents;
  std::string output;                  // DIR: must not exist, or be empty (or overwrite)
  std::string tokenizer_name;          // as given (recorded in prepare.json)
  double val_fraction = 0.05;          // of the documents, in [0, 1)
  int64_t shard_tokens = 100'000'000;  // llm.c's FineWeb shards hold 10^8 tokens
  TokenType token_type = TokenType::kAuto;  // auto: uint16 for vocabularies up to 65,535 ids
  int threads = 0;                     // 0: the hardware's
  bool dedup = false;                  // drop documents whose text repeats an earlier one's exactly
  bool overwrite = false;              // replace an existing, non-empty DIR that prepare made
};

struct PrepareProgress {
  uint64_t bytes_read, bytes_total;
  int64_t documents, tokens;
  double seconds;
};

struct PrepareResult {
  int64_t documents = 0, val_documents = 0, duplicates_skipped = 0;  // documents kept, of them validation
  int64_t documents_split = 0;  // longer than piece_bytes, so encoded in pieces (text::split_for_encoding)
  size_t piece_bytes = 0;
  int64_t train_tokens = 0, val_tokens = 0;
  uint64_t bytes = 0;  // of text encoded
  std::vector<std::string> train_shards, val_shards;
  int token_bytes = 2, threads = 1;
  double seconds = 0;
};

// Runs the whole preparation. `progress`, if set, is called from this thread after each batch.
// Throws InvalidArgument for bad options (a vocabulary that does not fit the token type, a
// fraction outside [0, 1), an existing output, an output that is not prepare's to replace or that
// another run holds) and IoError for bad input (non-UTF-8 text,
// malformed JSON Lines, unreadable files), before anything appears under `output`.
PrepareResult prepare(const text::Tokenizer& tok, const PrepareOptions& options,
                      const std::function<void(const PrepareProgress&)>& progress);

// The vocabulary size a directory made by prepare records (its prepare.json's vocab_size): what a model
// trained on it needs (axonn train --data DIR without --vocab). nullopt for anything else (a file, a
// glob, a directory prepare did not make, an incomplete one).
std::optional<int> prepared_vocab_size(const std::string& data);
// The directory DATA/tokenizer holding the files of the tokenizer that prepared DATA (prepare copies them
// there and records it in prepare.json's "tokenizer_dir"), or nullopt (not prepare's output, or older).
constexpr const char* kPreparedTokenizerDir = "tokenizer";
std::optional<std::string> prepared_tokenizer(const std::string& data);

}  // namespace axonn::data
