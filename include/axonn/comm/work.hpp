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
//
// On the GPU, wait_on(stream) is the device-side wait: the given CUDA stream (the compute stream,
// kernels::cuda_compute_stream()) waits for the collective, and the host goes on at once. That is
// how OAR/ORS/OAG overlap on the GPU: the kernels queued after wait_on run after the collective,
// the kernels queued before it overlap with it (spec §4.5, §12.1).
//
//   auto work = grid.y().all_reduce_async(d_dx, n, DType::kF32);     // NCCL, own stream
//   ops.matmul_backward(...);                                       // overlaps
//   work->wait_on(kernels::cuda_compute_stream());                  // host does not block
//   ops.layernorm_backward(..., d_dx, ...);                         // runs after the all-reduce
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
  // Device-side wait: work queued on `stream` (a cudaStream_t; nullptr = the communicator's compute
  // stream, where its buffers are produced and consumed) after this call runs after the collective.
  // Does not block the host where the backend can do it on the device (NCCL); the host backends (MPI,
  // the MPI-staged device communicator) complete on the host, so for them it is wait(). After
  // wait_on the Work may be destroyed without blocking; an error of the collective then surfaces at
  // the communicator's next collective (NCCL's asynchronous error) instead of here.
  virtual void wait_on(void* stream) {
    (void)stream;
    wait();
  }
};

}  // namespace axonn::comm
