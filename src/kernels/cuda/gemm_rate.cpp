// kernels/cuda/gemm_rate.cpp — the GPU's dense bf16 GEMM rate, measured: what train/peak.hpp takes as MFU's peak.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/kernels/cuda.hpp"
#include "core/cuda/device_buffer.hpp"
#include "runtime.hpp"

namespace axonn::kernels {

double cuda_measure_bf16_gemm_tflops(int n, int reps) {
  AXONN_CHECK_ARG(n > 0 && reps > 0, "bf16 GEMM peak: n and reps must be positive, got ", n, ", ", reps);
  const size_t elems = static_cast<size_t>(n) * static_cast<size_t>(n);
  // Inputs with varied values (zeros would draw less power and overstate the sustained rate).
  std::vector<uint16_t> host(elems);
  uint32_t state = 12345u;
  for (size_t i = 0; i < elems; i++) {
    state = state * 1664525u + 1013904223u;
    host[i] = f32_to_bf16(static_cast<float>(state >> 8) / 16777216.0f - 0.5f);
  }
  cuda_detail::DeviceBuffer a(elems * 2), b(elems * 2), c(elems * 4);
  a.upload(host.data(), elems * 2);
  b.upload(host.data(), elems * 2);
  cublasHandle_t h = cuda::detail::cublas();
  const float alpha = 1.0f, beta = 0.0f;
  auto gemm = [&] {
    AXONN_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, a.data(), CUDA_R_16BF, n,
                                    b.data(), CUDA_R_16BF, n, &beta, c.data(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
  };
  gemm();  // warm-up: heuristics, clocks
  AXONN_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t start = nullptr, stop = nullptr;
  AXONN_CUDA_CHECK(cudaEventCreate(&start));
  AXONN_CUDA_CHECK(cudaEventCreate(&stop));
  double best = 0.0;
  try {
    for (int r = 0; r < reps; r++) {
      AXONN_CUDA_CHECK(cudaEventRecord(start, cuda::detail::stream()));
      gemm();
      AXONN_CUDA_CHECK(cudaEventRecord(stop, cuda::detail::stream()));
      AXONN_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      AXONN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (ms > 0) best = std::max(best, 2.0 * n * static_cast<double>(n) * n / (ms * 1e-3) / 1e12);
    }
  } catch (...) {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
    throw;
  }
  AXONN_CUDA_CHECK(cudaEventDestroy(start));
  AXONN_CUDA_CHECK(cudaEventDestroy(stop));
  return best;
}

}  // namespace axonn::kernels
