#include "axonn/core/profiler.hpp"

#include <algorithm>
#include <cstring>

namespace axonn {

void Profiler::add(const char* name, double seconds) {
  for (Entry& e : entries_)
    if (e.name == name || std::strcmp(e.name, name) == 0) {
      e.seconds += seconds;
      e.calls++;
      return;
    }
  entries_.push_back({name, seconds, 1});
}

double Profiler::total() const {
  double t = 0;
  for (const Entry& e : entries_) t += e.seconds;
  return t;
}

void Profiler::print(FILE* out) const {
  std::vector<Entry> sorted = entries_;
  std::sort(sorted.begin(), sorted.end(), [](const Entry& a, const Entry& b) { return a.seconds > b.seconds; });
  double total = this->total();
  for (const Entry& e : sorted)
    std::fprintf(out, "  %-28s %10.1f ms %6.1f%% %8ld calls\n", e.name, e.seconds * 1e3,
                 total > 0 ? 100.0 * e.seconds / total : 0.0, e.calls);
}

}  // namespace axonn
