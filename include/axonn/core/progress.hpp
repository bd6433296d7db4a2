// core/progress.hpp — progress of long work: a bar on a terminal, plain lines in logs, or nothing.
//
// Rank-aware like the logger: only rank 0 draws (the rank given to set_log_rank). The mode:
//   bar    on a terminal (isatty, TERM not "dumb"): one line redrawn in place,
//            convert [==========>             ]  45%  216.0 MiB/480.0 MiB  61.2 MiB/s  0:03 ETA 0:04
//   lines  otherwise (logs, CI): a plain line at most every `line_interval_s` seconds,
//            convert: 216.0 MiB/480.0 MiB (45%), 61.2 MiB/s, elapsed 0:03, ETA 0:04
//          (other units: "3/5 files (60%), ...")
//   quiet  nothing: chosen by the caller (--quiet), by AXONN_PROGRESS=off, by a log level below info,
//          and on every rank but 0.
// Bar and lines end with one summary line at finish() ("convert: 480.0 MiB in 0:08, 60.0 MiB/s"; on a
// terminal it replaces the bar).
// A total of 0 means "unknown": no percentage, no ETA.
//
//   ProgressOptions o;
//   o.unit = "B";
//   Progress p("convert", total_bytes, o);
//   for (...) { ...; p.add(n); }
//   p.finish();   // or let the destructor do it
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace axonn {

enum class ProgressMode { kAuto, kBar, kLines, kQuiet };

struct ProgressOptions {
  ProgressMode mode = ProgressMode::kAuto;  // kAuto: bar on a terminal, else lines (see above)
  std::string unit;                         // "B" shows KiB/MiB/GiB; anything else is a word ("steps")
  double line_interval_s = 10.0;            // lines mode: at most one line per interval
  double redraw_interval_s = 0.1;           // bar mode: at most one redraw per interval
  FILE* out = nullptr;                      // default stderr (stdout stays for results)
  bool summary = true;                      // the summary line at finish(); off where the caller logs its own
  std::function<double()> clock;            // seconds, for tests; default the steady clock
};

class Progress {
 public:
  Progress(std::string label, int64_t total, ProgressOptions options = {});
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // How much is done, absolute (set) or relative (add). Draws when a redraw or line is due.
  void set(int64_t done);
  void add(int64_t n) { set(done_ + n); }
  // The summary line (once; later calls do nothing).
  void finish();

  ProgressMode mode() const { return mode_; }  // the mode in effect (never kAuto)

 private:
  std::string status() const;  // "216.0 MiB/480.0 MiB (45%), 61.2 MiB/s, elapsed 0:03, ETA 0:04"
  void draw_bar();
  double now() const;

  std::string label_;
  int64_t total_, done_ = 0;
  ProgressOptions options_;
  ProgressMode mode_;
  double start_s_, last_draw_s_;
  bool finished_ = false;
};

// Seconds left at the average rate so far: (total - done) * elapsed / done. NaN when it cannot be
// known (nothing done yet, no elapsed time, or an unknown total); 0 once done >= total.
double progress_eta_s(int64_t done, int64_t total, double elapsed_s);
// "0:07", "12:34", "1:02:03"; "--:--" for NaN or negative.
std::string format_duration(double seconds);
// An amount in the unit: "B" as "512 B", "1.5 KiB", "216.0 MiB", "2.00 GiB"; others "%.0f unit".
std::string format_amount(double amount, const std::string& unit);

}  // namespace axonn
