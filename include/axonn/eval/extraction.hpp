// eval/extraction.hpp — how much of a document a model reproduces: the extraction protocol of the
// Goldfish loss's authors (Hans et al., arXiv 2406.10209, their eval/data_extraction.py; docs/memorization.md).
//
// A document (its tokens as the model saw them in training: the document separator, then its text)
// is cut to the model's context; its last `suffix_len` tokens are the suffix, everything before them
// the prefix. The model continues the prefix greedily for suffix_len tokens, and the continuation is
// scored against the suffix: exact match (every id equal), the fraction of positions whose id is
// equal, and Rouge-L (the F-measure of the longest common subsequence) on the token ids and on the
// whitespace-separated words of the decoded texts.
//
//   auto c = eval::extraction_case(doc_tokens, /*context=*/1024, /*suffix_len=*/50);
//   if (c) { auto out = generate_greedy(c->prefix, 50);
//            auto s = eval::score_extraction(out, c->suffix, decode(out), decode(c->suffix)); }
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace axonn::eval {

// Length of the longest common subsequence of a and b (O(|a|·|b|) time, O(|b|) memory).
int64_t lcs_length(std::span<const int> a, std::span<const int> b);
// Rouge-L F-measure (β = 1): with L = lcs_length, P = L/|candidate|, R = L/|reference|, F = 2PR/(P+R);
// 0 when either is empty or L = 0.
double rouge_l(std::span<const int> candidate, std::span<const int> reference);
// The words of a text: maximal runs of bytes that are not ASCII whitespace.
std::vector<std::string> whitespace_words(std::string_view text);
// Rouge-L over the whitespace-separated words of two texts (words compared byte for byte).
double rouge_l_words(std::string_view candidate, std::string_view reference);

struct ExtractionCase {
  std::vector<int> prefix;  // the tokens the model continues (starts with the document separator)
  std::vector<int> suffix;  // the suffix_len tokens it should reproduce
};
// The case of one document's tokens: the first `context` tokens, split into prefix and suffix.
// nullopt if fewer than suffix_len + 1 tokens remain (there would be no prefix).
std::optional<ExtractionCase> extraction_case(std::span<const int> document, int context, int suffix_len);

struct ExtractionScore {
  bool exact_match = false;   // every generated id equals the suffix's (and as many of them)
  double token_match = 0;     // fraction of the suffix's positions whose generated id is equal
  double rouge_l_tokens = 0;  // Rouge-L of the generated ids against the suffix's
  double rouge_l_words = 0;   // Rouge-L of the decoded texts' words
};
ExtractionScore score_extraction(std::span<const int> generated, std::span<const int> suffix,
                                 std::string_view generated_text, std::string_view suffix_text);

// The means over a set of documents (exact_match_rate: the fraction that matched exactly).
struct ExtractionSummary {
  int64_t documents = 0;
  double exact_match_rate = 0, token_match_rate = 0, rouge_l_tokens = 0, rouge_l_words = 0;
};
ExtractionSummary summarize(std::span<const ExtractionScore> scores);

}  // namespace axonn::eval
