// GPT-2's tokenizer files (text/bpe.hpp): vocab.json and merges.txt, given as one input split at the
// first "\n#---\n"; the tokenizer is then used on a short text.
#include "axonn/text/bpe.hpp"
#include "fuzz_common.hpp"
#include "tokenizer_use.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  auto [vocab, merges] = fuzz::split_at(fuzz::as_text(data, size), "\n#---\n");
  std::string vocab_path = fuzz::write_file("vocab.json", vocab);
  std::string merges_path = fuzz::write_file("merges.txt", merges);
  fuzz::refused([&] { fuzz::use_tokenizer(*text::load_gpt2_bpe(vocab_path, merges_path)); });
  return 0;
}
