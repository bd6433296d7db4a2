// core/profiler.hpp — accumulated wall time per named region (kernel kinds, collectives).
//
// Off unless enabled; a disabled profiler costs one branch per region. Names are string literals.
//
//   Profiler prof;  prof.enable(true);
//   { ProfileScope s(&prof, "matmul"); ... }
//   prof.print(stdout);
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "axonn/core/timer.hpp"

namespace axonn {

class Profiler {
 public:
  struct Entry {
    const char* name;
    double seconds;
    long calls;
  };
  void enable(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  void add(const char* name, double seconds);
  void reset() { entries_.clear(); }
  const std::vector<Entry>& entries() const { return entries_; }
  double total() const;
  // One line per region, largest first, with its share of the total.
  void print(FILE* out) const;

 private:
  bool enabled_ = false;
  std::vector<Entry> entries_;
};

class ProfileScope {
 public:
  ProfileScope(Profiler* p, const char* name) : p_(p && p->enabled() ? p : nullptr), name_(name) {}
  ~ProfileScope() {
    if (p_) p_->add(name_, timer_.seconds());
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profiler* p_;
  const char* name_;
  Timer timer_;
};

}  // namespace axonn
