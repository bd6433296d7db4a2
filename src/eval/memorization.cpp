#include "axonn/eval/memorization.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>

#include "axonn/core/error.hpp"
#include "axonn/data/token_dataset.hpp"

namespace axonn::eval {

std::vector<std::vector<int>> documents_from_text(const std::vector<std::string>& inputs,
                                                  const text::DocumentOptions& options, const text::Tokenizer& tok) {
  const int separator = tok.document_separator();
  AXONN_CHECK_ARG(separator >= 0, tok.describe(), " has neither a BOS nor an end-of-text token to begin documents with");
  std::vector<std::vector<int>> docs;
  text::DocumentReader reader(inputs, options);
  for (text::Document d; reader.next(d);) {
    std::vector<int> ids{separator};
    const std::vector<int> body = tok.encode(d.text);
    ids.insert(ids.end(), body.begin(), body.end());
    docs.push_back(std::move(ids));
  }
  return docs;
}

std::vector<std::vector<int>> documents_from_shards(const std::string& shards, int separator, int vocab_size) {
  data::TokenCorpus corpus(data::find_shards(shards), vocab_size);
  const std::vector<int64_t> starts = corpus.document_starts(separator);
  std::vector<std::vector<int>> docs;
  for (size_t d = 0; d < starts.size(); d++) {
    const int64_t end = d + 1 < starts.size() ? starts[d + 1] : corpus.num_tokens();
    std::vector<int> ids;
    ids.reserve(static_cast<size_t>(end - starts[d]));
    for (int64_t i = starts[d]; i < end; i++) ids.push_back(corpus.token(i));
    docs.push_back(std::move(ids));
  }
  return docs;
}

MemorizationReport measure_memorization(infer::Generator& gen, const text::Tokenizer& tok,
                                        const std::vector<std::vector<int>>& documents,
                                        const MemorizationOptions& options, const std::vector<int>& stop_ids) {
  AXONN_CHECK_ARG(options.suffix_len >= 1, "--suffix-len must be >= 1, got ", options.suffix_len);
  AXONN_CHECK_ARG(options.suffix_len < gen.context(), "--suffix-len ", options.suffix_len,
                  " leaves no prefix in the model's context of ", gen.context(), " tokens; use a shorter suffix");
  const auto t0 = std::chrono::steady_clock::now();
  MemorizationReport r;
  // the cases first (alike on every rank: a function of the documents alone)
  std::vector<ExtractionCase> cases;
  std::vector<int64_t> index;
  for (size_t d = 0; d < documents.size(); d++) {
    if (options.max_documents > 0 && static_cast<int64_t>(cases.size()) >= options.max_documents) break;
    auto c = extraction_case(documents[d], gen.context(), options.suffix_len);
    if (!c) {
      r.skipped++;
      continue;
    }
    cases.push_back(std::move(*c));
    index.push_back(static_cast<int64_t>(d));
  }
  infer::GenerateOptions o;
  o.max_new_tokens = options.suffix_len;
  o.sampling.temperature = 0;  // greedy, as the authors' extraction
  o.stop_ids = stop_ids;
  std::vector<ExtractionScore> scores;
  const size_t B = static_cast<size_t>(gen.sequences());
  for (size_t first = 0; first < cases.size(); first += B) {
    // up to B prompts at once (the generator runs a short last batch with copies of its first prompt)
    std::vector<std::vector<int>> prompts;
    for (size_t b = first; b < std::min(first + B, cases.size()); b++) prompts.push_back(cases[b].prefix);
    const std::vector<std::vector<int>> out = gen.generate(prompts, o);
    for (size_t b = 0; b < prompts.size(); b++) {
      const ExtractionCase& c = cases[first + b];
      std::vector<int> generated = out[b];
      // a stop id ends the continuation and is no part of the text
      if (!generated.empty() && std::find(stop_ids.begin(), stop_ids.end(), generated.back()) != stop_ids.end())
        generated.pop_back();
      DocumentResult d;
      d.document = index[first + b];
      d.prefix_tokens = static_cast<int64_t>(c.prefix.size());
      d.score = score_extraction(generated, c.suffix, tok.decode(generated), tok.decode(c.suffix));
      d.generated = std::move(generated);
      d.suffix = c.suffix;
      scores.push_back(d.score);
      r.documents.push_back(std::move(d));
    }
  }
  r.summary = summarize(scores);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string report_json(const MemorizationReport& r, const MemorizationOptions& options, const std::string& model) {
  using nlohmann::ordered_json;
  ordered_json docs = ordered_json::array();
  for (const DocumentResult& d : r.documents)
    docs.push_back({{"document", d.document},
                    {"prefix_tokens", d.prefix_tokens},
                    {"exact_match", d.score.exact_match},
                    {"token_match", d.score.token_match},
                    {"rouge_l_tokens", d.score.rouge_l_tokens},
                    {"rouge_l_words", d.score.rouge_l_words},
                    {"generated", d.generated},
                    {"suffix", d.suffix}});
  ordered_json j = {{"model", model},
                    {"suffix_len", options.suffix_len},
                    {"documents", r.summary.documents},
                    {"skipped", r.skipped},
                    {"seconds", r.seconds},
                    {"summary",
                     {{"documents", r.summary.documents},
                      {"exact_match_rate", r.summary.exact_match_rate},
                      {"token_match_rate", r.summary.token_match_rate},
                      {"rouge_l_tokens", r.summary.rouge_l_tokens},
                      {"rouge_l_words", r.summary.rouge_l_words}}},
                    {"per_document", docs}};
  return j.dump(1) + "\n";
}

}  // namespace axonn::eval
