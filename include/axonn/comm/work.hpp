// comm/work.hpp — a handle to one in-flight (non-blocking) collective.
//
// Returned by the *_async collectives of a Communicator. The buffers passed to the collective belong
// to the collective until the Work is complete: do not read the output or write the input before
// wait() returns (or test() returned true). An error met by the collective is stored in the Work and
// rethrown by wait(), as an axonn::CommError that names the MPI call, the communicator and the MPI
// error string.
//
//   auto work = grid.y().all_reduce_async(dx, n, DType::kF32);   // over Y
//   gemm(...);                                                   // overlaps with the all-reduce
//   work->wait();                                                // dx now holds the sum
//
// Destroying a Work that was not waited waits for it (the buffers must not be freed under MPI) and
// drops any error with a warning: wait explicitly.
#pragma once

namespace axonn::comm {

class Work {
 public:
  Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  virtual ~Work() = default;

  // Blocks the calling thread until the collective is complete; rethrows its error, if any (every
  // call to wait() after a failure rethrows it again).
  virtual void wait() = 0;
  // Non-blocking: true once the collective is complete (successfully or not; wait() tells which).
  virtual bool test() = 0;
};

}  // namespace axonn::comm
