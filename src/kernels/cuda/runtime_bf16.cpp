// kernels/cuda/runtime_bf16.cpp — the cuBLASLt handle and workspace, the bf16 scratch buffer, and the
// OpsBf16 table of the CUDA backend.
#include "runtime_bf16.hpp"

#include <mutex>
#include <vector>

#include "axonn/kernels/cuda.hpp"
#include "core/cuda/device_buffer.hpp"

namespace axonn::kernels {

const OpsBf16& cuda_bf16_ops() {
  // the ops on bf16, the fp32 table's gradient norm, the casts, the KV cache's
  static const OpsBf16 filled = [] {
    OpsBf16 table{};
    AXONN_OPS_ON_E(AXONN_FILL_OPS, cuda_bf16) AXONN_OPS_CASTS(AXONN_FILL_OPS, cuda_bf16)
    AXONN_OPS_KV_CACHE(AXONN_FILL_OPS, cuda_bf16)
    table.sum_squares = cuda::sum_squares;  // of the fp32 gradients
    return table;
  }();
  return filled;
}

const OpsBf16& cuda_bf16_ops(FlashAttention attention) {
  auto forced = [](auto forward, auto backward) {
    OpsBf16 table = cuda_bf16_ops();
    table.attention_forward = forward;
    table.attention_backward = backward;
    return table;
  };
  static const OpsBf16 cuda_cores =
      forced(cuda_bf16::attention_forward_cuda_cores, cuda_bf16::attention_backward_cuda_cores);
  static const OpsBf16 tensor_cores =
      forced(cuda_bf16::attention_forward_tensor_cores, cuda_bf16::attention_backward_tensor_cores);
  static const OpsBf16 tensor_cores_mma =
      forced(cuda_bf16::attention_forward_tensor_cores_mma, cuda_bf16::attention_backward_tensor_cores_mma);
  switch (attention) {
    case FlashAttention::kCudaCores: return cuda_cores;
    case FlashAttention::kTensorCores: return tensor_cores;
    case FlashAttention::kTensorCoresMma: return tensor_cores_mma;
    case FlashAttention::kDefault: break;
  }
  return cuda_bf16_ops();
}

}  // namespace axonn::kernels

namespace axonn::kernels::cuda_bf16::detail {

namespace {
size_t current_device() {
  int device = 0;
  AXONN_CUDA_CHECK(cudaGetDevice(&device));
  return static_cast<size_t>(device);
}
}  // namespace

cublasLtHandle_t cublaslt() {
  thread_local std::vector<cublasLtHandle_t> handles;  // indexed by device; kept for the thread's life
  const size_t device = current_device();
  if (handles.size() <= device) handles.resize(device + 1, nullptr);
  if (handles[device] == nullptr) AXONN_CUBLAS_CHECK(cublasLtCreate(&handles[device]));
  return handles[device];
}

void* lt_workspace() {
  // One per device for the process: every GEMM is queued on the one (legacy default) stream, so two
  // GEMMs never use it at the same time.
  // Never freed (a static destructor would run after the CUDA context is gone), hence `new`.
  static auto* buffers = new std::vector<cuda_detail::DeviceBuffer>();
  static std::mutex mutex;
  const size_t device = current_device();
  std::lock_guard<std::mutex> lock(mutex);
  if (buffers->size() <= device) buffers->resize(device + 1);
  auto& buffer = (*buffers)[device];
  if (buffer.data() == nullptr) buffer = cuda_detail::DeviceBuffer(kLtWorkspaceBytes);
  return buffer.data();
}

}  // namespace axonn::kernels::cuda_bf16::detail
