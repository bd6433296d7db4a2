#include "axonn/core/log.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace axonn {
namespace {

LogLevel level_from_env() {
  const char* s = std::getenv("AXONN_LOG_LEVEL");
  if (!s) return LogLevel::kInfo;
  if (!std::strcmp(s, "error")) return LogLevel::kError;
  if (!std::strcmp(s, "warn")) return LogLevel::kWarn;
  if (!std::strcmp(s, "debug")) return LogLevel::kDebug;
  if (!std::strcmp(s, "trace")) return LogLevel::kTrace;
  return LogLevel::kInfo;
}

bool all_ranks_from_env() {
  const char* s = std::getenv("AXONN_LOG_RANKS");
  return s && !std::strcmp(s, "all");
}

struct LogState {
  LogLevel level = level_from_env();
  bool all_ranks = all_ranks_from_env();
  int rank = 0;
  int world = 1;
  bool info_to_stderr = false;
  std::string pending[2];  // standard output's and error's lines not yet written (see write_some)
  std::mutex mu;
};

// At most this much of a blocked output is kept for later (about 2,000 progress lines).
constexpr size_t kMaxPending = 256 * 1024;

LogState& state() {
  static LogState s;
  return s;
}

// Writes what it can of `text` to `fd` and returns how much: all of it on a blocking descriptor
// (through EINTR; an error drops the text); on a non-blocking one that is full, what fit. A stop
// signal makes the outputs non-blocking (train/stop.cpp): Open MPI's mpirun stops reading its ranks'
// output for seconds when it is signalled, and a rank blocked in a write would never reach its
// checkpoint. The rest waits in LogState::pending for the next line or flush_log_output().
size_t write_some(int fd, std::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w > 0) {
      done += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return done;
    return text.size();  // closed or failed: nothing more can go there
  }
  return done;
}

}  // namespace

void set_log_level(LogLevel level) { state().level = level; }
LogLevel log_level() { return state().level; }
void set_log_rank(int rank, int world_size) {
  state().rank = rank;
  state().world = world_size;
}
int log_rank() { return state().rank; }
void set_log_info_to_stderr(bool to_stderr) { state().info_to_stderr = to_stderr; }

void log_message(LogLevel level, const char* fmt, ...) {
  LogState& s = state();
  // Errors come from every rank (the failing one may not be rank 0); the rest from rank 0 only.
  if (level != LogLevel::kError && s.rank != 0 && !s.all_ranks) return;
  FILE* out = level <= LogLevel::kWarn || s.info_to_stderr ? stderr : stdout;
  // the whole line in one write: under mpirun the ranks' lines never interleave mid-line
  std::string line;
  if (s.world > 1) line = "[rank " + std::to_string(s.rank) + "/" + std::to_string(s.world) + "] ";
  if (level == LogLevel::kError) line += "error: ";
  if (level == LogLevel::kWarn) line += "warning: ";
  va_list ap;
  va_start(ap, fmt);
  va_list again;
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  if (n > 0) {
    const size_t at = line.size();
    line.resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(line.data() + at, static_cast<size_t>(n) + 1, fmt, again);
    line.resize(at + static_cast<size_t>(n));
  }
  va_end(again);
  line += '\n';
  std::lock_guard<std::mutex> lock(s.mu);
  std::fflush(out);  // what the program printed through stdio before this line goes first
  int fd = fileno(out);
  // standard output full after a stop (lines wait in pending): the rest goes to standard error, which
  // under Open MPI is another channel (a pipe beside stdout's pty) with room for a stopped run's last
  // lines: its checkpoint and its verdict
  if (fd == STDOUT_FILENO && !s.pending[0].empty()) fd = STDERR_FILENO;
  std::string& pending = s.pending[fd == STDERR_FILENO ? 1 : 0];
  pending += line;
  pending.erase(0, write_some(fd, pending));
  if (pending.size() > kMaxPending) pending.erase(0, pending.size() - kMaxPending);  // the newest lines stay
}

void await_output_taken(int fd, int max_ms) {
  std::fflush(fd == STDOUT_FILENO ? stdout : stderr);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  if (S_ISFIFO(st.st_mode)) {
    constexpr int kPollMs = 2;
    for (int waited = 0; waited < max_ms; waited += kPollMs) {
      int unread = 0;
      if (::ioctl(fd, FIONREAD, &unread) != 0 || unread == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
    }
    return;
  }
  if (::isatty(fd) && std::getenv("OMPI_COMM_WORLD_RANK"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(max_ms, kTerminalHandOverMs)));
}

void flush_log_output(int wait_ms) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  constexpr int kPollMs = 50;
  for (int waited = 0;; waited += kPollMs) {
    bool left = false;
    for (int i = 0; i < 2; i++) {
      std::string& pending = s.pending[i];
      pending.erase(0, write_some(i == 0 ? STDOUT_FILENO : STDERR_FILENO, pending));
      left = left || !pending.empty();
    }
    if (!left || waited >= wait_ms) break;
    pollfd fds[2] = {{STDOUT_FILENO, POLLOUT, 0}, {STDERR_FILENO, POLLOUT, 0}};
    (void)::poll(fds, 2, kPollMs);
  }
  s.pending[0].clear();  // what could not be written by now never will be
  s.pending[1].clear();
}

}  // namespace axonn
