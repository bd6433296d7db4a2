// core/progress.hpp: the plain lines written when not on a terminal, quiet mode, rank 0 only, and the
// ETA arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "axonn/core/log.hpp"
#include "axonn/core/progress.hpp"

namespace axonn {
namespace {

// Everything written to a FILE*, as a string.
struct Capture {
  char* buf = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&buf, &size);
  ~Capture() {
    if (f) std::fclose(f);
    std::free(buf);
  }
  std::string text() {
    std::fflush(f);
    return std::string(buf, size);
  }
};

// Options for a test: the mode, unit and intervals, the output and a fake clock.
ProgressOptions options(ProgressMode mode, FILE* out, double* t, std::string unit = "", double interval = 0) {
  ProgressOptions o;
  o.mode = mode;
  o.unit = std::move(unit);
  o.line_interval_s = o.redraw_interval_s = interval;
  o.out = out;
  if (t) o.clock = [t] { return *t; };
  return o;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

TEST(Progress, EtaIsTheRemainderAtTheAverageRate) {
  EXPECT_DOUBLE_EQ(progress_eta_s(25, 100, 10.0), 30.0);   // 2.5/s, 75 left
  EXPECT_DOUBLE_EQ(progress_eta_s(1, 3, 2.0), 4.0);
  EXPECT_DOUBLE_EQ(progress_eta_s(100, 100, 7.0), 0.0);
  EXPECT_DOUBLE_EQ(progress_eta_s(120, 100, 7.0), 0.0);    // overshoot: done
  EXPECT_TRUE(std::isnan(progress_eta_s(0, 100, 5.0)));    // no rate yet
  EXPECT_TRUE(std::isnan(progress_eta_s(10, 100, 0.0)));   // no time yet
  EXPECT_TRUE(std::isnan(progress_eta_s(10, 0, 5.0)));     // unknown total
}

TEST(Progress, Durations) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(59.6), "1:00");
  EXPECT_EQ(format_duration(754), "12:34");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(std::nan("")), "--:--");
  EXPECT_EQ(format_duration(-1), "--:--");
}

TEST(Progress, Amounts) {
  EXPECT_EQ(format_amount(512, "B"), "512 B");
  EXPECT_EQ(format_amount(1536, "B"), "1.5 KiB");
  EXPECT_EQ(format_amount(216.0 * 1024 * 1024, "B"), "216.0 MiB");
  EXPECT_EQ(format_amount(2.0 * 1024 * 1024 * 1024, "B"), "2.00 GiB");
  EXPECT_EQ(format_amount(12, "steps"), "12 steps");
  EXPECT_EQ(format_amount(12, ""), "12");
}

TEST(Progress, PlainLinesAtTheIntervalThenASummary) {
  Capture cap;
  double t = 100.0;
  {
    Progress p("convert", 1000, options(ProgressMode::kLines, cap.f, &t, "files", 10));
    EXPECT_EQ(p.mode(), ProgressMode::kLines);
    t = 105;
    p.set(100);  // before the interval: nothing
    EXPECT_EQ(cap.text(), "");
    t = 110;
    p.set(250);  // 25 files/s, 750 left: 30 s
    EXPECT_EQ(cap.text(), "convert: 250/1000 files (25%), 25.0 files/s, elapsed 0:10, ETA 0:30\n");
    t = 115;
    p.add(250);  // 5 s after the last line: nothing
    t = 125;
    p.add(250);  // 750 in 25 s: 30/s, 250 left: 8.3 s
    t = 130;
    p.set(1000);  // the end: left to finish()
    p.finish();
    p.finish();  // once
  }  // and not again from the destructor
  EXPECT_EQ(cap.text(),
            "convert: 250/1000 files (25%), 25.0 files/s, elapsed 0:10, ETA 0:30\n"
            "convert: 750/1000 files (75%), 30.0 files/s, elapsed 0:25, ETA 0:08\n"
            "convert: 1000 files in 0:30, 33.3 files/s\n");
}

TEST(Progress, BytesAndAnUnknownTotal) {
  Capture cap;
  double t = 0;
  Progress p("save", 0, options(ProgressMode::kLines, cap.f, &t, "B", 1));
  t = 2;
  p.set(4 << 20);
  p.finish();
  EXPECT_EQ(cap.text(), "save: 4.0 MiB, 2.0 MiB/s, elapsed 0:02\nsave: 4.0 MiB in 0:02, 2.0 MiB/s\n");
}

TEST(Progress, QuietPrintsNothing) {
  Capture cap;
  double t = 0;
  {
    Progress p("calibrate", 10, options(ProgressMode::kQuiet, cap.f, &t));
    for (int i = 1; i <= 10; i++) {
      t = i;
      p.set(i);
    }
  }
  EXPECT_EQ(cap.text(), "");
}

TEST(Progress, OnlyRankZeroDraws) {
  Capture cap;
  double t = 0;
  set_log_rank(1, 2);
  {
    Progress p("prepare", 10, options(ProgressMode::kLines, cap.f, &t));
    EXPECT_EQ(p.mode(), ProgressMode::kQuiet);
    t = 1;
    p.set(5);
  }
  set_log_rank(0, 2);
  {
    Progress p("prepare", 10, options(ProgressMode::kLines, cap.f, &t));
    t = 2;
    p.set(5);
  }
  set_log_rank(0, 1);
  EXPECT_EQ(count(cap.text(), "prepare: "), 2) << cap.text();  // one line and the summary, from rank 0
}

TEST(Progress, AutoIsLinesWhenNotOnATerminal) {
  Capture cap;  // a memory stream is no terminal
  Progress p("x", 1, options(ProgressMode::kAuto, cap.f, nullptr));
  EXPECT_EQ(p.mode(), ProgressMode::kLines);
}

TEST(Progress, BarRedrawsInPlaceAndEndsWithTheSummary) {
  Capture cap;
  double t = 0;
  {
    Progress p("load", 4, options(ProgressMode::kBar, cap.f, &t, "files", 0.5));
    t = 1;
    p.set(1);
    t = 1.2;
    p.set(2);  // within the redraw interval: not drawn
    t = 2;
    p.set(3);
  }
  const std::string s = cap.text();
  EXPECT_EQ(count(s, "\r"), 4) << s;  // at start, two redraws, the summary
  EXPECT_NE(s.find("\rload [======>                 ]  25%  1/4 files  1.0 files/s  0:01 ETA 0:03\033[K"),
            std::string::npos) << s;
  EXPECT_EQ(s.find("2/4"), std::string::npos) << s;
  EXPECT_NE(s.find("\rload: 3 files in 0:02, 1.5 files/s\033[K\n"), std::string::npos) << s;
  EXPECT_EQ(count(s, "\n"), 1) << s;
}

TEST(Progress, WithoutSummaryTheBarIsClearedAndLinesEndQuietly) {
  // checkpoint save and load: the trainer logs its own summary
  Capture bar_out, lines_out;
  double t = 0;
  {
    ProgressOptions o = options(ProgressMode::kBar, bar_out.f, &t, "B", 0.5);
    o.summary = false;
    Progress p("checkpoint save", 4 << 20, o);
    t = 1;
    p.set(2 << 20);
  }
  const std::string s = bar_out.text();
  EXPECT_NE(s.find("\rcheckpoint save [============>           ]  50%  2.0 MiB/4.0 MiB"), std::string::npos) << s;
  EXPECT_TRUE(s.ends_with("\r\033[K")) << s;  // the bar is gone, and no line is left
  EXPECT_EQ(count(s, "\n"), 0) << s;
  t = 0;
  {
    ProgressOptions o = options(ProgressMode::kLines, lines_out.f, &t, "B", 10);
    o.summary = false;
    Progress p("checkpoint load", 4 << 20, o);
    t = 20;
    p.set(1 << 20);  // a line after the interval, then nothing at the end
    p.set(4 << 20);
  }
  EXPECT_EQ(lines_out.text(), "checkpoint load: 1.0 MiB/4.0 MiB (25%), 51.2 KiB/s, elapsed 0:20, ETA 1:00\n");
}

}  // namespace
}  // namespace axonn
