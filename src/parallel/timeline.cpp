#include "axonn/parallel/timeline.hpp"

#include <chrono>
#include <string>

#include "axonn/core/log.hpp"

namespace axonn::parallel {

// One traced collective in flight. `inner` is touched only by the watcher thread until `done`, then
// only by the owner (to rethrow an error).
struct Timeline::Watched {
  std::unique_ptr<comm::Work> inner;
  const comm::Communicator* comm = nullptr;
  const char* collective = "";
  double issued_us = 0;
  size_t bytes = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;  // guarded by mu
};

namespace {

// The caller's handle: waits for the watcher to see the collective complete.
class WatchedWork final : public comm::Work {
 public:
  explicit WatchedWork(std::shared_ptr<Timeline::Watched> w) : w_(std::move(w)) {}
  ~WatchedWork() override {
    try {
      wait();  // the buffers may be freed after this
    } catch (const std::exception& e) {
      log_warn("a traced collective destroyed without wait() failed: %s", e.what());
    }
  }
  void wait() override {
    {
      std::unique_lock lock(w_->mu);
      w_->cv.wait(lock, [&] { return w_->done; });
    }
    w_->inner->wait();  // complete: returns at once, or rethrows the collective's error
  }
  bool test() override {
    std::lock_guard lock(w_->mu);
    return w_->done;
  }
  // A traced collective completes on the host: the watcher is the only thread that touches the inner
  // Work until it has seen it complete, and its completion time is what the trace records. So in a traced
  // step the GPU's device-side waits become host waits (the trace shows when results were visible to
  // the host; untraced steps keep the device-side overlap).
  void wait_on(void* /*stream*/) override { wait(); }

 private:
  std::shared_ptr<Timeline::Watched> w_;
};

constexpr auto kPollInterval = std::chrono::microseconds(20);

}  // namespace

Timeline::~Timeline() {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  watcher_.join();  // returns once every watched collective has completed
}

void Timeline::add_comm_span(const comm::Communicator& c, const char* collective, double begin, double end,
                             size_t bytes, bool blocking) const {
  Trace::Span s;
  s.name = std::string(collective) + " " + c.name();
  s.track = c.name() + " " + collective;
  s.kind = SpanKind::kComm;
  s.begin_us = begin;
  s.end_us = end;
  s.bytes = static_cast<int64_t>(bytes);
  s.blocking = blocking;
  trace_->add(std::move(s));
}

std::unique_ptr<comm::Work> Timeline::watch(std::unique_ptr<comm::Work> work, const comm::Communicator& c,
                                            const char* collective, double issued_us, size_t bytes) {
  auto w = std::make_shared<Watched>();
  w->inner = std::move(work);
  w->comm = &c;
  w->collective = collective;
  w->issued_us = issued_us;
  w->bytes = bytes;
  {
    std::lock_guard lock(mu_);
    watched_.push_back(w);
    if (!watcher_.joinable()) watcher_ = std::thread([this] { watcher_loop(); });
  }
  cv_.notify_one();
  return std::make_unique<WatchedWork>(std::move(w));
}

void Timeline::watcher_loop() {
  std::vector<std::shared_ptr<Watched>> active;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (active.empty()) cv_.wait(lock, [&] { return stop_ || !watched_.empty(); });
      for (auto& w : watched_) active.push_back(std::move(w));
      watched_.clear();
      if (active.empty() && stop_) return;
    }
    size_t j = 0;
    for (auto& w : active) {
      if (w->inner->test()) {
        const double t = Trace::now_us();
        if (trace_) add_comm_span(*w->comm, w->collective, w->issued_us, t, w->bytes, false);
        {
          std::lock_guard lock(w->mu);
          w->done = true;
        }
        w->cv.notify_all();
      } else {
        active[j++] = std::move(w);
      }
    }
    active.resize(j);
    if (!active.empty()) std::this_thread::sleep_for(kPollInterval);
  }
}

// Each collective: untraced (or a group of one rank, where nothing is sent) it is the Communicator's
// call alone.

void Timeline::all_reduce(comm::Communicator& c, void* buf, size_t n, DType dtype, comm::ReduceOp op) {
  if (!tracing() || c.size() == 1) return c.all_reduce(buf, n, dtype, op);
  const double t0 = Trace::now_us();
  c.all_reduce(buf, n, dtype, op);
  add_comm_span(c, "all_reduce", t0, Trace::now_us(), n * dtype_size(dtype), true);
}

std::unique_ptr<comm::Work> Timeline::all_reduce_async(comm::Communicator& c, void* buf, size_t n, DType dtype) {
  if (!tracing() || c.size() == 1) return c.all_reduce_async(buf, n, dtype);
  const double t0 = Trace::now_us();
  return watch(c.all_reduce_async(buf, n, dtype), c, "all_reduce", t0, n * dtype_size(dtype));
}

void Timeline::all_gather(comm::Communicator& c, const void* send, void* recv, size_t n, DType dtype) {
  if (!tracing() || c.size() == 1) return c.all_gather(send, recv, n, dtype);
  const double t0 = Trace::now_us();
  c.all_gather(send, recv, n, dtype);
  add_comm_span(c, "all_gather", t0, Trace::now_us(), n * dtype_size(dtype), true);
}

std::unique_ptr<comm::Work> Timeline::all_gather_async(comm::Communicator& c, const void* send, void* recv, size_t n,
                                                       DType dtype) {
  if (!tracing() || c.size() == 1) return c.all_gather_async(send, recv, n, dtype);
  const double t0 = Trace::now_us();
  return watch(c.all_gather_async(send, recv, n, dtype), c, "all_gather", t0, n * dtype_size(dtype));
}

std::unique_ptr<comm::Work> Timeline::reduce_scatter_async(comm::Communicator& c, const float* send, float* recv,
                                                           size_t recv_n) {
  if (!tracing() || c.size() == 1) return c.reduce_scatter_async(send, recv, recv_n, DType::kF32);
  const double t0 = Trace::now_us();
  return watch(c.reduce_scatter_async(send, recv, recv_n, DType::kF32), c, "reduce_scatter", t0,
               recv_n * c.size() * sizeof(float));
}

}  // namespace axonn::parallel
