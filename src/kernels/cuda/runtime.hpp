// kernels/cuda/runtime.hpp — what every CUDA kernel file shares on the host side: the stream, the
// cuBLAS handle, a scratch buffer, and the cuBLAS check (private to axonn_kernels_cuda).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <source_location>
#include <string_view>

#include "axonn/core/error.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/stream.hpp"

namespace axonn::kernels::cuda::detail {

// The stream every kernel, cuBLAS call and copy of this backend is queued on: the compute stream of
// the current device (core/cuda/stream.hpp: non-blocking, one per device). NOT ordered with the
// legacy default stream: use cudaMemcpyAsync/cudaMemsetAsync on stream(), and
// cudaStreamSynchronize(stream()) where the host reads a result. Overlap with NCCL comes from each
// communicator's own stream, ordered against this one by events.
inline cudaStream_t stream() { return cuda_detail::compute_stream(); }

// The calling thread's cuBLAS handle for the current device, bound to stream(), created on first
// use and kept for the life of the thread (never destroyed: at exit the context goes anyway).
cublasHandle_t cublas();

// A device buffer of at least `bytes`, owned by the calling thread and reused by the next call:
// valid until then. For the small reductions that return a value to the host (sum_squares).
void* scratch(size_t bytes);

CudaError cublas_error(cublasStatus_t status, std::string_view call,
                       const std::source_location& loc = std::source_location::current());

// cuBLAS takes int dimensions.
inline int to_blas_int(int64_t n, const char* what) {
  AXONN_CHECK_ARG(n >= 0 && n <= INT_MAX, "cuda kernels: ", what, " = ", n,
                  " does not fit cuBLAS's int dimensions; use smaller micro-batches");
  return static_cast<int>(n);
}

}  // namespace axonn::kernels::cuda::detail

#define AXONN_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                             \
    const cublasStatus_t axonn_cublas_rc_ = (call);                                                \
    if (axonn_cublas_rc_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                    \
      throw ::axonn::kernels::cuda::detail::cublas_error(axonn_cublas_rc_, #call,                  \
                                                         std::source_location::current());         \
  } while (0)
