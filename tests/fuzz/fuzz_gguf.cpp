// The GGUF reader (checkpoint/gguf.hpp's GgufFile): the header, every metadata value and array, the tensor
// infos against the file's size; then each value printed and each tensor of a type it decodes read, as
// `axonn inspect` does.
#include "axonn/checkpoint/gguf.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  std::string path = fuzz::write_file("x.gguf", fuzz::as_text(data, size));
  (void)checkpoint::looks_like_gguf(path);
  fuzz::refused([&] {
    const checkpoint::GgufFile f(path);
    for (const auto& [key, value] : f.metadata()) {
      (void)value.str(5);
      (void)value.number();
      if (f.find(key) == nullptr) __builtin_trap();
    }
    for (const checkpoint::GgufTensorInfo& t : f.tensors()) {
      (void)t.shape_str();
      if (t.offset + t.bytes > f.file_bytes()) __builtin_trap();  // the reader checked it
      if (f.find_tensor(t.name) != &t) __builtin_trap();
      fuzz::refused([&] {
        if (f.read_floats(t).size() != t.elements()) __builtin_trap();
      });
    }
  });
  return 0;
}
