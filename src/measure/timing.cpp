// measure/timing.cpp — the slowest rank's times and round-robin measurement (timing.hpp).
#include "axonn/measure/timing.hpp"

#include <algorithm>

#include "axonn/core/timer.hpp"

namespace axonn::measure {

double max_over(comm::Communicator& world, double seconds) {
  auto ns = static_cast<int64_t>(seconds * 1e9);
  world.all_reduce(&ns, 1, DType::kI64, comm::ReduceOp::kMax);  // over world
  return static_cast<double>(ns) * 1e-9;
}

int64_t sum_over(comm::Communicator& world, int64_t v) {
  world.all_reduce(&v, 1, DType::kI64);  // over world
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

size_t RoundRobin::add(std::function<void()> fn) {
  points_.push_back({std::move(fn), 0, {}});
  return points_.size() - 1;
}

void RoundRobin::run(int rounds, double batch_s, Progress* progress) {
  for (Point& p : points_) {
    world_.barrier();
    Timer warm;
    p.fn();
    world_.barrier();
    const double t0 = max_over(world_, warm.seconds());
    p.iters = std::clamp(static_cast<int>(batch_s / std::max(t0, 1e-7)), 2, 1000);
    if (progress) progress->add(1);
  }
  for (int r = 0; r < rounds; ++r)
    for (Point& p : points_) {
      world_.barrier();
      Timer t;
      for (int i = 0; i < p.iters; ++i) p.fn();
      // Until every rank is done: with more ranks than cores a rank's own clock would miss the
      // time it waited for a core before it started.
      world_.barrier();
      p.seconds.push_back(max_over(world_, t.seconds() / p.iters));
      if (progress) progress->add(1);
    }
}

double RoundRobin::seconds(size_t i) const {
  std::vector<double> v = points_[i].seconds;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace axonn::measure
