// core/memory_info.cpp — the memory a process may still take (memory_info.hpp).
#include "axonn/core/memory_info.hpp"

#include <algorithm>
#include <fstream>
#include <string>

namespace axonn {

namespace {

std::optional<uint64_t> read_number(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return std::nullopt;
  try {
    return std::stoull(s);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<uint64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return std::nullopt;
}

// Room under the control group's limit (v2, then v1). A v1 "no limit" is a huge number: kept as is.
std::optional<uint64_t> cgroup_room() {
  auto room = [](std::optional<uint64_t> limit, std::optional<uint64_t> used) -> std::optional<uint64_t> {
    if (!limit) return std::nullopt;
    const uint64_t u = used.value_or(0);
    return *limit > u ? *limit - u : 0;
  };
  if (auto r = room(read_number("/sys/fs/cgroup/memory.max"), read_number("/sys/fs/cgroup/memory.current"))) return r;
  return room(read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
              read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes"));
}

}  // namespace

std::optional<uint64_t> available_memory_bytes() {
  const std::optional<uint64_t> a = mem_available(), b = cgroup_room();
  if (a && b) return std::min(*a, *b);
  return a ? a : b;
}

}  // namespace axonn
