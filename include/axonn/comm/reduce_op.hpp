// comm/reduce_op.hpp — the reductions a collective can apply.
#pragma once

#include <string_view>

namespace axonn::comm {

// kSum and kMax are MPI's; kAvg is a sum followed by a division by the group size on every rank
// (floating-point types only: an integer average would silently truncate).
enum class ReduceOp { kSum, kAvg, kMax };

constexpr std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

}  // namespace axonn::comm
