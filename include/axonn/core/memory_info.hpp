// core/memory_info.hpp — how much memory this process may still take, so that a run that cannot fit
// is refused up front with a message naming the flag, instead of std::bad_alloc or the OOM killer.
#pragma once

#include <cstdint>
#include <optional>

namespace axonn {

// Bytes this process can still allocate: the smaller of the system's MemAvailable (/proc/meminfo)
// and the room left under the control group's limit (cgroup v2 memory.max - memory.current, or v1
// memory.limit_in_bytes - memory.usage_in_bytes). nullopt where neither is known.
std::optional<uint64_t> available_memory_bytes();

}  // namespace axonn
