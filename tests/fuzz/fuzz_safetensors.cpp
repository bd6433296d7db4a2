// The safetensors reader (checkpoint/safetensors.hpp): the header length, the JSON header, every
// entry's dtype, shape and offsets; then every tensor copied out, as a checkpoint load does.
#include <optional>
#include <vector>

#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/tensor/arena.hpp"
#include "fuzz_common.hpp"

namespace {
// The shape as a Shape (at most Shape::kMaxDims dimensions; nullopt for more).
std::optional<axonn::Shape> shape_of(const std::vector<int64_t>& d) {
  switch (d.size()) {
    case 0: return axonn::Shape{};
    case 1: return axonn::Shape{d[0]};
    case 2: return axonn::Shape{d[0], d[1]};
    case 3: return axonn::Shape{d[0], d[1], d[2]};
    case 4: return axonn::Shape{d[0], d[1], d[2], d[3]};
    case 5: return axonn::Shape{d[0], d[1], d[2], d[3], d[4]};
    case 6: return axonn::Shape{d[0], d[1], d[2], d[3], d[4], d[5]};
    default: return std::nullopt;
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  std::string path = fuzz::write_file("x.safetensors", fuzz::as_text(data, size));
  (void)checkpoint::looks_like_safetensors(path);
  fuzz::refused([&] {
    checkpoint::SafetensorsFile f(path);
    (void)f.metadata();
    for (const checkpoint::TensorInfo& t : f.tensors()) {
      (void)t.shape_str();
      const checkpoint::TensorInfo* found = f.find(t.name);
      if (!found || found->begin != t.begin) __builtin_trap();
      std::optional<Shape> shape = shape_of(t.shape);
      if (!shape) continue;
      Arena a("fuzz");
      a.reserve(t.name, *shape, t.dtype == DType::kBF16 ? DType::kF32 : t.dtype);
      a.allocate();
      f.read(t.name, a.tensor(0));
    }
  });
  return 0;
}
