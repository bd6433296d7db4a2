// core/dtype.hpp — element types of tensors and files, and bf16 <-> fp32 conversion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace axonn {

enum class DType : uint8_t { kF32, kBF16, kI32, kI64, kU16 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU16: return "u16";
  }
  return "?";
}

// bf16 is the upper half of an fp32; widening is exact.
inline float bf16_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even (NaN kept a quiet NaN), as PyTorch and llm.c do.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// A precision as every command spells it: "fp32" (also "f32", "float32") or "bf16" (also "bfloat16").
// InvalidArgument naming `flag` otherwise. The one parser of --dtype (train, convert, bench comm, the
// benchmarks).
DType parse_precision(std::string_view text, std::string_view flag = "--dtype");
// "fp32" or "bf16": a precision as --dtype writes it.
std::string_view precision_name(DType t);

enum class Device : uint8_t { kCpu, kCuda };

}  // namespace axonn
