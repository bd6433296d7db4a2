#include <gtest/gtest.h>

#include <random>

#include "axonn/core/error.hpp"
#include "axonn/text/pretokenizer.hpp"
#include "axonn/text/utf8.hpp"
#include "text_test_util.hpp"

using namespace axonn;
using text::RegexSplitter;

namespace {

std::vector<std::string> pieces(const RegexSplitter& s, std::string_view text) {
  std::vector<std::string_view> v;
  s.split(text, v);
  return {v.begin(), v.end()};
}

using Strings = std::vector<std::string>;

}  // namespace

TEST(Utf8, FindsTheFirstInvalidByte) {
  EXPECT_FALSE(text::find_invalid_utf8("plain ASCII, long enough for the eight-byte skip").has_value());
  EXPECT_FALSE(text::find_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80").has_value());  // é € 😀
  EXPECT_EQ(text::find_invalid_utf8("abcdefghij\xFFz"), 10u);
  EXPECT_EQ(text::find_invalid_utf8("\xC0\xAF"), 0u);             // overlong '/'
  EXPECT_EQ(text::find_invalid_utf8("ab\xED\xA0\x80"), 2u);       // a surrogate, U+D800
  EXPECT_EQ(text::find_invalid_utf8("\xF4\x90\x80\x80"), 0u);     // above U+10FFFF
  EXPECT_EQ(text::find_invalid_utf8("ok\xE2\x82"), 2u);           // truncated at the end
}

// Unicode 15 §3.9, "U+FFFD Substitution of Maximal Subparts", Table 3-8's example: the bytes
// 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 decode to a FFFD FFFD FFFD b FFFD c FFFD FFFD d.
TEST(Utf8, ReplacesEachMaximalSubpartByOneReplacementCharacter) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(text::replace_invalid_utf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + r + r + r + "b" + r + "c" + r + r + "d");
  EXPECT_EQ(text::replace_invalid_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(text::replace_invalid_utf8("x\xE2\x82"), "x" + r);
}

TEST(Utf8, StreamReturnsOnlyWholeCharacters) {
  text::Utf8Stream s;
  EXPECT_EQ(s.push("a\xE2"), "a");
  EXPECT_EQ(s.push("\x82"), "");
  EXPECT_EQ(s.push("\xAC!"), "\xE2\x82\xAC!");
  EXPECT_EQ(s.push("\xFF"), "\xEF\xBF\xBD");  // can never start a character
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.finish(), "\xEF\xBF\xBD");      // unfinished at the end
  EXPECT_EQ(s.finish(), "");
}

// The vectors of spec models-text-goldfish.md §3.3 (checked there with Python's `regex`).
TEST(Gpt2Pretokenizer, SplitsLikeTheReference) {
  RegexSplitter s(text::kGpt2Pattern);
  EXPECT_EQ(pieces(s, "don't stop"), (Strings{"don", "'t", " stop"}));
  EXPECT_EQ(pieces(s, "a  b"), (Strings{"a", " ", " b"}));
  EXPECT_EQ(pieces(s, "x\n\ny"), (Strings{"x", "\n", "\n", "y"}));
  EXPECT_EQ(pieces(s, "end   "), (Strings{"end", "   "}));
  EXPECT_EQ(pieces(s, "3.14, hi!"), (Strings{"3", ".", "14", ",", " hi", "!"}));
  EXPECT_EQ(pieces(s, "  leading"), (Strings{" ", " leading"}));
  EXPECT_EQ(pieces(s, "\tTab"), (Strings{"\t", "Tab"}));
  // Unicode letters and digits by property: Cyrillic, CJK, Arabic-Indic digits
  EXPECT_EQ(pieces(s, "\xD0\xBF\xD1\x80\xD0\xB8 \xE4\xB8\xAD\xE6\x96\x87 \xD9\xA3\xD9\xA4"),
            (Strings{"\xD0\xBF\xD1\x80\xD0\xB8", " \xE4\xB8\xAD\xE6\x96\x87", " \xD9\xA3\xD9\xA4"}));
  EXPECT_EQ(pieces(s, ""), Strings{});
}

// Bytes that are not UTF-8 are never inside a match: each run of them is a piece of its own.
TEST(Gpt2Pretokenizer, KeepsInvalidBytesAsTheirOwnPieces) {
  RegexSplitter s(text::kGpt2Pattern);
  EXPECT_EQ(pieces(s, "ab\xFF\xFE" "cd"), (Strings{"ab", "\xFF\xFE", "cd"}));
  EXPECT_EQ(pieces(s, "\x80"), (Strings{"\x80"}));
  EXPECT_EQ(pieces(s, "hi \xC3"), (Strings{"hi", " ", "\xC3"}));
}

// Llama 3's pattern (its tokenizer.json; tiktoken's cl100k family), vectors worked out by hand.
TEST(Llama3Pretokenizer, SplitsDigitsInThreesAndContractionsInAnyCase) {
  RegexSplitter s(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  EXPECT_EQ(pieces(s, "12345"), (Strings{"123", "45"}));
  EXPECT_EQ(pieces(s, "I'M here"), (Strings{"I", "'M", " here"}));
  EXPECT_EQ(pieces(s, "Hello, world!"), (Strings{"Hello", ",", " world", "!"}));
  EXPECT_EQ(pieces(s, "$x a\n\nb"), (Strings{"$x", " a", "\n\n", "b"}));
  EXPECT_EQ(pieces(s, "  x"), (Strings{" ", " x"}));
}

TEST(RegexSplitter, PiecesAlwaysConcatenateToTheText) {
  RegexSplitter s(text::kGpt2Pattern);
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; i++) {
    const std::string t = test::random_bytes(rng, rng() % 64);
    std::string joined;
    for (const auto& p : pieces(s, t)) {
      EXPECT_FALSE(p.empty());
      joined += p;
    }
    ASSERT_EQ(joined, t);
  }
  // a pattern that can match the empty string must not loop
  RegexSplitter empty("x*");
  EXPECT_EQ(pieces(empty, "abxxc"), (Strings{"ab", "xx", "c"}));
}

TEST(RegexSplitter, LongWhitespaceRunsNeedNoSpecialCare) {
  RegexSplitter s(text::kGpt2Pattern);
  const std::string spaces(1 << 20, ' ');
  EXPECT_EQ(pieces(s, spaces + "x"), (Strings{spaces.substr(1), " x"}));
}

TEST(RegexSplitter, RejectsABadPatternWithPcre2sMessage) {
  try {
    RegexSplitter s("(unclosed");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("does not compile"), std::string::npos) << e.what();
  }
}
