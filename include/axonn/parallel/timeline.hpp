// parallel/timeline.hpp — the model's kernels and collectives, timed into a Profiler and a Trace.
//
// Every kernel call of the model runs inside a compute() scope, every layer or kernel group inside a
// group() scope, and every collective goes through the collectives below, which call the
// Communicator's and, while a Trace records, add a span from issue to completion on the track
// "<group> <collective>" (e.g. "y all_reduce"). With neither a profiler nor a recording trace they
// cost one branch each.
//
// Completion of a non-blocking collective. The Work of a traced collective is watched by a thread of
// this Timeline, which polls Work::test() every few tens of microseconds and records the time it
// first sees it complete; the caller's wait() returns once the watcher has seen it complete (the
// watcher is the only thread that touches the underlying Work until then). The watcher runs only
// while something traced is in flight, and only in traced steps. Work::test() is a flag read when
// the communicator has its progress thread (comm/factory.hpp, the default); without one it calls
// MPI_Test from the watcher thread, which needs MPI_THREAD_MULTIPLE.
//
//   Timeline tl;  tl.set_trace(&trace);
//   { auto s = tl.compute("matmul_forward"); ops.matmul_forward(...); }
//   auto w = tl.all_reduce_async(grid.y(), dx, n);   // over Y: traced from here ...
//   ...                                              // compute
//   w->wait();                                       // ... to its completion
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "axonn/comm/communicator.hpp"
#include "axonn/core/profiler.hpp"
#include "axonn/core/timer.hpp"
#include "axonn/core/trace.hpp"

namespace axonn::parallel {

class Timeline {
 public:
  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  void set_profiler(Profiler* profiler) { profiler_ = profiler; }
  void set_trace(Trace* trace) { trace_ = trace; }
  Profiler* profiler() const { return profiler_; }
  Trace* trace() const { return trace_; }
  bool tracing() const { return trace_ && trace_->recording(); }

  // A profiled region and a span on the compute track, for the scope's lifetime.
  class Scope {
   public:
    Scope(const Timeline& tl, const char* name, SpanKind kind)
        : profile_(tl.profiler_, name), trace_(tl.trace_, name, kind) {}

   private:
    ProfileScope profile_;
    TraceScope trace_;
  };
  // A kernel or GEMM: what the summary counts as compute.
  [[nodiscard]] Scope compute(const char* name) const { return Scope(*this, name, SpanKind::kCompute); }
  // A layer, kernel group or phase (it may contain collectives and waits).
  [[nodiscard]] Scope group(const char* name) const { return Scope(*this, name, SpanKind::kGroup); }

  // Collectives (comm/communicator.hpp has the semantics), traced. Blocking ones are spans from call
  // to return, marked blocking; *_async return a Work traced until its completion. The float*
  // overloads are the fp32 ones; bf16 activations and weight copies pass DType::kBF16.
  void all_reduce(comm::Communicator& c, void* buf, size_t n, DType dtype, comm::ReduceOp op = comm::ReduceOp::kSum);
  void all_reduce(comm::Communicator& c, float* buf, size_t n, comm::ReduceOp op = comm::ReduceOp::kSum) {
    all_reduce(c, buf, n, DType::kF32, op);
  }
  [[nodiscard]] std::unique_ptr<comm::Work> all_reduce_async(comm::Communicator& c, void* buf, size_t n, DType dtype);
  [[nodiscard]] std::unique_ptr<comm::Work> all_reduce_async(comm::Communicator& c, float* buf, size_t n) {
    return all_reduce_async(c, buf, n, DType::kF32);
  }
  void all_gather(comm::Communicator& c, const void* send, void* recv, size_t n, DType dtype);
  void all_gather(comm::Communicator& c, const float* send, float* recv, size_t n) {
    all_gather(c, send, recv, n, DType::kF32);
  }
  [[nodiscard]] std::unique_ptr<comm::Work> all_gather_async(comm::Communicator& c, const void* send, void* recv,
                                                             size_t n, DType dtype);
  [[nodiscard]] std::unique_ptr<comm::Work> all_gather_async(comm::Communicator& c, const float* send, float* recv,
                                                             size_t n) {
    return all_gather_async(c, send, recv, n, DType::kF32);
  }
  // fp32 only: weight gradients are fp32 in both precisions.
  [[nodiscard]] std::unique_ptr<comm::Work> reduce_scatter_async(comm::Communicator& c, const float* send,
                                                                 float* recv, size_t recv_n);

  struct Watched;  // one traced Work in flight (timeline.cpp)

 private:
  // Wraps a just-issued Work so that its completion time is recorded.
  std::unique_ptr<comm::Work> watch(std::unique_ptr<comm::Work> work, const comm::Communicator& c,
                                    const char* collective, double issued_us, size_t bytes);
  void add_comm_span(const comm::Communicator& c, const char* collective, double begin, double end, size_t bytes,
                     bool blocking) const;
  void watcher_loop();

  Profiler* profiler_ = nullptr;
  Trace* trace_ = nullptr;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Watched>> watched_;  // guarded by mu_
  bool stop_ = false;                              // guarded by mu_
  std::thread watcher_;                            // started on the first traced Work
};

}  // namespace axonn::parallel
