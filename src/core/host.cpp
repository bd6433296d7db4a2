// core/host.cpp — the machine and the time, for the records of a run (host.hpp).
#include "axonn/core/host.hpp"

#include <sched.h>
#include <unistd.h>

#include <ctime>
#include <fstream>

namespace axonn {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(colon + 1);
      name.erase(0, name.find_first_not_of(' '));
      return name;
    }
  return "";
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

int cpus_allowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

}  // namespace axonn
