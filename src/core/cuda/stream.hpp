// core/cuda/stream.hpp — the compute stream and a device guard (private to the GPU backends).
//
// Every kernel, cuBLAS call and host<->device copy of axonn runs on ONE compute stream per device:
// non-blocking (no implicit ordering with the legacy default stream, and none with the
// communicators' streams, so NCCL collectives overlap with compute), created once per device on first
// use and kept for the life of the process. Work on it is ordered by issue; another stream orders
// against it only through events (the NCCL communicator records one here before each collective, and
// Work::wait_on makes this stream wait for a collective's end event).
//
// Consequences for code on the GPU side:
//  * never use cudaMemcpy / cudaMemset / the legacy default stream (nullptr) for data the kernels
//    use: they are not ordered with this stream. Use cudaMemcpyAsync / cudaMemsetAsync on
//    compute_stream(), and cudaStreamSynchronize(compute_stream()) where the host needs the data
//    (DeviceBuffer::upload/download do exactly that);
//  * cudaFree and cudaMalloc synchronise the device, so freeing a buffer is safe.
#pragma once

#include <cuda_runtime.h>

namespace axonn::cuda_detail {

// The compute stream of the calling thread's current device (of `device`).
cudaStream_t compute_stream();
cudaStream_t compute_stream(int device);

// The calling thread's current device.
int current_device();

// Makes `device` current for the scope, and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace axonn::cuda_detail
