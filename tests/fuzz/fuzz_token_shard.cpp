// llm.c's token shards (data/token_dataset.hpp): the header, the size, the ids against a vocabulary;
// then a corpus of the shard and its document starts, as training reads them.
#include "axonn/data/token_dataset.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  std::string path = fuzz::write_file("shard.bin", fuzz::as_text(data, size));
  for (int vocab : {0, 50257}) {
    fuzz::refused([&] {
      data::TokenCorpus corpus({path}, vocab);
      int64_t sum = 0;
      for (int64_t i = 0; i < corpus.num_tokens(); i++) sum += corpus.token(i);
      (void)corpus.document_starts(50256);
      (void)corpus.describe();
      (void)sum;
    });
  }
  return 0;
}
