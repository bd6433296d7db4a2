// kernels/dispatch.cpp — the Ops tables, chosen once when a model is built.
#include <string>

#include "axonn/core/error.hpp"
#include "axonn/kernels/ops.hpp"

namespace axonn::kernels {

namespace {
#define AXONN_OPS_TABLE(ns)                                                                                 \
  Ops {                                                                                                     \
    ns::embedding_forward, ns::embedding_backward, ns::position_forward, ns::position_backward,             \
        ns::layernorm_forward, ns::layernorm_backward,               \
        ns::matmul_forward, ns::matmul_backward, ns::attention_forward, ns::attention_backward,             \
        ns::gelu_forward, ns::gelu_backward, ns::residual_forward, ns::residual_backward,                   \
        ns::softmax_crossentropy_forward, ns::softmax_crossentropy_backward, ns::adamw_update, ns::sum_squares \
  }
const Ops kRefOps = AXONN_OPS_TABLE(ref);
const Ops kCpuOps = AXONN_OPS_TABLE(cpu);
#undef AXONN_OPS_TABLE
}  // namespace

std::string_view backend_name(Backend b) { return b == Backend::kRef ? "ref" : "cpu"; }

Backend parse_backend(std::string_view name) {
  if (name == "ref") return Backend::kRef;
  if (name == "cpu") return Backend::kCpu;
  throw InvalidArgument("unknown kernel backend '" + std::string(name) + "'; use cpu or ref");
}

const Ops& ops_for(Backend backend) { return backend == Backend::kRef ? kRefOps : kCpuOps; }

}  // namespace axonn::kernels
