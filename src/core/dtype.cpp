// core/dtype.cpp — precisions as users spell them (dtype.hpp).
#include "axonn/core/dtype.hpp"

#include <string>

#include "axonn/core/error.hpp"

namespace axonn {

DType parse_precision(std::string_view text, std::string_view flag) {
  if (text == "fp32" || text == "f32" || text == "float32") return DType::kF32;
  if (text == "bf16" || text == "bfloat16") return DType::kBF16;
  throw InvalidArgument("unknown " + std::string(flag) + " '" + std::string(text) + "'; use fp32 or bf16");
}

std::string_view precision_name(DType t) { return t == DType::kBF16 ? "bf16" : "fp32"; }

}  // namespace axonn
