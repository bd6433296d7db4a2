// kernels/cuda/setup.cpp — device selection, and the registration of device memory and of the
// cuda Ops table, which the CPU-only libraries (core, kernels) cannot reach by themselves.
#include <cuda_runtime.h>

#include <string>

#include "axonn/core/memory.hpp"
#include "axonn/kernels/cuda.hpp"
#include "core/cuda/cuda_check.hpp"
#include "runtime.hpp"

namespace axonn::kernels {

namespace {

// Device memory of the model: one plain cudaMalloc per allocation (never managed memory), zeroed
// with cudaMemset; everything queued on the kernels' stream, so copies and kernels run in issue order.
void* device_allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t rc = cudaMalloc(&p, bytes);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: the context is still usable
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    throw CudaError("cudaMalloc of " + std::to_string(bytes >> 20) + " MiB failed (" + cudaGetErrorName(rc) +
                    "); the device has " + std::to_string(free_b >> 20) + " MiB free of " +
                    std::to_string(total_b >> 20));
  }
  const cudaError_t z = cudaMemsetAsync(p, 0, bytes, cuda::detail::stream());
  if (z != cudaSuccess) {
    (void)cudaFree(p);
    throw cuda_detail::cuda_error(z, "cudaMemsetAsync(p, 0, bytes, stream)");
  }
  return p;
}
void device_release(void* p) noexcept { (void)cudaFree(p); }
void device_zero(void* p, size_t bytes) {
  AXONN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cuda::detail::stream()));
}
void device_copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  AXONN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda::detail::stream()));
}
void device_copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows) {
  if (width == 0 || rows == 0) return;
  AXONN_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice,
                                     cuda::detail::stream()));
}
// Copies from and to pageable host memory, queued on the kernels' stream (so after every kernel queued
// before them) and waited for: the host buffer is free (upload) or filled (download) on return.
void device_upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  AXONN_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, cuda::detail::stream()));
  AXONN_CUDA_CHECK(cudaStreamSynchronize(cuda::detail::stream()));
}
void device_download(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  AXONN_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, cuda::detail::stream()));
  AXONN_CUDA_CHECK(cudaStreamSynchronize(cuda::detail::stream()));
}

void device_synchronize() { AXONN_CUDA_CHECK(cudaDeviceSynchronize()); }

const MemoryOps kDeviceMemory{Device::kCuda,  device_allocate, device_release,  device_zero,       device_copy,
                              device_copy_2d, device_upload,   device_download, device_synchronize};

}  // namespace

int cuda_setup(int local_rank) {
  const int n = cuda_detail::device_count();
  AXONN_CHECK_ARG(n > 0, "--kernels cuda: no CUDA device is visible to this process (check nvidia-smi and "
                         "CUDA_VISIBLE_DEVICES); use --kernels cpu to run on the host");
  AXONN_CHECK_ARG(local_rank >= 0, "cuda_setup: node-local rank must be >= 0, got ", local_rank);
  const int device = local_rank % n;
  AXONN_CUDA_CHECK(cudaSetDevice(device));
  AXONN_CUDA_CHECK(cudaFree(nullptr));  // create the context now, not in the first timed kernel
  register_device_memory(&kDeviceMemory);
  register_cuda_ops(&cuda_ops());
  register_cuda_bf16_ops(&cuda_bf16_ops());
  return device;
}

std::string cuda_device_name() {
  int device = 0;
  AXONN_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  AXONN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name) + " (device " + std::to_string(device) + ", sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
}

}  // namespace axonn::kernels
