// kernels/cuda/runtime.cpp — cuBLAS handles, scratch memory and the Ops table of the CUDA backend.
#include "runtime.hpp"

#include <sstream>
#include <vector>

#include "axonn/kernels/cuda.hpp"
#include "core/cuda/device_buffer.hpp"

namespace axonn::kernels {

const Ops& cuda_ops() {
  // every op of the list but the casts (no copies of the weights)
  static const Ops filled = [] {
    Ops table{};
    AXONN_FILL_FP32_OPS(cuda)
    return table;
  }();
  return filled;
}

void cuda_synchronize() { AXONN_CUDA_CHECK(cudaDeviceSynchronize()); }

void* cuda_compute_stream() { return cuda_detail::compute_stream(); }

}  // namespace axonn::kernels

namespace axonn::kernels::cuda::detail {

using cuda_detail::current_device;

cublasHandle_t cublas() {
  thread_local std::vector<cublasHandle_t> handles;  // indexed by device
  const int device = current_device();
  if (handles.size() <= static_cast<size_t>(device)) handles.resize(static_cast<size_t>(device) + 1, nullptr);
  cublasHandle_t& h = handles[static_cast<size_t>(device)];
  if (h == nullptr) {
    AXONN_CUBLAS_CHECK(cublasCreate(&h));
    AXONN_CUBLAS_CHECK(cublasSetStream(h, stream()));  // the compute stream of this device, for good
    // Plain fp32 arithmetic (no TF32): the fp32 path must match the CPU reference tightly.
    AXONN_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  }
  return h;
}

void* scratch(size_t bytes) {
  thread_local cuda_detail::DeviceBuffer buffer;
  thread_local int buffer_device = -1;
  const int device = current_device();
  if (device != buffer_device) {
    buffer = cuda_detail::DeviceBuffer();
    buffer_device = device;
  }
  buffer.reserve(bytes);
  return buffer.data();
}

CudaError cublas_error(cublasStatus_t status, std::string_view call, const std::source_location& loc) {
  std::ostringstream os;
  os << cublasGetStatusName(status) << ": " << cublasGetStatusString(status) << " in '" << call << "' at "
     << loc.file_name() << ":" << loc.line();
  return CudaError(os.str());
}

}  // namespace axonn::kernels::cuda::detail
