#include "axonn/core/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "axonn/core/log.hpp"

namespace axonn {
namespace {

constexpr int kBarWidth = 24;

bool on_terminal(FILE* out) {
  const char* term = std::getenv("TERM");
  return isatty(fileno(out)) && !(term && !std::strcmp(term, "dumb"));
}

bool off_by_env() {
  const char* s = std::getenv("AXONN_PROGRESS");
  return s && (!std::strcmp(s, "off") || !std::strcmp(s, "0") || !std::strcmp(s, "quiet"));
}

// A rate in the unit per second: "61.2 MiB/s", "12.5 files/s", "2300 steps/s".
std::string format_rate(double per_s, const std::string& unit) {
  if (!std::isfinite(per_s)) return "-";
  if (unit == "B") return format_amount(per_s, unit) + "/s";
  char buf[64];
  std::snprintf(buf, sizeof buf, per_s < 100 ? "%.1f %s/s" : "%.0f %s/s", per_s, unit.empty() ? "it" : unit.c_str());
  return buf;
}

// "216.0 MiB/480.0 MiB" or "3/5 files"; an unknown total shows the done part only.
std::string format_done(int64_t done, int64_t total, const std::string& unit) {
  if (unit == "B")
    return total > 0 ? format_amount(static_cast<double>(done), unit) + "/" + format_amount(static_cast<double>(total), unit)
                     : format_amount(static_cast<double>(done), unit);
  char buf[96];
  const char* sep = unit.empty() ? "" : " ";
  if (total > 0)
    std::snprintf(buf, sizeof buf, "%lld/%lld%s%s", static_cast<long long>(done), static_cast<long long>(total), sep,
                  unit.c_str());
  else
    std::snprintf(buf, sizeof buf, "%lld%s%s", static_cast<long long>(done), sep, unit.c_str());
  return buf;
}

}  // namespace

double progress_eta_s(int64_t done, int64_t total, double elapsed_s) {
  if (total <= 0 || done <= 0 || !(elapsed_s > 0)) return std::nan("");
  if (done >= total) return 0.0;
  return static_cast<double>(total - done) * elapsed_s / static_cast<double>(done);
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "--:--";
  const long long s = std::llround(seconds);
  char buf[48];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

std::string format_amount(double amount, const std::string& unit) {
  char buf[64];
  if (unit == "B") {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (std::fabs(amount) >= 1024 && u < 4) {
      amount /= 1024;
      u++;
    }
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : u >= 3 ? "%.2f %s" : "%.1f %s", amount, units[u]);
  } else {
    std::snprintf(buf, sizeof buf, unit.empty() ? "%.0f" : "%.0f %s", amount, unit.c_str());
  }
  return buf;
}

Progress::Progress(std::string label, int64_t total, ProgressOptions options)
    : label_(std::move(label)), total_(total), options_(std::move(options)) {
  if (!options_.out) options_.out = stderr;
  mode_ = options_.mode;
  // only rank 0 draws; the environment and the log level can silence it
  if (log_rank() != 0 || off_by_env() || log_level() < LogLevel::kInfo) mode_ = ProgressMode::kQuiet;
  if (mode_ == ProgressMode::kAuto) mode_ = on_terminal(options_.out) ? ProgressMode::kBar : ProgressMode::kLines;
  start_s_ = last_draw_s_ = now();
  if (mode_ == ProgressMode::kBar) draw_bar();
}

Progress::~Progress() { finish(); }

double Progress::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string Progress::status() const {
  const double elapsed = now() - start_s_;
  std::string s = format_done(done_, total_, options_.unit);
  if (total_ > 0) {
    char pct[16];
    std::snprintf(pct, sizeof pct, " (%.0f%%)", 100.0 * static_cast<double>(done_) / static_cast<double>(total_));
    s += pct;
  }
  s += ", " + format_rate(elapsed > 0 ? static_cast<double>(done_) / elapsed : std::nan(""), options_.unit);
  s += ", elapsed " + format_duration(elapsed);
  if (total_ > 0) s += ", ETA " + format_duration(progress_eta_s(done_, total_, elapsed));
  return s;
}

void Progress::draw_bar() {
  const double elapsed = now() - start_s_;
  std::string bar;
  if (total_ > 0) {
    const double f = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    const int full = static_cast<int>(f * kBarWidth);
    char cells[kBarWidth + 1];
    for (int i = 0; i < kBarWidth; i++) cells[i] = i < full ? '=' : i == full ? '>' : ' ';
    cells[kBarWidth] = 0;
    char text[kBarWidth + 16];
    std::snprintf(text, sizeof text, "[%s] %3.0f%%", cells, 100.0 * f);
    bar = text;
  }
  std::string line = label_ + " " + bar + "  " + format_done(done_, total_, options_.unit) + "  " +
                     format_rate(elapsed > 0 ? static_cast<double>(done_) / elapsed : std::nan(""), options_.unit) +
                     "  " + format_duration(elapsed);
  if (total_ > 0) line += " ETA " + format_duration(progress_eta_s(done_, total_, elapsed));
  std::fprintf(options_.out, "\r%s\033[K", line.c_str());  // \033[K: clear the rest of the line
  std::fflush(options_.out);
}

void Progress::set(int64_t done) {
  done_ = done;
  if (finished_ || mode_ == ProgressMode::kQuiet) return;
  const double t = now();
  if (mode_ == ProgressMode::kBar) {
    if (t - last_draw_s_ < options_.redraw_interval_s) return;
    last_draw_s_ = t;
    draw_bar();
    return;
  }
  if (t - last_draw_s_ < options_.line_interval_s || (total_ > 0 && done_ >= total_)) return;  // the end: finish()
  last_draw_s_ = t;
  std::fprintf(options_.out, "%s: %s\n", label_.c_str(), status().c_str());
  std::fflush(options_.out);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (mode_ == ProgressMode::kQuiet) return;
  if (!options_.summary) {  // the bar goes; lines mode has nothing to end
    if (mode_ == ProgressMode::kBar) std::fprintf(options_.out, "\r\033[K");
    std::fflush(options_.out);
    return;
  }
  const double elapsed = now() - start_s_;
  // on a terminal the summary replaces the bar
  std::fprintf(options_.out, "%s%s: %s in %s, %s%s\n", mode_ == ProgressMode::kBar ? "\r" : "", label_.c_str(),
               (options_.unit == "B" ? format_amount(static_cast<double>(done_), "B")
                                     : format_done(done_, 0, options_.unit))
                   .c_str(),
               format_duration(elapsed).c_str(),
               format_rate(elapsed > 0 ? static_cast<double>(done_) / elapsed : std::nan(""), options_.unit).c_str(),
               mode_ == ProgressMode::kBar ? "\033[K" : "");
  std::fflush(options_.out);
}

}  // namespace axonn
