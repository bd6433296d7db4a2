// tensor/tensor.hpp — a non-owning view: pointer + shape + dtype + device.
//
// Storage is owned by an Arena (one allocation per kind of state, as in llm.c); tensors are views
// into it and are cheap to copy. Row-major and contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "axonn/core/dtype.hpp"
#include "axonn/tensor/shape.hpp"

namespace axonn {

class Tensor {
 public:
  Tensor() = default;
  Tensor(void* data, Shape shape, DType dtype = DType::kF32, Device device = Device::kCpu)
      : data_(data), shape_(shape), dtype_(dtype), device_(device) {}

  void* data() const { return data_; }
  float* f32() const {
    AXONN_DCHECK(dtype_ == DType::kF32, "tensor is ", dtype_name(dtype_), ", not f32");
    return static_cast<float*>(data_);
  }
  // bf16 elements (the upper halves of fp32 values, core/dtype.hpp).
  uint16_t* bf16() const {
    AXONN_DCHECK(dtype_ == DType::kBF16, "tensor is ", dtype_name(dtype_), ", not bf16");
    return static_cast<uint16_t*>(data_);
  }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return data_ != nullptr; }

  // Slice i of the first dimension of a stacked tensor, e.g. layer l of an [L, C] parameter.
  Tensor operator[](int64_t i) const {
    AXONN_DCHECK(shape_.ndim() >= 1 && i >= 0 && i < shape_[0], "index ", i, " out of ", shape_.str());
    Shape inner = shape_.drop_front();
    auto* p = static_cast<char*>(data_) + static_cast<size_t>(i) * static_cast<size_t>(inner.numel()) * dtype_size(dtype_);
    return Tensor(p, inner, dtype_, device_);
  }

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
};

}  // namespace axonn
