// The extraction protocol's pieces: LCS and Rouge-L against hand-computed values and a full-table
// LCS, the prefix/suffix cut, and the scores.
#include <gtest/gtest.h>

#include <random>

#include "axonn/core/error.hpp"
#include "axonn/eval/extraction.hpp"

namespace axonn::eval {
namespace {

// The textbook LCS over the whole (|a|+1) x (|b|+1) table: the oracle of the one-row version.
int64_t lcs_full_table(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<std::vector<int64_t>> t(a.size() + 1, std::vector<int64_t>(b.size() + 1, 0));
  for (size_t i = 1; i <= a.size(); i++)
    for (size_t j = 1; j <= b.size(); j++)
      t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
  return t[a.size()][b.size()];
}

TEST(Extraction, LcsKnownValues) {
  EXPECT_EQ(lcs_length(std::vector<int>{1, 2, 3, 4}, std::vector<int>{1, 3, 4}), 3);
  EXPECT_EQ(lcs_length(std::vector<int>{1, 2, 3}, std::vector<int>{4, 5}), 0);
  EXPECT_EQ(lcs_length(std::vector<int>{}, std::vector<int>{1}), 0);
  // ABCBDAB vs BDCABA: LCS 4 (BCBA), the CLRS example
  EXPECT_EQ(lcs_length(std::vector<int>{1, 2, 3, 2, 4, 1, 2}, std::vector<int>{2, 4, 3, 1, 2, 1}), 4);
}

TEST(Extraction, LcsEqualsFullTableOnRandomSequences) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; trial++) {
    std::vector<int> a(rng() % 40), b(rng() % 40);
    const int alphabet = 2 + static_cast<int>(rng() % 6);
    for (int& x : a) x = static_cast<int>(rng() % static_cast<unsigned>(alphabet));
    for (int& x : b) x = static_cast<int>(rng() % static_cast<unsigned>(alphabet));
    ASSERT_EQ(lcs_length(a, b), lcs_full_table(a, b)) << "trial " << trial;
  }
}

TEST(Extraction, RougeLIsTheLcsFMeasure) {
  // candidate 4 ids, reference 5, LCS 3: P = 3/4, R = 3/5, F = 2PR/(P+R) = 2/3
  EXPECT_NEAR(rouge_l(std::vector<int>{1, 2, 3, 9}, std::vector<int>{1, 2, 7, 3, 8}), 2.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(rouge_l(std::vector<int>{5, 6}, std::vector<int>{5, 6}), 1.0);
  EXPECT_DOUBLE_EQ(rouge_l(std::vector<int>{}, std::vector<int>{5, 6}), 0.0);
  EXPECT_DOUBLE_EQ(rouge_l(std::vector<int>{1}, std::vector<int>{2}), 0.0);
}

TEST(Extraction, WordsSplitOnAsciiWhitespace) {
  EXPECT_EQ(whitespace_words("  the cat\tsat\n\non  "), (std::vector<std::string>{"the", "cat", "sat", "on"}));
  EXPECT_TRUE(whitespace_words(" \n\t").empty());
  // "the cat sat on the mat" vs "the cat on the mat": LCS 5, P = 5/5, R = 5/6
  EXPECT_NEAR(rouge_l_words("the cat on the mat", "the cat sat on the mat"), 2 * (5.0 / 6.0) / (1 + 5.0 / 6.0), 1e-12);
  EXPECT_DOUBLE_EQ(rouge_l_words("Cat", "cat"), 0.0);  // words compare byte for byte
}

TEST(Extraction, CaseCutsTheContextThenTheSuffix) {
  std::vector<int> doc(100);
  for (int i = 0; i < 100; i++) doc[static_cast<size_t>(i)] = i;
  auto c = extraction_case(doc, 64, 10);
  ASSERT_TRUE(c.has_value());
  ASSERT_EQ(c->prefix.size(), 54u);
  ASSERT_EQ(c->suffix.size(), 10u);
  EXPECT_EQ(c->prefix.front(), 0);
  EXPECT_EQ(c->suffix.front(), 54);
  EXPECT_EQ(c->suffix.back(), 63);
  auto whole = extraction_case(doc, 1024, 50);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->prefix.size(), 50u);
  EXPECT_EQ(whole->suffix.back(), 99);
  EXPECT_FALSE(extraction_case(std::span<const int>(doc).first(50), 1024, 50).has_value());
  EXPECT_TRUE(extraction_case(std::span<const int>(doc).first(51), 1024, 50).has_value());
  EXPECT_THROW(extraction_case(doc, 50, 50), InvalidArgument);
  EXPECT_THROW(extraction_case(doc, 64, 0), InvalidArgument);
}

TEST(Extraction, ScoresAndTheirMeans) {
  const std::vector<int> suffix{1, 2, 3, 4};
  auto exact = score_extraction(suffix, suffix, "a b", "a b");
  EXPECT_TRUE(exact.exact_match);
  EXPECT_DOUBLE_EQ(exact.token_match, 1.0);
  EXPECT_DOUBLE_EQ(exact.rouge_l_tokens, 1.0);
  EXPECT_DOUBLE_EQ(exact.rouge_l_words, 1.0);
  // shifted by one: no position equal, LCS 3 of 4
  auto shifted = score_extraction(std::vector<int>{9, 1, 2, 3}, suffix, "x a", "a b");
  EXPECT_FALSE(shifted.exact_match);
  EXPECT_DOUBLE_EQ(shifted.token_match, 0.0);
  EXPECT_DOUBLE_EQ(shifted.rouge_l_tokens, 0.75);
  EXPECT_DOUBLE_EQ(shifted.rouge_l_words, 0.5);
  // stopped early: shorter than the suffix is never an exact match
  auto short_one = score_extraction(std::vector<int>{1, 2}, suffix, "", "a b");
  EXPECT_FALSE(short_one.exact_match);
  EXPECT_DOUBLE_EQ(short_one.token_match, 0.5);
  const std::vector<ExtractionScore> all{exact, shifted, short_one};
  auto m = summarize(all);
  EXPECT_EQ(m.documents, 3);
  EXPECT_DOUBLE_EQ(m.exact_match_rate, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.token_match_rate, 0.5);
  EXPECT_EQ(summarize({}).documents, 0);
}

}  // namespace
}  // namespace axonn::eval
