#include "axonn/core/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

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
  std::mutex mu;
};

LogState& state() {
  static LogState s;
  return s;
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
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.world > 1) std::fprintf(out, "[rank %d/%d] ", s.rank, s.world);
  if (level == LogLevel::kError) std::fputs("error: ", out);
  if (level == LogLevel::kWarn) std::fputs("warning: ", out);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(out, fmt, ap);
  va_end(ap);
  std::fputc('\n', out);
  std::fflush(out);
}

}  // namespace axonn
