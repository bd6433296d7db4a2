// core/host.hpp — what a run records about where and when it ran (run.json, machine profiles).
//
//   std::printf("%s on %s at %s\n", axonn::host_name().c_str(), axonn::cpu_model().c_str(), axonn::utc_now().c_str());
#pragma once

#include <string>

namespace axonn {

// The CPU's model name from /proc/cpuinfo ("AMD EPYC 9B45"); empty where it has none.
std::string cpu_model();
// This machine's host name (gethostname).
std::string host_name();
// The time now in UTC, ISO 8601: "2026-12-01T20:15:05Z".
std::string utc_now();
// The CPUs this process may run on (its affinity mask: what a launcher's binding or a cgroup's cpuset
// leaves it); 0 when unknown.
int cpus_allowed();

}  // namespace axonn
