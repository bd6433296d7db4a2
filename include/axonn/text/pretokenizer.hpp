// text/pretokenizer.hpp — splitting text into pieces with a regular expression (PCRE2), before BPE.
//
// Byte-level BPE tokenisers first cut the text into pieces with a regex whose alternatives are
// tried in order (GPT-2's is kGpt2Pattern; Llama 3 ships its own in tokenizer.json). The pattern
// runs with PCRE2 in UTF mode with Unicode properties (\p{L}, \p{N}, and \s as Unicode space) and
// JIT-compiled. Every byte of the text lands in exactly one piece: the matches, and whatever lies
// between them (in GPT-2's pattern nothing does, except bytes that are not valid UTF-8: PCRE2's
// invalid-UTF mode lets no match include them, so each run of them is a piece of its own).
//
//   text::RegexSplitter split(text::kGpt2Pattern);
//   std::vector<std::string_view> pieces;
//   split.split("don't stop", pieces);   // "don", "'t", " stop"
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace axonn::text {

// GPT-2's pre-tokenizer (openai/gpt-2 encoder.py; tiktoken's "gpt2"; spec §3.3).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's (its tokenizer.json's Split regex; llama.cpp's pre-tokenizer "llama-bpe").
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class RegexSplitter {
 public:
  // Compiles `pattern`; throws InvalidArgument with PCRE2's message and the offset where it failed.
  explicit RegexSplitter(std::string_view pattern);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Appends the pieces of `text` to `out` in order; concatenated they are `text`. The views point
  // into `text`. Thread-safe (each call has its own match state).
  void split(std::string_view text, std::vector<std::string_view>& out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  std::string pattern_;
  std::unique_ptr<Compiled> re_;
};

}  // namespace axonn::text
