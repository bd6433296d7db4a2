// comm/mpi/watchdog.hpp — deadlines on every blocking wait of the MPI backend (private).
//
// MPI's blocking calls have no timeout: a rank that stalls (stopped, swapped out, a hung file system)
// leaves every other rank blocked in its next collective for ever (DESIGN.md §6 forbids that). Each
// blocking wait of a communicator (a blocking collective, Work::wait, a split) registers itself here
// for its duration (a WaitScope: a clock read and a short lock, nothing sent). A watchdog thread,
// one per world(), looks every 100 ms; when a wait has lasted CommOptions::timeout_s it asks every
// other rank what it is doing, over its own duplicate of MPI_COMM_WORLD (a small message each; the
// watchdog threads answer even while their main thread is blocked in MPI), waits a few seconds for
// the answers, prints the collective, the group, the step (comm::set_activity) and each rank's
// answer or silence, and brings the job down with MPI_Abort. It never hangs.
//
// Answering needs MPI_THREAD_MULTIPLE; without it the watchdog still prints its own wait and aborts.
// Its polls for questions take the rank's right to call MPI (mpi_mu, MpiContext::enter_mpi) when it
// is free, and go without it only once it has been held for kUnlockedPollAfter, a wait long enough
// that the rank may be stuck and must still answer.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "axonn/core/dtype.hpp"

namespace axonn::comm::detail {

// What one blocking wait waits for: a collective of a communicator (its n-th call there).
struct WaitInfo {
  const char* collective = "";  // "all_reduce", "barrier", "split", ...
  size_t count = 0;
  DType dtype = DType::kF32;
  const std::string* group = nullptr;  // the communicator's name; outlives the wait
  uint64_t call = 0;                   // the communicator's collective count at this one (1-based)
  bool counted = true;                 // false: no count/dtype (barrier, split)
};

class Watchdog {
 public:
  // timeout_s <= 0: no deadline (nothing runs). Collective over MPI_COMM_WORLD (duplicates it).
  // mpi_mu: the rank's right to call MPI (outlives this).
  Watchdog(double timeout_s, bool thread_multiple, std::mutex& mpi_mu);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  bool enabled() const { return thread_.joinable(); }
  uint64_t begin(const WaitInfo& w);
  void end(uint64_t id);
  // Stops the thread and frees its MPI objects (idempotent; also run at the start of MPI_Finalize).
  void shutdown();

 private:
  using Clock = std::chrono::steady_clock;
  struct Wait {
    WaitInfo info;
    Clock::time_point since;
  };
  void run();
  void answer_queries();       // replies to the other ranks' questions
  [[noreturn]] void expire(const Wait& w, double waited_s);
  std::string state() const;   // this rank's answer: what it waits in, or that it computes

  double timeout_s_;
  bool multiple_;
  std::mutex& mpi_mu_;
  Clock::time_point last_poll_;  // the watchdog thread's: when it last polled for questions
  MPI_Comm comm_ = MPI_COMM_NULL;  // the watchdog's own world
  int rank_ = 0, size_ = 1;
  mutable std::mutex mu_;
  std::map<uint64_t, Wait> waits_;  // guarded by mu_
  uint64_t next_id_ = 1;            // guarded by mu_
  Clock::time_point last_end_;      // guarded by mu_: when the last wait ended
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  MPI_Request query_ = MPI_REQUEST_NULL;
  int query_buf_ = 0;
  std::deque<std::string> sent_;  // the watchdog thread's: replies' buffers outlive their freed requests
  std::thread thread_;
};

// Registers a wait for the scope's lifetime (no-op for a null watchdog or one without a deadline).
class WaitScope {
 public:
  WaitScope(Watchdog* w, const WaitInfo& info) : w_(w && w->enabled() ? w : nullptr), id_(w_ ? w_->begin(info) : 0) {}
  ~WaitScope() {
    if (w_) w_->end(id_);
  }
  WaitScope(const WaitScope&) = delete;
  WaitScope& operator=(const WaitScope&) = delete;

 private:
  Watchdog* w_;
  uint64_t id_;
};

}  // namespace axonn::comm::detail
