// GPU test helpers: skip visibly without a device, and device copies of host vectors.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cuda/device_buffer.hpp"

namespace axonn::test {

// Why this process cannot run GPU tests ("" when it can).
inline std::string no_gpu_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  }
  if (n == 0) return "cudaGetDeviceCount reports 0 devices";
  return "";
}

// A device copy of a host vector (or n zeroed elements).
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : buf_(host.size() * sizeof(T)), n_(host.size()) {
    buf_.upload(host.data(), n_ * sizeof(T));
  }
  explicit DeviceArray(size_t n) : buf_(n * sizeof(T)), n_(n) { buf_.zero(); }
  T* get() const { return buf_.as<T>(); }
  std::vector<T> host() const {
    std::vector<T> v(n_);
    buf_.download(v.data(), n_ * sizeof(T));
    return v;
  }

 private:
  cuda_detail::DeviceBuffer buf_;
  size_t n_;
};

}  // namespace axonn::test

// First line of every GPU test: without a usable device the test is reported SKIPPED (never passed).
#define AXONN_REQUIRE_GPU()                                                      \
  do {                                                                           \
    const std::string axonn_why_ = ::axonn::test::no_gpu_reason();               \
    if (!axonn_why_.empty()) GTEST_SKIP() << "no CUDA device: " << axonn_why_;   \
  } while (0)
