// launch/memory_check.hpp — refusing, before anything large is allocated, a job whose ranks need more
// memory than their node has free: the sum of a node's ranks, not one rank alone, against the node's
// available memory (core/memory_info.hpp). `axonn train` and the inference set-up (infer/setup.hpp)
// call it with the parts that model::Gpt::memory_need and their own buffers give.
//
//   launch::check_node_memory(world, {{"params", p}, {"activations", a}}, "axonn train", "use --recompute");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/comm/communicator.hpp"

namespace axonn::launch {

// One part of what a rank allocates, named as the message shows it.
struct MemoryPart {
  std::string name;
  uint64_t bytes = 0;
};

// "74.3 GiB", "512.0 MiB", "0 B"
std::string format_bytes(double bytes);

// Collective over world: every part's largest over the job's ranks, times the ranks on the fullest node
// (comm::local_size()), against the smallest memory any rank's node has free. Throws InvalidArgument
// alike on every rank when it does not fit; the message names each part per rank, the node's sum and
// the free memory ("at least": the parts are the large buffers, not every allocation), then `advice`
// (what to change). Nothing is checked where no node's free memory is known.
void check_node_memory(comm::Communicator& world, const std::vector<MemoryPart>& parts, const std::string& command,
                       const std::string& advice);

}  // namespace axonn::launch
