// core/log.hpp — a small rank-aware logger.
//
// Level from AXONN_LOG_LEVEL (error, warn, info, debug, trace) or set_log_level(). By default only
// rank 0 prints; AXONN_LOG_RANKS=all makes every rank print with a "[rank r/N]" prefix. Errors are
// printed by every rank. printf-style: g++ 12 has no <format>.
//
//   axonn::log_info("step %d loss %.6f", step, loss);
#pragma once

#include <cstdarg>

namespace axonn {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
// Called once the rank is known (after MPI init); before that every message is printed as rank 0.
void set_log_rank(int rank, int world_size);
// The rank given to set_log_rank (0 before), for code that, like the logger, prints on rank 0 only.
int log_rank();
// Info, debug and trace lines go to stdout (errors and warnings to stderr); true sends them to stderr
// too, for commands whose stdout is their output (axonn generate).
void set_log_info_to_stderr(bool to_stderr);

void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Writes the lines log_message could not write yet (an output made non-blocking by a stop signal,
// and full: train/stop.cpp), waiting up to `wait_ms` for room; then forgets any it still cannot write.
void flush_log_output(int wait_ms);
// Waits, at most `max_ms`, until what this process wrote to `fd` (STDOUT_FILENO or STDERR_FILENO, flushed)
// has been taken by its reader, so that what it writes next to the other output cannot overtake it. A
// launcher forwards a rank's two outputs separately and in no fixed order (Open MPI's mpirun: standard
// output through a terminal, standard error through a pipe): `mpirun axonn generate` printed its rate line
// inside the sample it followed in 6 runs of 20. For a pipe: until it holds no unread byte. A terminal keeps
// no count a writer can read: under a launcher (OMPI_COMM_WORLD_RANK set), a pause of kTerminalHandOverMs.
// A file, or a terminal of the process's own, needs no wait.
void await_output_taken(int fd, int max_ms = 1000);
inline constexpr int kTerminalHandOverMs = 100;
#define AXONN_LOG_FN(name, level)                                                  \
  template <typename... Args>                                                      \
  void name(const char* fmt, Args... args) {                                       \
    if (static_cast<int>(level) <= static_cast<int>(log_level())) log_message(level, fmt, args...); \
  }
AXONN_LOG_FN(log_error, LogLevel::kError)
AXONN_LOG_FN(log_warn, LogLevel::kWarn)
AXONN_LOG_FN(log_info, LogLevel::kInfo)
AXONN_LOG_FN(log_debug, LogLevel::kDebug)
#undef AXONN_LOG_FN

}  // namespace axonn
