// llm.c's gpt2_tokenizer.bin (text/llmc_tokenizer.hpp), then every id decoded.
#include "axonn/text/llmc_tokenizer.hpp"
#include "fuzz_common.hpp"
#include "tokenizer_use.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  std::string path = fuzz::write_file("tokenizer.bin", fuzz::as_text(data, size));
  fuzz::refused([&] { fuzz::use_tokenizer(text::LlmcTokenizer(path)); });
  return 0;
}
