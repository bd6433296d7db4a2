#include "core/cuda/cuda_check.hpp"

#include <sstream>

namespace axonn::cuda_detail {

CudaError cuda_error(cudaError_t code, std::string_view call, const std::source_location& loc) {
  std::ostringstream os;
  os << cudaGetErrorName(code) << ": " << cudaGetErrorString(code) << " in '" << call << "' at "
     << loc.file_name() << ":" << loc.line();
  return CudaError(os.str());
}

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // reset the error state the failed query left
    return 0;
  }
  return n;
}

}  // namespace axonn::cuda_detail
