// kernels/cuda.hpp — the op list on the GPU (built only with -DAXONN_CUDA=ON; link axonn_kernels_cuda).
//
// The functions axonn::kernels::cuda::* (declared in ops.hpp, same signatures and semantics as `ref`
// and `cpu`) take DEVICE pointers (cudaMalloc'd, never managed memory) for every buffer argument and
// run on the compute stream of the calling thread's current device (cuda_compute_stream(): one
// non-blocking stream per device), in issue order: a kernel sees everything queued before it on that
// stream. They return as soon as the work is queued, except sum_squares, which returns its sums to
// the host and so waits (once for all the tensors it is given). The compute stream is NOT ordered with the legacy default stream: copy with
// cudaMemcpyAsync on cuda_compute_stream() and synchronise that stream before the host reads.
//
//   const auto& ops = axonn::kernels::cuda_ops();
//   ops.matmul_forward(d_out, d_inp, d_weight, d_bias, N, C, OC);   // cuBLAS, fp32
//   axonn::kernels::cuda_synchronize();                              // host waits for the GPU
//
// The row values of the ops in steps (the norms' statistics, the cross-entropy's max and sums) are DEVICE
// arrays: the model all-reduces them between the ops with a communicator that takes device buffers (NCCL
// or MPI-staged). The same holds for the bf16 table, cuda_bf16_ops().
//
// The model reaches this backend through kernels::ops_for(Backend::kCuda) and device arenas, which
// exist once cuda_setup() has run (the CPU-only libraries do not link CUDA):
//   kernels::cuda_setup(local_rank);        // device local_rank % count; registers memory and both tables
#pragma once

#include <string>

#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"

namespace axonn::kernels {

// The table of axonn::kernels::cuda::* (device pointers).
const Ops& cuda_ops();

// The bf16 mixed-precision op list (kernels/ops_bf16.hpp) on the GPU: DEVICE pointers, the same stream and
// ordering as cuda_ops(). GEMMs through cuBLASLt (bf16 inputs, fp32 accumulation), a flash-style attention
// (head size a multiple of 8 up to 128; see FlashAttention), fp32 math everywhere with each bf16 output
// rounded once. As in the fp32 table, the norms and the cross-entropy run in the caller's steps: the model
// all-reduces their row values (DEVICE arrays) between the ops, and work queued afterwards on this stream
// must see the reduced values (the communicator waits, or makes the stream wait).
const OpsBf16& cuda_bf16_ops();

// The flash attentions behind cuda_bf16_ops().attention_forward / attention_backward (same contract, all
// deterministic):
//   kTensorCores:    bf16 WMMA with fp32 accumulation, head size 64 or 128, every bf16 buffer 16-byte aligned;
//                    the probabilities (and dS) are rounded to bf16 before their second product, so results
//                    may differ from the fp32 math by 2^-8 of the sum of the terms' magnitudes;
//   kTensorCoresMma: the same conditions and bound, FlashAttention-2's kernels: mma.sync on register-resident
//                    fragments (the scores never leave registers), 45-103 KiB of shared memory a block. Tested
//                    on the CPU by the SIMT emulator (tests/unit/cuda_emu); chosen only by name until it has
//                    been measured on a GPU (docs/gpu.md);
//   kCudaCores:      fp32 math on CUDA cores, any head size that is a multiple of 8 up to 128.
// kDefault (what cuda_bf16_ops() runs): kTensorCores where they apply (and the device gives a block the
// shared memory they need: ~121 KiB at head size 128), else CUDA cores; the environment variable
// AXONN_FLASH_ATTENTION=simt forces the CUDA cores, =mma the register-resident tensor-core kernels (unset or
// "auto": the default; any other value is an InvalidArgument at the first attention call).
enum class FlashAttention { kDefault, kTensorCores, kCudaCores, kTensorCoresMma };
// cuda_bf16_ops() with both attention entries forced to one implementation (tests, benchmarks); kTensorCores
// where it does not apply throws InvalidArgument at the call. kDefault gives cuda_bf16_ops() itself.
const OpsBf16& cuda_bf16_ops(FlashAttention attention);
// What kDefault runs for this head size on the current device with 16-byte aligned buffers (kTensorCores,
// kCudaCores, or kTensorCoresMma by AXONN_FLASH_ATTENTION=mma), AXONN_FLASH_ATTENTION included.
FlashAttention cuda_flash_attention_for(int head_size);

// Blocks the host until every kernel queued on the current device has finished (every stream:
// compute and communication); throws CudaError if one of them failed.
void cuda_synchronize();

// The compute stream of the calling thread's current device, as a cudaStream_t (void* here, so this
// header needs no CUDA header): where the kernels run; pass it to Work::wait_on and to
// NcclOptions::compute_stream (the default there). Created on first use, never destroyed.
void* cuda_compute_stream();
// Selects device local_rank % device_count() for the calling thread (device selection by node-local
// rank), creates its context, and registers device memory (core/memory.hpp), cuda_ops() and
// cuda_bf16_ops() as Backend::kCuda's tables (ops_for, ops_bf16_for). Returns the device.
// InvalidArgument when no device is visible.
int cuda_setup(int local_rank);
// "NVIDIA H100 80GB HBM3 (device 0, sm_90, 79 GiB)" for the current device.
std::string cuda_device_name();
// The dense GEMM rate of the current device in TFLOP/s: cublasGemmEx, n x n x n, bf16 inputs, fp32
// accumulation and output, best of `reps` timed calls after a warm-up (the MFU denominator).
double cuda_measure_bf16_gemm_tflops(int n, int reps);

}  // namespace axonn::kernels
