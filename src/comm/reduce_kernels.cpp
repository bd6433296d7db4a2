#include "reduce_kernels.hpp"

#include <cmath>

#include "axonn/core/error.hpp"

namespace axonn::comm::detail {

void bf16_sum(const uint16_t* in, uint16_t* inout, size_t n) {
  for (size_t i = 0; i < n; ++i) inout[i] = f32_to_bf16(bf16_to_f32(in[i]) + bf16_to_f32(inout[i]));
}

void bf16_max(const uint16_t* in, uint16_t* inout, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float a = bf16_to_f32(in[i]), b = bf16_to_f32(inout[i]);
    // std::fmax would drop a NaN; a NaN gradient must stay visible.
    if (std::isnan(a) || a > b) inout[i] = in[i];
  }
}

void divide_in_place(void* buf, size_t count, DType dtype, int divisor) {
  const auto d = static_cast<float>(divisor);
  switch (dtype) {
    case DType::kF32: {
      // Multiplying by 1/n would round twice; divide, as the unsharded average does.
      auto* p = static_cast<float*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] /= d;
      return;
    }
    case DType::kBF16: {
      auto* p = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] = f32_to_bf16(bf16_to_f32(p[i]) / d);
      return;
    }
    default: break;
  }
  AXONN_CHECK(false, "divide_in_place on ", dtype_name(dtype), " data");
}

}  // namespace axonn::comm::detail
