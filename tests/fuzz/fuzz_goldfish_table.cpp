// Goldfish's hash table file (model/goldfish.hpp): float32 values in [0, 1).
#include "axonn/model/goldfish.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  std::string path = fuzz::write_file("table.bin", fuzz::as_text(data, size));
  fuzz::refused([&] { (void)model::load_goldfish_table(path); });
  return 0;
}
