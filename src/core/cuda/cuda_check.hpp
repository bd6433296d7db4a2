// core/cuda/cuda_check.hpp — CUDA runtime errors to axonn::CudaError (private to the GPU backends).
//
// Every CUDA runtime call is wrapped, and every kernel launch is followed by a check of
// cudaGetLastError(), so a failure is reported where it happened, with the call's text and the
// source location, rather than at some later synchronisation:
//
//   AXONN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
//   my_kernel<<<grid, block, 0, stream>>>(...);
//   AXONN_CUDA_CHECK_LAUNCH();
//
// Asynchronous errors (a kernel that faults) surface at the next synchronising call, which is
// checked too; the message then names that call.
#pragma once

#include <cuda_runtime.h>

#include <source_location>
#include <string_view>

#include "axonn/core/error.hpp"

namespace axonn::cuda_detail {

// "cudaErrorInvalidValue: invalid argument in 'cudaMalloc(&p, n)' at src/x.cu:12"
CudaError cuda_error(cudaError_t code, std::string_view call,
                     const std::source_location& loc = std::source_location::current());

// Number of visible CUDA devices; 0 when there is none or no usable driver (never throws). Clears
// the sticky "no device" error so later calls are not confused by it.
int device_count() noexcept;

}  // namespace axonn::cuda_detail

#define AXONN_CUDA_CHECK(call)                                                                   \
  do {                                                                                           \
    const cudaError_t axonn_cuda_rc_ = (call);                                                   \
    if (axonn_cuda_rc_ != cudaSuccess) [[unlikely]]                                              \
      throw ::axonn::cuda_detail::cuda_error(axonn_cuda_rc_, #call, std::source_location::current()); \
  } while (0)

// After every kernel launch: a bad configuration (grid too large, too much shared memory) is
// reported by cudaGetLastError(), not by the launch itself.
#define AXONN_CUDA_CHECK_LAUNCH() AXONN_CUDA_CHECK(cudaGetLastError())
