// The checkpoint manifest (checkpoint/checkpoint_dir.hpp): JSON text to a Manifest, and back.
#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  fuzz::refused([&] {
    checkpoint::Manifest m = checkpoint::manifest_from_json(fuzz::as_text(data, size), "fuzz/manifest.json");
    // what was accepted writes out and reads back
    (void)checkpoint::manifest_from_json(checkpoint::manifest_to_json(m), "fuzz/manifest.json (written back)");
  });
  return 0;
}
