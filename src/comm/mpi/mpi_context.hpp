// comm/mpi/mpi_context.hpp — state shared by every MPI communicator split from one world():
// the bf16 datatype and reduction ops, and the progress engine (private to the MPI backend).
//
// Asynchronous progress. Open MPI (like most MPIs on shared memory and TCP) advances a
// non-blocking collective only while some thread is inside an MPI call; BLAS and OpenMP never
// call MPI, so a collective issued before a GEMM would sit still until wait(). Design:
//  * the thread that calls a collective also *starts* it (MPI_I*), so collectives enter MPI in
//    program order on every rank, as MPI requires;
//  * the started request is handed to a progress thread that owns every in-flight request from
//    then on: it polls them all with MPI_Testsome, runs the completion step (kAvg's division) and
//    wakes the waiters. It sleeps on a condition variable while nothing is in flight, and pauses
//    poll_interval_us between polls that complete nothing (no poll pause while a thread waits);
//  * Work::wait() blocks on a condition variable; it never calls MPI on a request the progress
//    thread owns (two threads testing one request is erroneous MPI).
// Blocking collectives call MPI's blocking functions directly on the calling thread.
//  * one thread at a time in MPI (enter_mpi(): the caller of a collective from its start to its
//    return, the progress thread for each poll). A blocking call progresses every request in flight
//    anyway, so nothing waits for this. Open MPI 4.1's TCP transport driven by two threads at once
//    now and then loses a socket's readiness: a job across hosts then sits still until TCP's next
//    zero-window probe (seconds, then minutes, doubling; tests/multihost, 8 ranks on 4 namespace
//    hosts: one run in five to ten stalled 5 s to over 250 s). The watchdog polls under it too,
//    unless it has been held for seconds (watchdog.hpp).
// This needs MPI_THREAD_MULTIPLE. Without a progress thread, test() and wait() call MPI_Test and
// MPI_Wait themselves.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/comm/reduce_op.hpp"
#include "axonn/comm/work.hpp"
#include "axonn/core/dtype.hpp"
#include "watchdog.hpp"

namespace axonn::comm::detail {

// One started non-blocking collective.
struct PendingOp {
  MPI_Request request = MPI_REQUEST_NULL;
  std::string what;                   // "all_reduce of 1024 f32 on communicator 'x'"
  std::function<void()> on_complete;  // e.g. kAvg's division; runs once, before waiters wake
  WaitInfo wait;                      // what Work::wait() waits for (the watchdog's record)
  // Count and displacement arrays of v-collectives: MPI reads them until completion.
  std::vector<int> counts, displs, counts2, displs2;

  // Completion, guarded by mu.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;

  // Runs on_complete (if the collective succeeded), stores the outcome and wakes the waiters.
  void complete(int mpi_rc);
  bool is_done();
  void wait_done();
};

class MpiContext {
 public:
  explicit MpiContext(const CommOptions& options);
  ~MpiContext();
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

  MPI_Datatype datatype(DType t) const;
  MPI_Op op(DType t, ReduceOp op) const;
  bool has_progress_thread() const { return thread_.joinable(); }
  // The deadline keeper of every blocking wait (null when options.timeout_s <= 0).
  Watchdog* watchdog() const { return watchdog_.get(); }

  // The right to call MPI on this rank (see above): held by the main thread through each collective
  // call and by the progress thread through each poll.
  std::unique_lock<std::mutex> enter_mpi() { return std::unique_lock(mpi_mu_); }
  // Hands a started request over to the progress thread.
  void submit(std::shared_ptr<PendingOp> op);
  // While any thread is blocked in wait(), the progress thread polls without pausing.
  void add_waiter() { waiters_.fetch_add(1); }
  void remove_waiter() { waiters_.fetch_sub(1); }

 private:
  void run();  // the progress thread

  CommOptions options_;
  MPI_Datatype bf16_type_ = MPI_DATATYPE_NULL;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  MPI_Op bf16_max_ = MPI_OP_NULL;

  std::mutex mpi_mu_;  // enter_mpi()
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<PendingOp>> incoming_;  // guarded by mu_
  bool stop_ = false;                                  // guarded by mu_
  std::atomic<int> waiters_{0};
  std::thread thread_;
  std::unique_ptr<Watchdog> watchdog_;
};

// The Work of one PendingOp.
class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<MpiContext> ctx, std::shared_ptr<PendingOp> op)
      : ctx_(std::move(ctx)), op_(std::move(op)) {}
  ~MpiWork() override;
  void wait() override;
  bool test() override;

 private:
  std::shared_ptr<MpiContext> ctx_;  // keeps the progress thread alive while this is in flight
  std::shared_ptr<PendingOp> op_;
};

// True while MPI is initialised and not finalised (MPI objects may be freed).
bool mpi_alive();

}  // namespace axonn::comm::detail
