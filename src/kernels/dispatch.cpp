// kernels/dispatch.cpp — the Ops tables, chosen once when a model is built.
#include <atomic>
#include <string>

#include "axonn/core/error.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"

namespace axonn::kernels {

namespace {
#define AXONN_OPS_TABLE(ns)                                                                                 \
  Ops {                                                                                                     \
    ns::embedding_forward, ns::embedding_backward, ns::position_forward, ns::position_backward,             \
        ns::layernorm_sum, ns::layernorm_centred_sumsq, ns::layernorm_forward, ns::layernorm_backward_sums,  \
        ns::layernorm_backward,                                                                             \
        ns::matmul_forward, ns::matmul_backward, ns::attention_forward, ns::attention_backward,             \
        ns::gelu_forward, ns::gelu_backward, ns::residual_forward, ns::residual_backward,                   \
        ns::crossentropy_max, ns::crossentropy_sums, ns::softmax_crossentropy_forward,                      \
        ns::softmax_crossentropy_backward, ns::adamw_update, ns::sum_squares,                               \
        nullptr, nullptr, /* no casts: the fp32 tables keep no copies of the weights */                     \
        ns::rmsnorm_sumsq, ns::rmsnorm_forward, ns::rmsnorm_backward_dot, ns::rmsnorm_backward,             \
        ns::rope_forward, ns::rope_backward, ns::swiglu_forward, ns::swiglu_backward, ns::repeat_kv_forward, \
        ns::repeat_kv_backward, ns::kv_cache_append, ns::attention_cached_forward                           \
  }
const Ops kRefOps = AXONN_OPS_TABLE(ref);
const Ops kCpuOps = AXONN_OPS_TABLE(cpu);
#undef AXONN_OPS_TABLE
std::atomic<const Ops*> g_cuda_ops{nullptr};
std::atomic<const OpsBf16*> g_cuda_bf16_ops{nullptr};
constexpr const char* kNoCuda =
    "--kernels cuda: the CUDA kernels are not available: this build has no CUDA backend (rebuild with "
    "-DAXONN_CUDA=ON), or kernels::cuda_setup() was not called; use --kernels cpu to run on the host";
}  // namespace

std::string_view backend_name(Backend b) {
  switch (b) {
    case Backend::kRef: return "ref";
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
  }
  return "?";
}

Backend parse_backend(std::string_view name) {
  if (name == "ref") return Backend::kRef;
  if (name == "cpu") return Backend::kCpu;
  if (name == "cuda") return Backend::kCuda;
  throw InvalidArgument("unknown kernel backend '" + std::string(name) + "'; use cpu, ref or cuda");
}

Device backend_device(Backend b) { return b == Backend::kCuda ? Device::kCuda : Device::kCpu; }

const Ops& ops_for(Backend backend) {
  switch (backend) {
    case Backend::kRef: return kRefOps;
    case Backend::kCpu: return kCpuOps;
    case Backend::kCuda:
      if (const Ops* ops = g_cuda_ops.load()) return *ops;
      throw InvalidArgument(kNoCuda);
  }
  return kCpuOps;
}

void register_cuda_ops(const Ops* ops) { g_cuda_ops.store(ops); }

const OpsBf16& ops_bf16_for(Backend backend) {
  switch (backend) {
    case Backend::kRef: return ref_bf16_ops();
    case Backend::kCpu: return cpu_bf16_ops();
    case Backend::kCuda:
      if (const OpsBf16* ops = g_cuda_bf16_ops.load()) return *ops;
      throw InvalidArgument(kNoCuda);
  }
  return cpu_bf16_ops();
}

void register_cuda_bf16_ops(const OpsBf16* ops) { g_cuda_bf16_ops.store(ops); }

}  // namespace axonn::kernels
