// A Hugging Face config.json (checkpoint/hf.hpp): the model's configuration.
#include "axonn/checkpoint/hf.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  fuzz::refused([&] { (void)checkpoint::parse_hf_config_json(fuzz::as_text(data, size), "fuzz/config.json"); });
  return 0;
}
