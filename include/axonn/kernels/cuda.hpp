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
// Current limits (docs/gpu.md): fp32 only; a RowReducer must be null (the reducer's callback runs on
// the host over host arrays; a sharded LayerNorm or cross-entropy on the device needs a device-side
// reducer, i.e. an NCCL all-reduce on the statistics), otherwise InvalidArgument is thrown.
#pragma once

#include "axonn/kernels/ops.hpp"

namespace axonn::kernels {

// The table of axonn::kernels::cuda::* (device pointers).
const Ops& cuda_ops();

// Blocks the host until every kernel queued on the current device has finished; throws CudaError
// if one of them failed.
void cuda_synchronize();

}  // namespace axonn::kernels
