#include "axonn/text/llmc_tokenizer.hpp"

#include <cstdint>
#include <cstring>

#include "axonn/core/error.hpp"
#include "files.hpp"

namespace axonn::text {

LlmcTokenizer::LlmcTokenizer(const std::string& path) : path_(path) {
  const std::string f = detail::read_file(path, "llm.c tokenizer");
  const std::string where = "llm.c tokenizer '" + path + "'";
  constexpr size_t kHeader = 256 * sizeof(int32_t);
  AXONN_CHECK_IO(f.size() >= kHeader, where, " is ", f.size(), " bytes, shorter than its 1024-byte header");
  int32_t h[4];
  std::memcpy(h, f.data(), sizeof h);
  AXONN_CHECK_IO(h[0] == kLlmcTokenizerMagic, where, " has magic ", h[0], ", not ", kLlmcTokenizerMagic);
  AXONN_CHECK_IO(h[1] == 1 || h[1] == 2, where, " has version ", h[1], "; llm.c writes versions 1 and 2");
  const int n = h[2];
  AXONN_CHECK_IO(n > 0, where, " declares ", n, " tokens");
  if (h[1] == 1) {
    AXONN_CHECK_IO(n == 50257, where, " is version 1 with ", n, " tokens; version 1 is GPT-2's 50257");
    eot_ = 50256;
  } else {
    eot_ = h[3];
    AXONN_CHECK_IO(eot_ >= 0 && eot_ < n, where, " names end-of-text id ", eot_, ", outside its ", n, " tokens");
  }
  eos_ = eot_;
  // each token takes at least its length byte: a count the file cannot hold is refused before anything is
  // allocated for it (fuzz_llmc_tokenizer: a header declaring 167 million tokens)
  AXONN_CHECK_IO(static_cast<size_t>(n) <= f.size() - kHeader, where, " declares ", n, " tokens, more than the ",
                 f.size() - kHeader, " bytes after its header can hold (each token takes at least its length byte)");
  bytes_of_.reserve(static_cast<size_t>(n));
  size_t pos = kHeader;
  for (int id = 0; id < n; id++) {
    AXONN_CHECK_IO(pos < f.size(), where, " is truncated: it ends before token ", id, " of ", n);
    const auto len = static_cast<unsigned char>(f[pos++]);
    AXONN_CHECK_IO(len > 0, where, " gives token ", id, " length 0");
    AXONN_CHECK_IO(pos + len <= f.size(), where, " is truncated inside token ", id, " of ", n);
    bytes_of_.emplace_back(f, pos, len);
    pos += len;
  }
  AXONN_CHECK_IO(pos == f.size(), where, " has ", f.size() - pos, " bytes after its last token");
}

std::vector<int> LlmcTokenizer::encode(std::string_view) const {
  throw InvalidArgument(describe() +
                        " can only decode: it has no merges. To encode, give --tokenizer gpt2 (or GPT-2's "
                        "vocab.json and merges.txt, or a tokenizer.json)");
}

std::vector<int> LlmcTokenizer::encode_ordinary(std::string_view text) const { return encode(text); }

std::string LlmcTokenizer::decode(std::span<const int> ids) const {
  std::string out;
  for (int id : ids) {
    AXONN_CHECK_ARG(id >= 0 && id < vocab_size(), "token id ", id, " is not in the vocabulary of ", describe(), " (",
                    vocab_size(), " ids)");
    out += bytes_of_[static_cast<size_t>(id)];
  }
  return out;
}

}  // namespace axonn::text
