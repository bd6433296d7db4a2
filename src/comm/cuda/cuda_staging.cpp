// comm/cuda/cuda_staging.cpp — device selection by node-local rank, and the CUDA copier of the
// MPI-staged communicator (comm/cuda.hpp).
#include <cuda_runtime.h>

#include "axonn/comm/cuda.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/stream.hpp"

namespace axonn::comm {
namespace {

// Copies on the compute stream of one device, through pinned host memory: the device -> host copy
// is queued after the kernels that produced the data, and synchronize() waits for both.
class CudaCopier final : public StagingCopier {
 public:
  CudaCopier() : device_(cuda_detail::current_device()), stream_(cuda_detail::compute_stream(device_)) {}

  void* allocate_host(size_t bytes) override {
    void* p = nullptr;
    // Pinned: the copies are DMA and truly asynchronous; page-aligned.
    const cudaError_t e = cudaMallocHost(&p, bytes);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw cuda_detail::cuda_error(e, ::axonn::detail::concat("cudaMallocHost of ", bytes,
                                                               " bytes for a staging buffer of the staged "
                                                               "communicator (pinned host memory exhausted? "
                                                               "use smaller buckets)"));
    }
    return p;
  }
  void free_host(void* p) noexcept override {
    (void)cudaFreeHost(p);  // waits for the device; at exit the runtime may be gone already: ignored
    (void)cudaGetLastError();
  }
  void to_host(void* host, const void* device, size_t bytes) override {
    cuda_detail::DeviceGuard guard(device_);
    AXONN_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
  }
  void to_device(void* device, const void* host, size_t bytes) override {
    cuda_detail::DeviceGuard guard(device_);
    AXONN_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void device_copy(void* dst, const void* src, size_t bytes) override {
    cuda_detail::DeviceGuard guard(device_);
    AXONN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void synchronize() override {
    cuda_detail::DeviceGuard guard(device_);
    AXONN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  int device_;
  cudaStream_t stream_;
};

}  // namespace

int select_device_by_local_rank() {
  const int lr = local_rank(), ls = local_size();
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    const std::string why = e != cudaSuccess
                                ? ::axonn::detail::concat(cudaGetErrorName(e), ": ", cudaGetErrorString(e))
                                : std::string("0 devices");
    throw CudaError(::axonn::detail::concat(
        "node-local rank ", lr, " of ", ls, ": no CUDA device visible (cudaGetDeviceCount: ", why,
        "); run on a machine with an NVIDIA GPU and its driver, check CUDA_VISIBLE_DEVICES, or use the CPU "
        "kernels"));
  }
  const int device = lr % count;
  AXONN_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  AXONN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  log_info("node-local rank %d of %d: CUDA device %d of %d (%s, sm_%d%d)", lr, ls, device, count, prop.name,
           prop.major, prop.minor);
  if (ls > count)
    log_warn("%d ranks on this node share %d CUDA device(s): fine for the MPI-staged communicator, but NCCL "
             "needs one device per rank",
             ls, count);
  return device;
}

std::shared_ptr<StagingCopier> cuda_copier() { return std::make_shared<CudaCopier>(); }

std::shared_ptr<Communicator> staged_cuda_from(std::shared_ptr<Communicator> host) {
  return staged_from(std::move(host), cuda_copier());
}

}  // namespace axonn::comm
