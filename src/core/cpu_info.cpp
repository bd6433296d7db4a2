#include "axonn/core/cpu_info.hpp"

#include <fstream>

namespace axonn {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string s = line.substr(colon + 1);
      s.erase(0, s.find_first_not_of(' '));
      return s;
    }
  return "";
}

}  // namespace axonn
