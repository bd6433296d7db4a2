#include "core/cuda/device_buffer.hpp"

#include <utility>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/stream.hpp"

namespace axonn::cuda_detail {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) AXONN_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  // A destructor cannot throw; at process exit the runtime may already be unloaded, which
  // cudaFree reports and we ignore (the memory goes with the context).
  if (ptr_ != nullptr) {
    (void)cudaFree(ptr_);
    (void)cudaGetLastError();
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::upload(const void* host, size_t n, size_t offset) {
  AXONN_CHECK(offset + n <= bytes_, "upload of ", n, " bytes at ", offset, " into a buffer of ", bytes_);
  if (n == 0) return;
  // On the compute stream, after the kernels queued there; waited, so `host` may change at once.
  cudaStream_t s = compute_stream();
  AXONN_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(ptr_) + offset, host, n, cudaMemcpyHostToDevice, s));
  AXONN_CUDA_CHECK(cudaStreamSynchronize(s));
}

void DeviceBuffer::download(void* host, size_t n, size_t offset) const {
  AXONN_CHECK(offset + n <= bytes_, "download of ", n, " bytes at ", offset, " from a buffer of ", bytes_);
  if (n == 0) return;
  // After the kernels queued on the compute stream (the producers), and waited for.
  cudaStream_t s = compute_stream();
  AXONN_CUDA_CHECK(cudaMemcpyAsync(host, static_cast<const char*>(ptr_) + offset, n, cudaMemcpyDeviceToHost, s));
  AXONN_CUDA_CHECK(cudaStreamSynchronize(s));
}

void DeviceBuffer::zero() {
  // Queued on the compute stream: ordered before the kernels queued after it, no host wait.
  if (bytes_ > 0) AXONN_CUDA_CHECK(cudaMemsetAsync(ptr_, 0, bytes_, compute_stream()));
}

void DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  release();
  AXONN_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  bytes_ = bytes;
}

}  // namespace axonn::cuda_detail
