// bench/cuda/cuda_timing.hpp — the GPU benchmarks' one clock: milliseconds per run of f() between two CUDA
// events on the stream the kernels run on (kernels::cuda_compute_stream()), after 3 warm-up runs.
#pragma once

#include <cuda_runtime.h>

#include "axonn/kernels/cuda.hpp"
#include "core/cuda/cuda_check.hpp"

namespace axonn::bench {

template <typename F>
double cuda_time_ms(int iters, F&& f) {
  auto* stream = static_cast<cudaStream_t>(axonn::kernels::cuda_compute_stream());
  for (int i = 0; i < 3; i++) f();
  cudaEvent_t start, stop;
  AXONN_CUDA_CHECK(cudaEventCreate(&start));
  AXONN_CUDA_CHECK(cudaEventCreate(&stop));
  AXONN_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; i++) f();
  AXONN_CUDA_CHECK(cudaEventRecord(stop, stream));
  AXONN_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  AXONN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  AXONN_CUDA_CHECK(cudaEventDestroy(start));
  AXONN_CUDA_CHECK(cudaEventDestroy(stop));
  return static_cast<double>(ms) / iters;
}

}  // namespace axonn::bench
