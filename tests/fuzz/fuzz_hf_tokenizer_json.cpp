// A Hugging Face tokenizer.json of a byte-level BPE model (text/bpe.hpp), then used on a short text.
#include "axonn/text/bpe.hpp"
#include "fuzz_common.hpp"
#include "tokenizer_use.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  std::string path = fuzz::write_file("tokenizer.json", fuzz::as_text(data, size));
  fuzz::refused([&] { fuzz::use_tokenizer(*text::load_hf_tokenizer_json(path)); });
  return 0;
}
