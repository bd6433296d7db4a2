// infer/decode_threads.hpp — the decode's CPU thread count, measured rather than guessed (infer/generator.cpp
// runs it; docs/generate.md).
//
// A decode step of a few rows is a few hundred small parallel regions bound by memory; where the threads share
// a core's path to memory, or other processes hold cores, fewer threads are faster (llama-124m on a 2-vCPU
// machine, idle: 1 thread decoded 52 tokens/s, 2 threads 41). The output does not depend on the choice: a
// product of at most 8 rows sums in an order fixed by K alone, and every other decode op works row by row (the
// same ids and log-probabilities at 1 and 2 threads: cli.generate.decode_threads). So each epoch of
// kEpochSteps steps begins by timing the thread count in use and its neighbours (half, and twice up to the
// command's threads), kTrialSteps steps each, interleaved, and runs the rest on the one with the fastest median
// step (by kMargin): a search that starts at the command's threads, moves by a factor of 2 per epoch and
// follows changes of the load, while at most 3 * kTrialSteps steps of an epoch run on a neighbour. Every rank
// follows the same schedule, so a candidate's steps run with it on all ranks at once (their collectives make
// one step time). The Generator keeps its search from one generate() to the next.
//
//   DecodeThreads threads(kernels::cpu_threads(), kernels::set_cpu_threads);
//   for (each step) { threads.before_step(); step(); threads.after_step(seconds); }
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

namespace axonn::infer {

class DecodeThreads {
 public:
  static constexpr int kEpochSteps = 64, kTrialSteps = 3;
  // Another count replaces the one in use only if its median step is this much shorter: on a loaded machine
  // three steps each are noisy, and a coin toss between counts of about one speed made the decode slower on
  // average (2 threads beside two busy processes: 29.7 tokens/s against 34.9 at a fixed 2; idle, 1 thread
  // was 1.2-1.7x faster than 2, far beyond the margin).
  static constexpr double kMargin = 0.1;
  // `widest`: the command's threads; `set_threads` applies a count to the steps that follow
  DecodeThreads(int widest, std::function<void(int)> set_threads)
      : widest_(widest), chosen_(widest), set_threads_(std::move(set_threads)) {}
  // Sets the threads of the next step.
  void before_step() {
    const int at = step_ % kEpochSteps;
    if (at == 0) begin_epoch();
    const int trials = kTrialSteps * static_cast<int>(candidates_.size());
    trying_ = at < trials ? at % static_cast<int>(candidates_.size()) : -1;
    set_threads_(trying_ >= 0 ? candidates_[static_cast<size_t>(trying_)] : chosen_);
  }
  // The step's time, in seconds.
  void after_step(double seconds) {
    if (trying_ >= 0) {
      std::vector<double>& t = times_[static_cast<size_t>(trying_)];
      t.push_back(seconds);
      if (trying_ + 1 == static_cast<int>(candidates_.size()) && static_cast<int>(t.size()) == kTrialSteps) choose();
    }
    step_++;
  }
  // The threads settled on; 0 before the first trials ended (a generation of a few steps).
  int chosen() const { return measured_ ? chosen_ : 0; }
  int widest() const { return widest_; }

 private:
  void begin_epoch() {
    candidates_ = {chosen_};
    if (chosen_ / 2 >= 1) candidates_.push_back(chosen_ / 2);
    if (chosen_ < widest_) candidates_.push_back(std::min(2 * chosen_, widest_));
    times_.assign(candidates_.size(), {});
  }
  // The fastest median; the count in use (candidates_[0]) unless another is kMargin faster.
  void choose() {
    auto median = [](std::vector<double> t) {
      std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
      return t[t.size() / 2];
    };
    const double in_use = median(times_[0]);
    double best = in_use * (1.0 - kMargin);
    for (size_t c = 1; c < candidates_.size(); c++) {
      const double m = median(times_[c]);
      if (m < best) {
        best = m;
        chosen_ = candidates_[c];
      }
    }
    measured_ = true;
  }
  int widest_, chosen_, trying_ = -1, step_ = 0;
  bool measured_ = false;
  std::function<void(int)> set_threads_;
  std::vector<int> candidates_;
  std::vector<std::vector<double>> times_;
};

}  // namespace axonn::infer
