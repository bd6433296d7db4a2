// kernels/cuda.hpp — the op list on the GPU (built only with -DAXONN_CUDA=ON; link axonn_kernels_cuda).
//
// The functions axonn::kernels::cuda::* (declared in ops.hpp, same signatures and semantics as `ref`
// and `cpu`) take DEVICE pointers (cudaMalloc'd, never managed memory) for every buffer argument and
// run on the CUDA legacy default stream of the calling thread's current device, in issue order: a
// kernel sees everything queued before it, and a blocking cudaMemcpy after it sees its results.
// They return as soon as the work is queued, except sum_squares, which returns a number and so waits.
//
//   const auto& ops = axonn::kernels::cuda_ops();
//   ops.matmul_forward(d_out, d_inp, d_weight, d_bias, N, C, OC);   // cuBLAS, fp32
//   axonn::kernels::cuda_synchronize();                              // host waits for the GPU
//
// A RowReducer's all_reduce gets DEVICE arrays (the row statistics between the kernels' passes): the
// model's reducer calls a communicator that takes device buffers (NCCL or MPI-staged). fp32 only.
//
// The model reaches this backend through kernels::ops_for(Backend::kCuda) and device arenas, which
// exist once cuda_setup() has run (the CPU-only libraries do not link CUDA):
//   kernels::cuda_setup(local_rank);        // device local_rank % count; registers memory and ops
#pragma once

#include <string>

#include "axonn/kernels/ops.hpp"

namespace axonn::kernels {

// The table of axonn::kernels::cuda::* (device pointers).
const Ops& cuda_ops();

// Blocks the host until every kernel queued on the current device has finished; throws CudaError
// if one of them failed.
void cuda_synchronize();

// Selects device local_rank % device_count() for the calling thread (device selection by node-local
// rank), creates its context, and registers device memory (core/memory.hpp) and cuda_ops() as
// Backend::kCuda's table. Returns the device. InvalidArgument when no device is visible.
int cuda_setup(int local_rank);
// "NVIDIA H100 80GB HBM3 (device 0, sm_90, 79 GiB)" for the current device.
std::string cuda_device_name();
// The dense GEMM rate of the current device in TFLOP/s: cublasGemmEx, n x n x n, bf16 inputs, fp32
// accumulation and output, best of `reps` timed calls after a warm-up (the MFU denominator).
double cuda_measure_bf16_gemm_tflops(int n, int reps);

}  // namespace axonn::kernels
