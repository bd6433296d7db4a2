// infer::DecodeThreads: the decode's thread count searched by timing (infer/decode_threads.hpp), driven
// here by a model of a step's time per thread count instead of a clock.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <vector>

#include "axonn/infer/decode_threads.hpp"

using axonn::infer::DecodeThreads;

namespace {

// Runs `steps` decode steps whose time at t threads is seconds(t); returns the thread count of each step.
std::vector<int> run(DecodeThreads& threads, int& current, int steps, const std::function<double(int)>& seconds) {
  std::vector<int> used;
  for (int s = 0; s < steps; s++) {
    threads.before_step();
    used.push_back(current);
    threads.after_step(seconds(current));
  }
  return used;
}

}  // namespace

TEST(DecodeThreads, KeepsTheCommandsThreadsWhenTheyAreFastest) {
  int current = 0;
  DecodeThreads threads(8, [&](int t) { current = t; });
  const auto used = run(threads, current, 3 * DecodeThreads::kEpochSteps, [](int t) { return 1.0 / t; });
  EXPECT_EQ(threads.chosen(), 8);
  // each epoch tries 8 and 4 three times each, interleaved, then runs on 8
  const int epoch = DecodeThreads::kEpochSteps, trials = 2 * DecodeThreads::kTrialSteps;
  for (int s = 0; s < static_cast<int>(used.size()); s++) {
    const int at = s % epoch;
    EXPECT_EQ(used[static_cast<size_t>(s)], at < trials ? (at % 2 == 0 ? 8 : 4) : 8) << "step " << s;
  }
}

TEST(DecodeThreads, HalvesAnEpochAtATimeToTheFastestAndStays) {
  int current = 0;
  DecodeThreads threads(8, [&](int t) { current = t; });
  // fastest at 2 threads (a memory-bound step on a shared machine)
  const std::map<int, double> step = {{1, 3.0}, {2, 1.0}, {4, 2.0}, {8, 4.0}};
  auto seconds = [&](int t) { return step.at(t); };
  run(threads, current, DecodeThreads::kEpochSteps, seconds);
  EXPECT_EQ(threads.chosen(), 4);
  run(threads, current, DecodeThreads::kEpochSteps, seconds);
  EXPECT_EQ(threads.chosen(), 2);
  const auto used = run(threads, current, 2 * DecodeThreads::kEpochSteps, seconds);
  EXPECT_EQ(threads.chosen(), 2);  // 1 and 4, its neighbours, tried and slower
  int on_two = 0;
  for (int t : used) on_two += t == 2;
  EXPECT_GE(on_two, 2 * (DecodeThreads::kEpochSteps - 2 * DecodeThreads::kTrialSteps));
}

TEST(DecodeThreads, FollowsTheLoadBackUpAndNeverExceedsTheCommandsThreads) {
  int current = 0;
  DecodeThreads threads(6, [&](int t) { current = t; });
  run(threads, current, 2 * DecodeThreads::kEpochSteps, [](int t) { return static_cast<double>(t); });  // 1 best
  EXPECT_EQ(threads.chosen(), 1);  // 6 -> 3 -> 1
  // the other processes left: more threads are faster again
  const auto used = run(threads, current, 3 * DecodeThreads::kEpochSteps, [](int t) { return 1.0 / t; });
  EXPECT_EQ(threads.chosen(), 6);  // 1 -> 2 -> 4 -> 6 (twice 4 capped at the command's 6)
  for (int t : used) EXPECT_LE(t, 6);
}

TEST(DecodeThreads, ChoosesNothingBeforeItsTrialsEnd) {
  int current = 0;
  DecodeThreads threads(2, [&](int t) { current = t; });
  run(threads, current, 2 * DecodeThreads::kTrialSteps - 1, [](int) { return 1.0; });
  EXPECT_EQ(threads.chosen(), 0);
  run(threads, current, 1, [](int) { return 1.0; });
  EXPECT_EQ(threads.chosen(), 2);  // a tie keeps the threads in use
}

TEST(DecodeThreads, MedianStepsSoOneSlowStepDoesNotDecide) {
  int current = 0;
  DecodeThreads threads(2, [&](int t) { current = t; });
  int call = 0;
  // 2 threads faster, but its first step is interrupted (a page fault, another process's slice)
  run(threads, current, DecodeThreads::kEpochSteps, [&](int t) { return t == 2 && call++ == 0 ? 100.0 : 1.0 / t; });
  EXPECT_EQ(threads.chosen(), 2);
}

TEST(DecodeThreads, KeepsTheCountInUseUnlessAnotherIsClearlyFaster) {
  int current = 0;
  DecodeThreads threads(2, [&](int t) { current = t; });
  // 1 thread 5% faster: within the noise of a loaded machine, the command's 2 stay
  run(threads, current, DecodeThreads::kEpochSteps, [](int t) { return t == 1 ? 0.95 : 1.0; });
  EXPECT_EQ(threads.chosen(), 2);
  // 20% faster: taken
  run(threads, current, DecodeThreads::kEpochSteps, [](int t) { return t == 1 ? 0.8 : 1.0; });
  EXPECT_EQ(threads.chosen(), 1);
}
