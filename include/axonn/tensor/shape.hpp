// tensor/shape.hpp — a small fixed-capacity shape (row-major, contiguous).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "axonn/core/error.hpp"

namespace axonn {

class Shape {
 public:
  static constexpr int kMaxDims = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    AXONN_CHECK(dims.size() <= kMaxDims, "a shape has at most ", kMaxDims, " dimensions");
    for (int64_t d : dims) {
      AXONN_CHECK(d >= 0, "negative dimension ", d);
      dims_[ndim_++] = d;
    }
  }

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= dims_[static_cast<size_t>(i)];
    return n;
  }
  // The shape without its first dimension (one slice of a stacked [L, ...] tensor).
  Shape drop_front() const {
    Shape s;
    for (int i = 1; i < ndim_; ++i) s.dims_[static_cast<size_t>(s.ndim_++)] = dims_[static_cast<size_t>(i)];
    return s;
  }
  bool operator==(const Shape& o) const {
    if (ndim_ != o.ndim_) return false;
    for (int i = 0; i < ndim_; ++i)
      if (dims_[static_cast<size_t>(i)] != o.dims_[static_cast<size_t>(i)]) return false;
    return true;
  }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < ndim_; ++i) s += (i ? ", " : "") + std::to_string(dims_[static_cast<size_t>(i)]);
    return s + "]";
  }

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

}  // namespace axonn
