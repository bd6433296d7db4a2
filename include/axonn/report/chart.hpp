// report/chart.hpp — charts laid out once as a Drawing, then written as SVG or rasterised (raster.hpp).
//
// A Chart is data (series, labels); layout_chart() turns it into a Drawing: shapes in pixel
// coordinates (origin top-left, y down) — plot background, grid, bars or lines, axes, tick labels,
// title, legend — which to_svg() writes as an inline <svg> and rasterize() draws into an image, so the
// HTML page and the PNG show the same picture.
//
// Scales: linear, "nice" ticks (1, 2, 5 × 10^k) over the finite values; a single value gets a range
// around it. Non-finite points (NaN, ±inf) are skipped and break the line; a lone point between
// breaks is drawn as a dot. Lines with more points than twice the plot's width in pixels are
// decimated per pixel column (first, min, max, last of each column: spikes survive).
//
//   Chart c;
//   c.title = "loss"; c.x_label = "step"; c.y_label = "loss";
//   c.series.push_back({"train", steps, losses});
//   std::string svg = to_svg(layout_chart(c), "chart-loss");
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace axonn::report {

struct Series {
  std::string name;
  std::vector<double> x;  // line charts; bar charts leave it empty
  std::vector<double> y;  // bar charts: one value per category
};

enum class ChartKind { kLine, kBar };

struct Chart {
  ChartKind kind = ChartKind::kLine;
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::vector<std::string> categories;  // bar charts: the groups along x (one bar per series in each;
                                        // with one series, each bar's value is written above it)
  std::optional<double> y_min, y_max;   // fixed ends of the y axis (e.g. 0 and 100 for a percentage)
  double width = 640, height = 360;     // in pixels (SVG user units)
};

struct Color {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Color&) const = default;
};
// "#1f77b4"
std::string to_hex(Color c);
// The colour of series i (Tableau's ten, then round again).
Color series_color(size_t i);
// The plot area's background: what the browser test looks for in a screenshot.
inline constexpr Color kPlotBackground{245, 247, 250};

struct Point {
  double x = 0, y = 0;
};

// Shapes of a Drawing. `data` marks what shows values (lines, bars, dots): class="data" in SVG.
struct RectShape {
  double x = 0, y = 0, w = 0, h = 0;
  Color fill;
  bool data = false;
};
struct PathShape {  // an open polyline
  std::vector<Point> points;
  Color stroke;
  double width = 1;
  bool data = false;
};
struct DotShape {
  Point at;
  double radius = 2;
  Color fill;
};
enum class Anchor { kStart, kMiddle, kEnd };
struct TextShape {
  Point at;  // the start, middle or end of the baseline (before rotation)
  std::string text;
  double size = 11;  // font size in pixels
  Color color;
  Anchor anchor = Anchor::kStart;
  bool vertical = false;  // rotated 90° counter-clockwise about `at` (reads bottom to top)
  bool bold = false;
};
using Shape = std::variant<RectShape, PathShape, DotShape, TextShape>;

struct Drawing {
  double width = 0, height = 0;
  std::vector<Shape> shapes;  // in drawing order
};

// The axis of a scale: its ends and ticks.
struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  double step = 0.2;  // between ticks
};
// Nice ticks covering [lo, hi] (about `target` of them); lo == hi gets a range around the value.
// Requires finite lo <= hi.
Axis nice_axis(double lo, double hi, int target = 5);
// A tick label with as many digits as the tick step needs: "0", "2.5", "0.0010", "3e-5", "12k", "1.5M".
std::string format_tick(double value, double step);

// Min-max decimation of a polyline to at most about 4 points per `bucket_width` along x.
std::vector<Point> decimate(const std::vector<Point>& points, double bucket_width);

Drawing layout_chart(const Chart& chart);
// `&`, `<`, `>`, `"` as entities (HTML and SVG text and attributes).
std::string escape_xml(const std::string& s);
// An inline <svg> element (no xmlns or other URL: the page is HTML5) with id and class="chart".
std::string to_svg(const Drawing& drawing, const std::string& id);

}  // namespace axonn::report
