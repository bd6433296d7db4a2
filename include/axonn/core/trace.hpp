// core/trace.hpp — a timeline of one rank: spans on named tracks, written as Chrome trace events.
//
// A span is an interval [begin, end] in microseconds of the steady clock (CLOCK_MONOTONIC: the same
// clock in every process of one machine, so the ranks' timelines line up). Kinds:
//   compute   a kernel or GEMM run by the compute (main) thread          track "compute"
//   group     a layer, a kernel group, a training phase (nests computes) track "compute"
//   comm      a collective, from issue to completion                     track "<group> <collective>"
//             (a blocking collective is a comm span too, marked blocking: the compute thread waits)
// Spans are recorded only while recording() is on (a window of training steps); add() is
// thread-safe (collective completions are recorded by a watcher thread, parallel/timeline.hpp).
//
//   Trace trace;
//   trace.set_recording(true);
//   { TraceScope s(&trace, "matmul_forward"); ... }
//   std::string events = trace.chrome_events(rank, "rank 0", origin_us);  // JSON objects, comma-separated
//
// Chrome trace-event format (Perfetto, chrome://tracing): one process per rank (pid = rank), one
// thread per track (tid), complete events {"ph":"X","ts":begin,"dur":end-begin}. Collectives that are
// in flight at the same time on one track (several reduce-scatters) are spread over extra lanes
// ("z reduce_scatter #2") so that every thread's spans nest, as the format requires.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace axonn {

enum class SpanKind { kCompute, kGroup, kComm };

class Trace {
 public:
  struct Span {
    std::string name;   // "matmul_forward", "fc forward", "all_reduce"
    std::string track;  // "compute" or "<group> <collective>", e.g. "y all_reduce"
    SpanKind kind = SpanKind::kCompute;
    double begin_us = 0, end_us = 0;
    int64_t bytes = 0;      // comm: bytes this rank sends in (or contributes to) the collective
    bool blocking = false;  // comm: the calling thread waited inside the call
    int step = -1;          // the training step (1-based) it belongs to, or -1
  };

  // Microseconds on the steady clock.
  static double now_us();

  void set_recording(bool on) { recording_.store(on, std::memory_order_relaxed); }
  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  // Tag of the spans added from now on (the training step).
  void set_step(int step) { step_.store(step, std::memory_order_relaxed); }

  // Thread-safe. Ignored while not recording.
  void add(Span span);
  std::vector<Span> spans() const;
  void clear();
  // Earliest begin of any span (+inf when empty).
  double earliest_us() const;

  // This rank's events as comma-separated JSON objects (no surrounding brackets), so that the
  // ranks' parts can be concatenated into one "traceEvents" array: process and thread names
  // (metadata events), then one complete event per span, times relative to origin_us.
  std::string chrome_events(int pid, const std::string& process_name, double origin_us) const;

 private:
  mutable std::mutex mu_;
  std::vector<Span> spans_;
  std::atomic<bool> recording_{false};
  std::atomic<int> step_{-1};
};

// A span on the compute track for the lifetime of the scope (null or idle trace: nothing).
class TraceScope {
 public:
  TraceScope(Trace* trace, const char* name, SpanKind kind = SpanKind::kCompute)
      : trace_(trace && trace->recording() ? trace : nullptr), name_(name), kind_(kind),
        begin_(trace_ ? Trace::now_us() : 0) {}
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Trace* trace_;
  const char* name_;
  SpanKind kind_;
  double begin_;
};

}  // namespace axonn
