// measure/timing.hpp — how axonn times things on a job of many ranks (benchmarks, `axonn calibrate`).
//
// A time is the slowest rank's (a step, a collective, a batch of calls is done when every rank is).
// On a shared machine measurements are taken round-robin: round r times one batch of every point,
// then round r+1, so the other load of the machine falls on all of them alike; a point's time is the
// median over rounds.
//
//   measure::RoundRobin rr(world);
//   size_t a = rr.add([&] { kernels::sgemm(...); }), b = rr.add([&] { g.all_reduce(...); });
//   rr.run(7, 0.02);              // 7 rounds, batches of about 20 ms
//   double per_call = rr.seconds(a);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "axonn/comm/communicator.hpp"
#include "axonn/core/progress.hpp"

namespace axonn::measure {

// Max over every rank of a per-rank duration (seconds), at nanosecond resolution. Collective over world.
double max_over(comm::Communicator& world, double seconds);
// Sum over every rank. Collective over world.
int64_t sum_over(comm::Communicator& world, int64_t v);
double median(std::vector<double> v);

// Every measurement is a point: a call repeated in batches, every rank at once. A point's time per
// call is the median over rounds of the batch's time from a barrier before to a barrier after (every
// rank done), per call. `iters` per batch adapts so that a batch lasts about `batch_s` (decided from
// the slowest rank's warm-up call, hence the same on every rank). Collective over world.
class RoundRobin {
 public:
  explicit RoundRobin(comm::Communicator& world) : world_(world) {}
  // Returns the point's index.
  size_t add(std::function<void()> fn);
  size_t size() const { return points_.size(); }
  // Warm-up (one call of every point), then `rounds` rounds of batches; `progress` (if any) counts the
  // batches, size() * (rounds + 1) in all.
  void run(int rounds, double batch_s, Progress* progress = nullptr);
  // The point's median time per call over the rounds.
  double seconds(size_t i) const;

 private:
  struct Point {
    std::function<void()> fn;
    int iters;
    std::vector<double> seconds;
  };
  comm::Communicator& world_;
  std::vector<Point> points_;
};

}  // namespace axonn::measure
