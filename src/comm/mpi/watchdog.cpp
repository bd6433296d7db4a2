// comm/mpi/watchdog.cpp — deadlines on blocking waits (watchdog.hpp).
#include "watchdog.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/log.hpp"

namespace axonn::comm {

namespace {
std::mutex g_activity_mu;
std::string g_activity;  // guarded by g_activity_mu
}  // namespace

void set_activity(const std::string& what) {
  std::lock_guard lock(g_activity_mu);
  g_activity = what;
}

}  // namespace axonn::comm

namespace axonn::comm::detail {

namespace {

constexpr int kQueryTag = 1;
constexpr int kReplyTag = 2;
constexpr int kReplyBytes = 480;
constexpr auto kPoll = std::chrono::milliseconds(100);
// how long the watchdog waits for the right to call MPI before it polls for questions without it
constexpr auto kUnlockedPollAfter = std::chrono::seconds(2);

std::string activity() {
  std::lock_guard lock(g_activity_mu);
  return g_activity.empty() ? std::string("(start-up)") : g_activity;
}

std::string describe(const WaitInfo& w) {
  char buf[256];
  if (w.counted)
    std::snprintf(buf, sizeof buf, "%s #%llu of %zu %s on communicator '%s'", w.collective,
                  static_cast<unsigned long long>(w.call), w.count, std::string(dtype_name(w.dtype)).c_str(),
                  w.group ? w.group->c_str() : "?");
  else
    std::snprintf(buf, sizeof buf, "%s #%llu on communicator '%s'", w.collective,
                  static_cast<unsigned long long>(w.call), w.group ? w.group->c_str() : "?");
  return buf;
}

// Every live watchdog, so that MPI_Finalize stops their threads before MPI goes away (however it is
// reached: a communicator kept in a static outlives main's MPI_Finalize).
std::mutex g_live_mu;
std::set<Watchdog*> g_live;

}  // namespace

// Called at the start of MPI_Finalize (the delete callback of an attribute on MPI_COMM_SELF).
int stop_watchdogs_at_finalize(MPI_Comm, int, void*, void*);

Watchdog::Watchdog(double timeout_s, bool thread_multiple, std::mutex& mpi_mu)
    : timeout_s_(timeout_s), multiple_(thread_multiple), mpi_mu_(mpi_mu) {
  if (timeout_s_ <= 0) return;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  {
    std::lock_guard lock(g_live_mu);
    static bool hooked = false;  // one finalize hook for the process
    if (!hooked) {
      int key = MPI_KEYVAL_INVALID;
      MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, stop_watchdogs_at_finalize, &key, nullptr);
      MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr);
      hooked = true;
    }
    g_live.insert(this);
  }
  if (multiple_) MPI_Irecv(&query_buf_, 1, MPI_INT, MPI_ANY_SOURCE, kQueryTag, comm_, &query_);
  last_end_ = last_poll_ = Clock::now();
  thread_ = std::thread([this] { run(); });
}

void Watchdog::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (query_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&query_);
    MPI_Wait(&query_, MPI_STATUS_IGNORE);
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Watchdog::~Watchdog() {
  if (timeout_s_ <= 0) return;
  shutdown();
  std::lock_guard lock(g_live_mu);
  g_live.erase(this);
}

int stop_watchdogs_at_finalize(MPI_Comm, int, void*, void*) {
  std::vector<Watchdog*> live;
  {
    std::lock_guard lock(g_live_mu);
    live.assign(g_live.begin(), g_live.end());
  }
  for (Watchdog* w : live) w->shutdown();
  return MPI_SUCCESS;
}

uint64_t Watchdog::begin(const WaitInfo& w) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  waits_.emplace(id, Wait{w, Clock::now()});
  return id;
}

void Watchdog::end(uint64_t id) {
  std::lock_guard lock(mu_);
  waits_.erase(id);
  last_end_ = Clock::now();
}

std::string Watchdog::state() const {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  char buf[kReplyBytes];
  if (waits_.empty()) {
    std::snprintf(buf, sizeof buf, "|is in no collective (computing, or in I/O) at %s; its last wait ended %.1f s ago",
                  activity().c_str(), std::chrono::duration<double>(now - last_end_).count());
  } else {
    const Wait& w = waits_.begin()->second;  // the oldest
    std::snprintf(buf, sizeof buf, "%s#%llu|waits in %s since %.1f s, at %s", w.info.group ? w.info.group->c_str() : "",
                  static_cast<unsigned long long>(w.info.call), describe(w.info).c_str(),
                  std::chrono::duration<double>(now - w.since).count(), activity().c_str());
  }
  return buf;
}

void Watchdog::answer_queries() {
  if (!multiple_) return;
  for (;;) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Test(&query_, &flag, &status) != MPI_SUCCESS || !flag) return;
    sent_.push_back(state());
    sent_.back().resize(kReplyBytes - 1, '\0');
    sent_.back().push_back('\0');  // always terminated
    if (sent_.size() > 64) sent_.pop_front();  // long since delivered
    MPI_Request r;
    MPI_Isend(sent_.back().data(), kReplyBytes, MPI_CHAR, status.MPI_SOURCE, kReplyTag, comm_, &r);
    MPI_Request_free(&r);
    MPI_Irecv(&query_buf_, 1, MPI_INT, MPI_ANY_SOURCE, kQueryTag, comm_, &query_);
  }
}

void Watchdog::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, kPoll, [this] { return stop_; });
    if (stop_) break;
    std::optional<Wait> overdue;
    const auto now = Clock::now();
    for (const auto& [id, w] : waits_)
      if (std::chrono::duration<double>(now - w.since).count() >= timeout_s_) {
        overdue = w;
        break;
      }
    lock.unlock();
    {
      std::unique_lock in_mpi(mpi_mu_, std::try_to_lock);
      if (in_mpi.owns_lock() || Clock::now() - last_poll_ >= kUnlockedPollAfter) {
        answer_queries();
        last_poll_ = Clock::now();
      }
    }
    // expire() asks the others without the right to call MPI: a wait past the deadline may hold it
    if (overdue) expire(*overdue, std::chrono::duration<double>(Clock::now() - overdue->since).count());
    lock.lock();
  }
}

void Watchdog::expire(const Wait& w, double waited_s) {
  const std::string what = describe(w.info);
  const std::string mine = (w.info.group ? *w.info.group : std::string()) + "#" + std::to_string(w.info.call);
  log_error("watchdog: %s has waited %.0f s (--comm-timeout %g) at %s; asking the other ranks what they do",
            what.c_str(), waited_s, timeout_s_, activity().c_str());
  std::vector<std::string> answers(static_cast<size_t>(size_));
  std::vector<bool> answered(static_cast<size_t>(size_), false);
  const double answer_s = std::clamp(timeout_s_ / 4, 2.0, 10.0);
  if (multiple_ && size_ > 1) {
    std::vector<std::vector<char>> bufs(static_cast<size_t>(size_), std::vector<char>(kReplyBytes, '\0'));
    std::vector<MPI_Request> replies(static_cast<size_t>(size_), MPI_REQUEST_NULL);
    int me = rank_;
    for (int r = 0; r < size_; r++) {
      if (r == rank_) continue;
      MPI_Irecv(bufs[static_cast<size_t>(r)].data(), kReplyBytes, MPI_CHAR, r, kReplyTag, comm_,
                &replies[static_cast<size_t>(r)]);
      MPI_Request q;
      MPI_Isend(&me, 1, MPI_INT, r, kQueryTag, comm_, &q);
      MPI_Request_free(&q);
    }
    const auto deadline = Clock::now() + std::chrono::duration<double>(answer_s);
    int pending = size_ - 1;
    while (pending > 0 && Clock::now() < deadline) {
      answer_queries();  // the others may be asking too
      for (int r = 0; r < size_; r++) {
        auto& req = replies[static_cast<size_t>(r)];
        if (req == MPI_REQUEST_NULL) continue;
        int flag = 0;
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (!flag) continue;
        const std::vector<char>& b = bufs[static_cast<size_t>(r)];
        answers[static_cast<size_t>(r)] = std::string(b.data(), strnlen(b.data(), b.size()));
        answered[static_cast<size_t>(r)] = true;
        pending--;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // the report: who waits in the same collective (same communicator and call), who does something
  // else, who is silent
  std::string same, silent;
  for (int r = 0; r < size_; r++) {
    if (r == rank_) continue;
    const size_t k = static_cast<size_t>(r);
    if (!answered[k]) {
      silent += (silent.empty() ? "" : ", ") + std::to_string(r);
      continue;
    }
    const std::string& a = answers[k];
    const size_t bar = a.find('|');
    const std::string sig = a.substr(0, bar), text = bar == std::string::npos ? a : a.substr(bar + 1);
    if (sig == mine) same += (same.empty() ? "" : ", ") + std::to_string(r);
    else log_error("watchdog:   rank %d %s", r, text.c_str());
  }
  if (!same.empty()) log_error("watchdog:   rank%s %s wait%s in the same collective", same.find(',') != std::string::npos ? "s" : "",
                               same.c_str(), same.find(',') != std::string::npos ? "" : "s");
  if (!silent.empty())
    log_error("watchdog:   rank%s %s did not answer within %.0f s: stopped, hung or dead (these did not arrive)",
              silent.find(',') != std::string::npos ? "s" : "", silent.c_str(), answer_s);
  if (!multiple_) log_error("watchdog:   (MPI granted no MPI_THREAD_MULTIPLE: the other ranks were not asked)");
  log_error("watchdog: aborting the job (raise --comm-timeout if a step, a save or a validation legitimately takes "
            "this long)");
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace axonn::comm::detail
