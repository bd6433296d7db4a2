// text/llmc_tokenizer.hpp — llm.c's gpt2_tokenizer.bin, for decoding only.
//
// The file (llm.c's train_gpt2.py write_tokenizer; spec models-text-goldfish.md §3.2): a header of
// 256 int32 — magic 20240328, version (1 or 2), n tokens, and (version 2) the end-of-text id;
// version 1 means n = 50257 and end-of-text 50256 — then for each id a uint8 length L (1..255) and L
// raw bytes. There is no merge table, so it cannot encode. A token's bytes may be part of a UTF-8
// character; StreamDecoder (tokenizer.hpp) prints only whole characters.
#pragma once

#include <string>
#include <vector>

#include "axonn/text/tokenizer.hpp"

namespace axonn::text {

constexpr int kLlmcTokenizerMagic = 20240328;

class LlmcTokenizer final : public Tokenizer {
 public:
  // Reads and checks the file; IoError naming it and the problem (magic, version, a zero length,
  // truncation, bytes after the last token).
  explicit LlmcTokenizer(const std::string& path);

  std::string describe() const override { return "llm.c tokenizer (" + path_ + ")"; }
  int vocab_size() const override { return static_cast<int>(bytes_of_.size()); }
  bool can_encode() const override { return false; }
  std::vector<int> encode(std::string_view text) const override;
  std::vector<int> encode_ordinary(std::string_view text) const override;
  std::string decode(std::span<const int> ids) const override;

 private:
  std::string path_;
  std::vector<std::string> bytes_of_;
};

}  // namespace axonn::text
