// kernels/cuda.hpp — the op list on the GPU (built only with -DAXONN_CUDA=ON; link axonn_kernels_cuda).
//
// The functions axonn::kernels::cuda::* (declared in ops.hpp, same signatures and semantics as `ref`
// and `cpu`) take DEVICE pointers (cudaMalloc'd, never managed memory) for every buffer argument and
// run on the compute stream of the calling thread's current device (cuda_compute_stream(): one
// non-blocking stream per device), in issue order: a kernel sees everything queued before it on that
// stream. They return as soon as the work is queued, except sum_squares, which returns a number and
// so waits. The compute stream is NOT ordered with the legacy default stream: copy with
// cudaMemcpyAsync on cuda_compute_stream() and synchronise that stream before the host reads.
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

// Blocks the host until every kernel queued on the current device has finished (every stream:
// compute and communication); throws CudaError if one of them failed.
void cuda_synchronize();

// The compute stream of the calling thread's current device, as a cudaStream_t (void* here, so this
// header needs no CUDA header): where the kernels run; pass it to Work::wait_on and to
// NcclOptions::compute_stream (the default there). Created on first use, never destroyed.
void* cuda_compute_stream();

}  // namespace axonn::kernels
