// launch/memory_check.cpp — the node's memory against its ranks' sum (include/axonn/launch/memory_check.hpp).
#include "axonn/launch/memory_check.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>

#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/memory_info.hpp"

namespace axonn::launch {

std::string format_bytes(double bytes) {
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;
  char buf[32];
  if (bytes >= kGiB)
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / kGiB);
  else if (bytes > 0)
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / kMiB);
  else
    std::snprintf(buf, sizeof buf, "0 B");
  return buf;
}

void check_node_memory(comm::Communicator& world, const std::vector<MemoryPart>& parts, const std::string& command,
                       const std::string& advice) {
  // one MAX all-reduce: the parts, the node's ranks, and the free memory negated (its minimum); a rank
  // that does not know its node's memory brings the lowest value, which never wins
  constexpr int64_t kUnknown = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> v;
  for (const MemoryPart& p : parts) v.push_back(static_cast<int64_t>(p.bytes));
  v.push_back(comm::local_size());
  const std::optional<uint64_t> free = available_memory_bytes();
  v.push_back(free ? -static_cast<int64_t>(*free) : kUnknown);
  world.all_reduce(v.data(), v.size(), DType::kI64, comm::ReduceOp::kMax);  // over world
  if (v.back() == kUnknown) return;
  const double node_free = -static_cast<double>(v.back());
  const int64_t ranks = std::max<int64_t>(1, v[parts.size()]);
  double per_rank = 0;
  std::string each;
  for (size_t i = 0; i < parts.size(); i++) {
    per_rank += static_cast<double>(v[i]);
    each += (i ? ", " : "") + parts[i].name + " " + format_bytes(static_cast<double>(v[i]));
  }
  const double node = per_rank * static_cast<double>(ranks);
  AXONN_CHECK_ARG(node <= node_free, command, " needs at least ", format_bytes(per_rank), " per rank (", each, ") and ",
                  format_bytes(node), " for the ", ranks, " rank", ranks > 1 ? "s" : "", " on this node, more than the ",
                  format_bytes(node_free), " the node has free: ", advice);
}

}  // namespace axonn::launch
