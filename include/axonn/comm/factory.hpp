// comm/factory.hpp — where communicators come from.
//
// world() returns a communicator over every rank of the job (a duplicate of MPI_COMM_WORLD, with
// errors returned rather than aborting). Other communicators come from Communicator::split/dup,
// usually through parallel::Grid. MPI must be initialised first (comm::Runtime).
//
//   axonn::comm::Runtime mpi(&argc, &argv);
//   auto world = axonn::comm::world();
//   axonn::parallel::Grid grid(shape, world);
#pragma once

#include <memory>
#include <string>

#include "axonn/comm/communicator.hpp"

namespace axonn::comm {

// How non-blocking collectives make progress while the calling thread computes.
struct CommOptions {
  // true: a progress thread (one per world() call, shared by every communicator split from it)
  // polls the in-flight collectives with MPI_Testsome, so they advance during BLAS/OpenMP work that
  // never calls MPI. It sleeps on a condition variable while nothing is in flight. Requires
  // MPI_THREAD_MULTIPLE; without it, falls back to false with a warning.
  // false: collectives advance only inside Work::test() and Work::wait().
  bool progress_thread = true;
  // Pause of the progress thread between two polls that completed nothing, in microseconds; 0 =
  // sched_yield only. Shorter finishes collectives sooner but takes more CPU from the computation.
  // While some thread is blocked in Work::wait(), the progress thread polls without pausing.
  int poll_interval_us = 50;
  // Deadline of every blocking wait (blocking collectives, Work::wait, split), in seconds; 0: none.
  // When one passes, a watchdog thread asks the other ranks what they do, prints the collective, the
  // group, the activity (set_activity) and each rank's answer or silence, and aborts the job
  // (src/comm/mpi/watchdog.hpp). The trainer's --comm-timeout.
  double timeout_s = 600;
};

// What this rank is doing, for the watchdog's report (e.g. "step 12/50"). Thread-safe.
void set_activity(const std::string& what);

// Communicator over all ranks (named "world"). Collective over MPI_COMM_WORLD.
std::shared_ptr<Communicator> world(const CommOptions& options = {});

}  // namespace axonn::comm
