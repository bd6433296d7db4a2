// tests/fuzz/tokenizer_use.hpp — what a tokenizer harness does with what it loaded: decode every id
// (a few thousand at most) and, where it can encode, a short text, which must decode back.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "axonn/text/tokenizer.hpp"

namespace axonn::fuzz {

inline void use_tokenizer(const text::Tokenizer& tok) {
  const int n = std::min(tok.vocab_size(), 4096);
  for (int id = 0; id < n; id++) (void)tok.decode(std::vector<int>{id});
  (void)tok.eot_id();
  (void)tok.document_separator();
  if (!tok.can_encode()) return;
  const std::string text = "Hello world, \xc3\xa9t\xc3\xa9 <|endoftext|> 123\n\t  !";
  std::vector<int> ids = tok.encode_ordinary(text);
  std::string back = tok.decode(ids);
  if (tok.decodes_by_concatenation() && back != text) __builtin_trap();  // decode(encode_ordinary(x)) == x
  (void)tok.encode(text);
}

}  // namespace axonn::fuzz
