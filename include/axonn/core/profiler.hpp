// core/profiler.hpp — accumulated wall time per named region (kernel kinds, collectives).
//
// Off unless enabled; a disabled profiler costs one branch per region. Names are string literals.
// Work that runs asynchronously (GPU kernels) is timed by giving the profiler the device's synchronize:
// every region then waits for the device at its start and its end, so that its time is the device's (the
// waits remove the overlap between launches and kernels: a step takes longer profiled than not).
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
  // Called at the start and the end of every region when set (null: none), e.g. a device synchronize.
  void set_synchronize(void (*sync)()) { synchronize_ = sync; }
  void synchronize() const {
    if (synchronize_) synchronize_();
  }
  bool enabled() const { return enabled_; }
  void add(const char* name, double seconds);
  void reset() { entries_.clear(); }
  const std::vector<Entry>& entries() const { return entries_; }
  double total() const;
  // One line per region, largest first, with its share of the total.
  void print(FILE* out) const;

 private:
  bool enabled_ = false;
  void (*synchronize_)() = nullptr;
  std::vector<Entry> entries_;
};

class ProfileScope {
 public:
  ProfileScope(Profiler* p, const char* name) : p_(p && p->enabled() ? p : nullptr), name_(name) {
    if (p_) {
      p_->synchronize();
      timer_.reset();
    }
  }
  ~ProfileScope() {
    if (p_) {
      p_->synchronize();
      p_->add(name_, timer_.seconds());
    }
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profiler* p_;
  const char* name_;
  Timer timer_;
};

}  // namespace axonn
