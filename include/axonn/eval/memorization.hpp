// eval/memorization.hpp — how much of its training data a model reproduces (`axonn memorization`,
// docs/memorization.md): every document's greedy continuation of its prefix, scored against its
// suffix (eval/extraction.hpp), through the KV-cache generation of infer/generator.hpp on any grid.
//
//   infer::Generator gen(config, grid, /*sequences=*/8, config.max_seq_len, kernels::Backend::kCpu);
//   checkpoint::load_weights(source, grid, gen.model());
//   auto docs = eval::documents_from_text(inputs, doc_options, *tokenizer);
//   eval::MemorizationReport r = eval::measure_memorization(gen, docs, {.suffix_len = 50}, stop_ids);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/eval/extraction.hpp"
#include "axonn/infer/generator.hpp"
#include "axonn/text/documents.hpp"
#include "axonn/text/tokenizer.hpp"

namespace axonn::eval {

// The documents of text inputs (text files, directories, JSON Lines; text/documents.hpp) as the model
// saw them in training when `axonn prepare` tokenised them: the tokenizer's document separator, then
// the document's tokens.
std::vector<std::vector<int>> documents_from_text(const std::vector<std::string>& inputs,
                                                  const text::DocumentOptions& options, const text::Tokenizer& tok);
// The documents of token shards (a file, a glob or a directory's training shards; data::find_shards),
// cut at the separator tokens that begin them (data::TokenCorpus::document_starts); tokens before the
// first separator belong to no document. vocab_size bounds the ids (0: unchecked).
std::vector<std::vector<int>> documents_from_shards(const std::string& shards, int separator, int vocab_size);

struct MemorizationOptions {
  int suffix_len = 50;        // the tokens to reproduce (the authors' 50)
  int64_t max_documents = 0;  // score at most this many (the first ones; 0: all)
};

struct DocumentResult {
  int64_t document = 0;  // index among the inputs' documents
  int64_t prefix_tokens = 0;
  std::vector<int> generated, suffix;
  ExtractionScore score;
};

struct MemorizationReport {
  ExtractionSummary summary;
  int64_t skipped = 0;  // documents too short for a prefix and a suffix
  std::vector<DocumentResult> documents;
  double seconds = 0;
};

// Scores the documents: each cut to gen.context() tokens (eval::extraction_case), its prefix continued
// greedily for suffix_len tokens (ending early at one of stop_ids, as the authors' generation does),
// gen.sequences() documents at a time. `tok` decodes the texts for the words' Rouge-L. Collective over
// the generator's grid; every rank passes the same documents and gets the same report.
MemorizationReport measure_memorization(infer::Generator& gen, const text::Tokenizer& tok,
                                        const std::vector<std::vector<int>>& documents,
                                        const MemorizationOptions& options, const std::vector<int>& stop_ids);

// The report as JSON (summary, options, every document's ids and scores).
std::string report_json(const MemorizationReport& r, const MemorizationOptions& options, const std::string& model);

}  // namespace axonn::eval
