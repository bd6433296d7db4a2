// kernels/dispatch.cpp — the Ops tables, chosen once when a model is built.
#include <atomic>
#include <string>

#include "axonn/core/error.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"

namespace axonn::kernels {

namespace {
#define AXONN_FP32_TABLE(ns)     \
  [] {                           \
    Ops table{};                 \
    AXONN_FILL_FP32_OPS(ns)      \
    return table;                \
  }()
const Ops kRefOps = AXONN_FP32_TABLE(ref);
const Ops kCpuOps = AXONN_FP32_TABLE(cpu);
#undef AXONN_FP32_TABLE
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

std::vector<double> sums_of_squares(const Ops& ops, const Arena& tensors) {
  const size_t count = tensors.size();
  std::vector<const float*> data(count);
  std::vector<int64_t> sizes(count);
  for (size_t i = 0; i < count; i++) {
    const Tensor t = tensors.tensor(i);
    data[i] = t.f32();
    sizes[i] = t.numel();
  }
  std::vector<double> sums(count);
  ops.sum_squares(sums.data(), data.data(), sizes.data(), static_cast<int>(count));
  return sums;
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
