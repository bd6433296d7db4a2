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
// Limits of the fp32 table (docs/gpu.md): a RowReducer must be null (the reducer's callback runs on
// the host over host arrays; a sharded LayerNorm or cross-entropy on the device needs a device-side
// reducer, i.e. an NCCL all-reduce on the statistics), otherwise InvalidArgument is thrown.
#pragma once

#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"

namespace axonn::kernels {

// The table of axonn::kernels::cuda::* (device pointers).
const Ops& cuda_ops();

// The bf16 mixed-precision op list (kernels/ops_bf16.hpp) on the GPU: DEVICE pointers, the same stream and
// ordering as cuda_ops(). GEMMs through cuBLASLt (bf16 inputs, fp32 accumulation), a flash-style attention
// (head size a multiple of 8 up to 128), fp32 math everywhere with each bf16 output rounded once.
// Unlike the fp32 table, LayerNorm and cross-entropy take a RowReducer: it is called between the
// kernel's passes with DEVICE arrays (float, n values), and when its all_reduce returns, work queued
// afterwards on this stream must see the reduced values (it waits, or makes the stream wait).
const OpsBf16& cuda_bf16_ops();

// Blocks the host until every kernel queued on the current device has finished (every stream:
// compute and communication); throws CudaError if one of them failed.
void cuda_synchronize();

// The compute stream of the calling thread's current device, as a cudaStream_t (void* here, so this
// header needs no CUDA header): where the kernels run; pass it to Work::wait_on and to
// NcclOptions::compute_stream (the default there). Created on first use, never destroyed.
void* cuda_compute_stream();

}  // namespace axonn::kernels
