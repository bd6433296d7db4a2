#include "core/cuda/stream.hpp"

#include <mutex>
#include <vector>

#include "core/cuda/cuda_check.hpp"

namespace axonn::cuda_detail {

int current_device() {
  int device = 0;
  AXONN_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

cudaStream_t compute_stream(int device) {
  // Each thread caches the streams it has seen (a launch asks for its stream every time); the
  // process-wide table, under a lock, makes sure every thread gets the same stream per device.
  thread_local std::vector<cudaStream_t> seen;
  const auto d = static_cast<size_t>(device);
  if (d < seen.size() && seen[d] != nullptr) return seen[d];

  static std::mutex mu;
  static std::vector<cudaStream_t> streams;  // never destroyed: they go with the CUDA context at exit
  cudaStream_t s = nullptr;
  {
    std::lock_guard lock(mu);
    if (d >= streams.size()) streams.resize(d + 1, nullptr);
    if (streams[d] == nullptr) {
      DeviceGuard guard(device);  // a stream belongs to the device current when it is created
      // Default priority: the NCCL streams are created at the highest priority, so communication
      // kernels get SMs ahead of compute.
      AXONN_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
    }
    s = streams[d];
  }
  if (d >= seen.size()) seen.resize(d + 1, nullptr);
  seen[d] = s;
  return s;
}

cudaStream_t compute_stream() { return compute_stream(current_device()); }

DeviceGuard::DeviceGuard(int device) {
  AXONN_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) {
    AXONN_CUDA_CHECK(cudaSetDevice(device));
    switched_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (switched_) (void)cudaSetDevice(previous_);
}

}  // namespace axonn::cuda_detail
