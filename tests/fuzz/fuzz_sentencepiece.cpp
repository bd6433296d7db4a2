// A SentencePiece model (text/sentencepiece.hpp): the library parses the protobuf; our wrapper checks
// what it loaded (ids, specials). Then used on a short text.
#include "axonn/text/sentencepiece.hpp"
#include "fuzz_common.hpp"
#include "tokenizer_use.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  std::string path = fuzz::write_file("tokenizer.model", fuzz::as_text(data, size));
  fuzz::refused([&] { fuzz::use_tokenizer(text::SentencePieceTokenizer(path)); });
  return 0;
}
