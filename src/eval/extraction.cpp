#include "axonn/eval/extraction.hpp"

#include <algorithm>
#include <map>

#include "axonn/core/error.hpp"

namespace axonn::eval {

int64_t lcs_length(std::span<const int> a, std::span<const int> b) {
  // One row of the dynamic programme: row[j] = LCS of a[0..i) and b[0..j).
  std::vector<int64_t> row(b.size() + 1, 0);
  for (int x : a) {
    int64_t diagonal = 0;  // row[j - 1] of the previous i
    for (size_t j = 1; j <= b.size(); j++) {
      const int64_t above = row[j];
      row[j] = x == b[j - 1] ? diagonal + 1 : std::max(row[j], row[j - 1]);
      diagonal = above;
    }
  }
  return row[b.size()];
}

double rouge_l(std::span<const int> candidate, std::span<const int> reference) {
  if (candidate.empty() || reference.empty()) return 0.0;
  const double l = static_cast<double>(lcs_length(candidate, reference));
  if (l == 0) return 0.0;
  const double p = l / static_cast<double>(candidate.size());
  const double r = l / static_cast<double>(reference.size());
  return 2 * p * r / (p + r);
}

std::vector<std::string> whitespace_words(std::string_view text) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && space(text[i])) i++;
    size_t j = i;
    while (j < text.size() && !space(text[j])) j++;
    if (j > i) words.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

double rouge_l_words(std::string_view candidate, std::string_view reference) {
  // Words become ids (equal words, equal ids) so the LCS runs on integers.
  std::map<std::string, int> ids;
  auto to_ids = [&](std::string_view text) {
    std::vector<int> out;
    for (auto& w : whitespace_words(text)) out.push_back(ids.emplace(std::move(w), static_cast<int>(ids.size())).first->second);
    return out;
  };
  const std::vector<int> c = to_ids(candidate), r = to_ids(reference);
  return rouge_l(c, r);
}

std::optional<ExtractionCase> extraction_case(std::span<const int> document, int context, int suffix_len) {
  AXONN_CHECK_ARG(suffix_len >= 1, "the suffix must hold at least one token (got ", suffix_len, ")");
  AXONN_CHECK_ARG(context > suffix_len, "the context (", context, " tokens) must be longer than the suffix (",
                  suffix_len, ")");
  const size_t n = std::min(document.size(), static_cast<size_t>(context));
  if (n < static_cast<size_t>(suffix_len) + 1) return std::nullopt;
  const size_t cut = n - static_cast<size_t>(suffix_len);
  ExtractionCase c;
  c.prefix.assign(document.begin(), document.begin() + static_cast<std::ptrdiff_t>(cut));
  c.suffix.assign(document.begin() + static_cast<std::ptrdiff_t>(cut), document.begin() + static_cast<std::ptrdiff_t>(n));
  return c;
}

ExtractionScore score_extraction(std::span<const int> generated, std::span<const int> suffix,
                                 std::string_view generated_text, std::string_view suffix_text) {
  ExtractionScore s;
  s.exact_match = generated.size() == suffix.size() && std::equal(generated.begin(), generated.end(), suffix.begin());
  int64_t equal = 0;
  for (size_t i = 0; i < suffix.size() && i < generated.size(); i++) equal += generated[i] == suffix[i];
  s.token_match = suffix.empty() ? 0.0 : static_cast<double>(equal) / static_cast<double>(suffix.size());
  s.rouge_l_tokens = rouge_l(generated, suffix);
  s.rouge_l_words = rouge_l_words(generated_text, suffix_text);
  return s;
}

ExtractionSummary summarize(std::span<const ExtractionScore> scores) {
  ExtractionSummary m;
  m.documents = static_cast<int64_t>(scores.size());
  if (scores.empty()) return m;
  for (const auto& s : scores) {
    m.exact_match_rate += s.exact_match ? 1.0 : 0.0;
    m.token_match_rate += s.token_match;
    m.rouge_l_tokens += s.rouge_l_tokens;
    m.rouge_l_words += s.rouge_l_words;
  }
  const double n = static_cast<double>(scores.size());
  m.exact_match_rate /= n;
  m.token_match_rate /= n;
  m.rouge_l_tokens /= n;
  m.rouge_l_words /= n;
  return m;
}

}  // namespace axonn::eval
