// The GGUF reader (checkpoint/gguf.hpp's GgufFile): the header, every metadata value and array, the tensor
// infos against the file's size; then each value printed and each tensor of a type it decodes read, as
// `axonn inspect` does; then the file as a model (GgufModel): its configuration, its tokenizer (used as the
// tokenizer harnesses use theirs) and, for a small model, its weights.
#include "axonn/checkpoint/gguf.hpp"
#include "axonn/model/spec.hpp"
#include "fuzz_common.hpp"
#include "tokenizer_use.hpp"

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
  fuzz::refused([&] {
    const checkpoint::GgufModel m(path);
    if (auto tok = m.tokenizer()) fuzz::use_tokenizer(*tok);
    if (m.config().num_parameters() > (int64_t{1} << 20)) return;  // the file is small; its claims may not be
    Arena params("parameters");
    model::reserve_params(params, model::model_spec(m.config()));
    params.allocate();
    m.load(params);
  });
  return 0;
}
