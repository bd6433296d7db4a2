// The stop signals' handlers (src/train/stop.hpp) against code that points rsp into the heap.
//
// oneDNN's JIT GEMM kernels (Debian's 2.6, and every release before oneDNN PR #4855) point rsp into
// a heap buffer while they run. A signal handled on the interrupted stack has its frame written
// below rsp, that is into the heap: `axonn train` stopped by SIGTERM or SIGUSR1 died at exit about
// one run in ten under load, with "corrupted size vs. prev_size" or "munmap_chunk(): invalid
// pointer". The handlers run on their own stack (sigaltstack), so nothing is written where rsp
// points. The test does what those kernels do, deterministically: it moves rsp into a heap block
// filled with a pattern, takes a stop signal there, and checks that the block is untouched.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "train/stop.hpp"

namespace {

using axonn::train::detail::StopSignals;

#if defined(__x86_64__)
TEST(StopSignals, HandlerFrameIsNotWrittenWhereRspPoints) {
  constexpr size_t kBlock = 64 * 1024;
  constexpr unsigned char kPattern = 0xA5;
  std::vector<unsigned char> block(kBlock, kPattern);
  // the fake stack's top, 16-byte aligned, in the middle of the block: a frame below it stays inside
  const auto top = (reinterpret_cast<uintptr_t>(block.data()) + kBlock / 2) & ~uintptr_t{15};

  StopSignals signals(SIGUSR1);
  std::atomic<int> handled{0};  // set once the handler has run (4 bytes: the asm compares a long word)
  static_assert(sizeof(std::atomic<int>) == 4);
  const pthread_t self = pthread_self();
  std::thread sender([&] {
    pthread_kill(self, SIGUSR1);
    while (signals.received() == 0) std::this_thread::yield();
    handled.store(1);
  });
  // rsp on the heap until the handler has run; nothing in the loop touches the stack
  asm volatile(
      "mov %%rsp, %%r12\n\t"
      "mov %[top], %%rsp\n\t"
      "1:\n\t"
      "pause\n\t"
      "cmpl $0, (%[flag])\n\t"
      "je 1b\n\t"
      "mov %%r12, %%rsp\n\t"
      :
      : [top] "r"(top), [flag] "r"(&handled)
      : "r12", "memory", "cc");
  sender.join();
  ASSERT_EQ(signals.received(), SIGUSR1);
  size_t written = 0;
  for (unsigned char b : block) written += b != kPattern;
  EXPECT_EQ(written, 0u) << "the handler's frame was written where rsp pointed: " << written << " bytes of the heap "
                         << "block changed";
}
#endif

// A second StopSignals after the first (one at a time) installs and handles again, and each restores
// the alternate stack it found.
TEST(StopSignals, InstallsAgainAndRestoresTheAlternateStack) {
  stack_t before{};
  ASSERT_EQ(sigaltstack(nullptr, &before), 0);
  for (int round = 0; round < 3; round++) {
    StopSignals signals(SIGUSR2);
    stack_t during{};
    ASSERT_EQ(sigaltstack(nullptr, &during), 0);
    EXPECT_FALSE(during.ss_flags & SS_DISABLE) << "no alternate stack while the handlers are installed";
    struct sigaction sa {};
    ASSERT_EQ(sigaction(SIGTERM, nullptr, &sa), 0);
    EXPECT_TRUE(sa.sa_flags & SA_ONSTACK);
    raise(SIGUSR2);
    EXPECT_EQ(signals.received(), SIGUSR2);
  }
  stack_t after{};
  ASSERT_EQ(sigaltstack(nullptr, &after), 0);
  EXPECT_EQ(after.ss_sp, before.ss_sp);
  EXPECT_EQ(after.ss_flags & SS_DISABLE, before.ss_flags & SS_DISABLE);
}

}  // namespace
