// core/cuda/device_buffer.hpp — one cudaMalloc'd allocation, owned (private to the GPU backends).
//
// Plain device memory, never managed (unified) memory: a host access to it is a bug that faults at
// once instead of migrating pages behind our back. Copies go through upload()/download() (blocking,
// ordered after the work already queued on the compute stream, core/cuda/stream.hpp) or through the
// caller's own cudaMemcpyAsync on data() (on the compute stream). The calling thread's current device
// must be the buffer's.
//
//   DeviceBuffer buf(n * sizeof(float));
//   buf.upload(host.data(), n * sizeof(float));
//   kernel<<<...>>>(buf.as<float>(), n);
//   buf.download(host.data(), n * sizeof(float));
#pragma once

#include <cstddef>

namespace axonn::cuda_detail {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` on the current device (nothing for 0); throws CudaError when it cannot.
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

  // Host <-> device on the compute stream, then waited (blocking); [offset, offset + n) must lie
  // inside the buffer.
  void upload(const void* host, size_t n, size_t offset = 0);
  void download(void* host, size_t n, size_t offset = 0) const;
  // Queued on the compute stream (ordered before later kernels; the host does not wait).
  void zero();
  // Frees and allocates `bytes` when the buffer is smaller (contents are not kept).
  void reserve(size_t bytes);

 private:
  void release() noexcept;

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace axonn::cuda_detail
