// report/chart.hpp: axes and ticks, the layout of lines and bars, NaN and infinity, one point,
// decimation of long series, and the SVG.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "axonn/report/chart.hpp"

namespace axonn::report {
namespace {

template <typename T>
std::vector<T> shapes_of(const Drawing& d) {
  std::vector<T> out;
  for (const Shape& s : d.shapes)
    if (const T* t = std::get_if<T>(&s)) out.push_back(*t);
  return out;
}

std::vector<PathShape> data_paths(const Drawing& d) {
  std::vector<PathShape> out;
  for (const PathShape& p : shapes_of<PathShape>(d))
    if (p.data) out.push_back(p);
  return out;
}

bool has_text(const Drawing& d, const std::string& text) {
  for (const TextShape& t : shapes_of<TextShape>(d))
    if (t.text == text) return true;
  return false;
}

// The plot area: the rectangle filled with kPlotBackground.
RectShape plot_area(const Drawing& d) {
  for (const RectShape& r : shapes_of<RectShape>(d))
    if (r.fill == kPlotBackground) return r;
  ADD_FAILURE() << "no plot area";
  return {};
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) n++;
  return n;
}

Chart line(std::vector<double> x, std::vector<double> y) {
  Chart c;
  c.title = "loss";
  c.x_label = "step";
  c.y_label = "loss";
  c.series.push_back({"train", std::move(x), std::move(y)});
  return c;
}

TEST(Chart, NiceAxes) {
  Axis a = nice_axis(0, 30);
  EXPECT_EQ(a.lo, 0);
  EXPECT_EQ(a.hi, 30);
  EXPECT_EQ(a.ticks, (std::vector<double>{0, 10, 20, 30}));
  a = nice_axis(5.9854, 6.2232);  // a loss curve: steps of 0.05, ends on ticks outside the data
  EXPECT_DOUBLE_EQ(a.step, 0.05);
  EXPECT_NEAR(a.lo, 5.95, 1e-12);
  EXPECT_NEAR(a.hi, 6.25, 1e-12);
  EXPECT_EQ(a.ticks.size(), 7u);
  a = nice_axis(-3, 7);
  EXPECT_EQ(a.ticks, (std::vector<double>{-4, -2, 0, 2, 4, 6, 8}));
  a = nice_axis(3, 3);  // one value: a range around it
  EXPECT_LT(a.lo, 3);
  EXPECT_GT(a.hi, 3);
  a = nice_axis(0, 0);
  EXPECT_EQ(a.lo, -1);
  EXPECT_EQ(a.hi, 1);
  for (double t : nice_axis(-1e-4, 3e-4).ticks) EXPECT_FALSE(std::signbit(t) && t == 0) << "a -0 tick";
}

TEST(Chart, TickLabels) {
  EXPECT_EQ(format_tick(0, 0.5), "0");
  EXPECT_EQ(format_tick(2.5, 0.5), "2.5");
  EXPECT_EQ(format_tick(6.05, 0.05), "6.05");
  EXPECT_EQ(format_tick(30, 10), "30");
  EXPECT_EQ(format_tick(1500, 500), "1500");
  EXPECT_EQ(format_tick(12000, 2000), "12k");
  EXPECT_EQ(format_tick(1.5e6, 5e5), "1.5M");
  EXPECT_EQ(format_tick(3e9, 1e9), "3G");
  EXPECT_EQ(format_tick(0.001, 0.001), "0.001");
  EXPECT_EQ(format_tick(3e-4, 1e-4), "0.0003");
  EXPECT_EQ(format_tick(1e-3, 2e-4), "0.0010");  // a learning rate axis: the digits of its step
  EXPECT_EQ(format_tick(3e-5, 1e-5), "3e-5");
  EXPECT_EQ(format_tick(2.5e-5, 5e-6), "2.5e-5");
  EXPECT_EQ(format_tick(-0.2, 0.1), "-0.2");
}

TEST(Chart, ALineChartMapsTheDataIntoThePlotArea) {
  const Drawing d = layout_chart(line({1, 2, 3, 4}, {4, 3, 2, 1}));
  const RectShape plot = plot_area(d);
  const auto paths = data_paths(d);
  ASSERT_EQ(paths.size(), 1u);
  ASSERT_EQ(paths[0].points.size(), 4u);
  EXPECT_EQ(paths[0].stroke, series_color(0));
  // x 1..4 on an axis 1..4: the first point on the left edge, the last on the right; y falls
  EXPECT_NEAR(paths[0].points.front().x, plot.x, 1e-9);
  EXPECT_NEAR(paths[0].points.back().x, plot.x + plot.w, 1e-9);
  for (size_t i = 1; i < 4; i++) EXPECT_GT(paths[0].points[i].y, paths[0].points[i - 1].y);
  for (const Point& p : paths[0].points) {
    EXPECT_GE(p.y, plot.y);
    EXPECT_LE(p.y, plot.y + plot.h);
  }
  EXPECT_TRUE(has_text(d, "loss"));
  EXPECT_TRUE(has_text(d, "step"));
  EXPECT_TRUE(has_text(d, "1"));  // a tick label of each axis
  EXPECT_TRUE(has_text(d, "4"));
  EXPECT_TRUE(shapes_of<DotShape>(d).empty());
  // one series: no legend
  EXPECT_FALSE(has_text(d, "train"));
}

TEST(Chart, TwoSeriesGetALegendAndTheirColours) {
  Chart c = line({1, 2, 3}, {3, 2, 1});
  c.series.push_back({"validation", {1, 3}, {3.5, 2.5}});
  const Drawing d = layout_chart(c);
  const auto paths = data_paths(d);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[1].stroke, series_color(1));
  EXPECT_NE(series_color(0), series_color(1));
  EXPECT_TRUE(has_text(d, "train"));
  EXPECT_TRUE(has_text(d, "validation"));
}

TEST(Chart, NonFiniteValuesAreSkippedAndBreakTheLine) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  // 1 2 | NaN | 4 5 | inf | 7 (alone) ; the range comes from the finite values only
  const Drawing d = layout_chart(line({1, 2, 3, 4, 5, 6, 7}, {1, 2, nan, 4, 5, inf, 7}));
  const auto paths = data_paths(d);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[0].points.size(), 2u);
  EXPECT_EQ(paths[1].points.size(), 2u);
  EXPECT_EQ(shapes_of<DotShape>(d).size(), 1u);  // the lone 7
  EXPECT_TRUE(has_text(d, "8"));                 // y axis up to 8, not to infinity
  for (const PathShape& p : shapes_of<PathShape>(d))
    for (const Point& pt : p.points) EXPECT_TRUE(std::isfinite(pt.x) && std::isfinite(pt.y));
  // a NaN x is skipped too
  EXPECT_EQ(data_paths(layout_chart(line({1, nan, 3, 4}, {1, 2, 3, 4})))[0].points.size(), 2u);
}

TEST(Chart, NoFiniteValueDrawsANoteAndNoData) {
  const double nan = std::nan("");
  const Drawing d = layout_chart(line({1, 2, 3}, {nan, nan, nan}));
  EXPECT_TRUE(data_paths(d).empty());
  EXPECT_TRUE(shapes_of<DotShape>(d).empty());
  EXPECT_TRUE(has_text(d, "no finite values"));
  EXPECT_TRUE(has_text(layout_chart(line({}, {})), "no data"));
}

TEST(Chart, OnePointIsADotInsideARangeAroundIt) {
  const Drawing d = layout_chart(line({5}, {6.2}));
  EXPECT_TRUE(data_paths(d).empty());
  const auto dots = shapes_of<DotShape>(d);
  ASSERT_EQ(dots.size(), 1u);
  const RectShape plot = plot_area(d);
  EXPECT_GT(dots[0].at.x, plot.x);
  EXPECT_LT(dots[0].at.x, plot.x + plot.w);
  EXPECT_GT(dots[0].at.y, plot.y);
  EXPECT_LT(dots[0].at.y, plot.y + plot.h);
}

TEST(Chart, DecimationKeepsFirstMinMaxLastOfEachColumn) {
  // columns of width 1: [0,1) holds 5 points, [1,2) holds 2
  const std::vector<Point> in = {{0.1, 5}, {0.2, 9}, {0.3, 1}, {0.4, 4}, {0.5, 6}, {1.2, 3}, {1.7, 8}};
  const std::vector<Point> out = decimate(in, 1.0);
  ASSERT_EQ(out.size(), 6u);
  const double want_y[] = {5, 9, 1, 6, 3, 8};  // first, max (before min in order), min, last; then both
  for (size_t i = 0; i < out.size(); i++) EXPECT_EQ(out[i].y, want_y[i]) << i;
  EXPECT_EQ(decimate(in, 0).size(), in.size());  // no bucket width: unchanged
}

TEST(Chart, ThousandsOfPointsAreDecimatedAndSpikesSurvive) {
  std::vector<double> x, y;
  for (int i = 0; i < 100000; i++) {
    x.push_back(i);
    y.push_back(3 + 0.1 * std::sin(i * 0.01));
  }
  y[54321] = 10;  // one spike
  const Drawing d = layout_chart(line(x, y));
  const RectShape plot = plot_area(d);
  const auto paths = data_paths(d);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_LE(paths[0].points.size(), static_cast<size_t>(4 * (plot.w + 1)));
  EXPECT_GT(paths[0].points.size(), static_cast<size_t>(plot.w));  // still every column
  double top = 1e9;
  for (const Point& p : paths[0].points) top = std::min(top, p.y);
  EXPECT_NEAR(top, plot.y, 1e-6) << "the spike (the maximum, at the top of the axis) is gone";
  // a few hundred points are drawn as they are
  EXPECT_EQ(data_paths(layout_chart(line({x.begin(), x.begin() + 300}, {y.begin(), y.begin() + 300})))[0].points.size(),
            300u);
}

TEST(Chart, BarsGrowFromZeroPerCategoryAndSeries) {
  Chart c;
  c.kind = ChartKind::kBar;
  c.title = "hidden";
  c.categories = {"rank 0", "rank 1", "rank 2"};
  c.series.push_back({"predicted", {}, {50, 100, std::nan("")}});
  c.series.push_back({"measured", {}, {25, 75, 10}});
  c.y_min = 0;
  c.y_max = 100;
  const Drawing d = layout_chart(c);
  const RectShape plot = plot_area(d);
  std::vector<RectShape> bars;
  for (const RectShape& r : shapes_of<RectShape>(d))
    if (r.data) bars.push_back(r);
  ASSERT_EQ(bars.size(), 5u);  // the NaN is not drawn
  const double bottom = plot.y + plot.h;
  EXPECT_NEAR(bars[0].y + bars[0].h, bottom, 1e-9);
  EXPECT_NEAR(bars[0].h, plot.h / 2, 1e-9);  // 50 of 100
  EXPECT_NEAR(bars[1].h, plot.h, 1e-9);      // 100 of 100
  EXPECT_NEAR(bars[2].h, plot.h / 4, 1e-9);  // the second series' first bar: 25
  EXPECT_EQ(bars[2].fill, series_color(1));
  EXPECT_GT(bars[2].x, bars[0].x);  // side by side within the group
  EXPECT_LT(bars[2].x, bars[1].x);
  for (const char* label : {"rank 0", "rank 1", "rank 2", "0", "100", "predicted", "measured"})
    EXPECT_TRUE(has_text(d, label)) << label;
  for (const TextShape& t : shapes_of<TextShape>(d)) EXPECT_NE(t.text, "120") << "a tick above the fixed end";
}

TEST(Chart, SvgIsInlineWithADataPathAndNoUrl) {
  Chart c = line({1, 2, 3}, {3, 2, std::nan("")});
  c.title = "a <b> & \"c\"";
  const Drawing d = layout_chart(c);
  const std::string svg = to_svg(d, "chart-x");
  EXPECT_EQ(svg.rfind("<svg id=\"chart-x\" class=\"chart\" viewBox=\"0 0 640 360\"", 0), 0u) << svg.substr(0, 100);
  EXPECT_EQ(svg.substr(svg.size() - 6), "</svg>");
  EXPECT_EQ(count(svg, "<path class=\"data\" d=\"M"), 1u);
  EXPECT_EQ(count(svg, "<text "), shapes_of<TextShape>(d).size());
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("http"), std::string::npos);
  EXPECT_EQ(svg.find("url("), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_NE(svg.find("transform=\"rotate(-90"), std::string::npos);  // the y label
  // bars are data paths too
  Chart b;
  b.kind = ChartKind::kBar;
  b.categories = {"a"};
  b.series.push_back({"s", {}, {2}});
  EXPECT_EQ(count(to_svg(layout_chart(b), "b"), "<path class=\"data\" d=\"M"), 1u);
  b.series[0].y = {37.25};
  EXPECT_TRUE(has_text(layout_chart(b), "37.2")) << "a lone series' bars carry their value";
  b.series[0].y = {0.4};
  EXPECT_TRUE(has_text(layout_chart(b), "0.4"));
}

}  // namespace
}  // namespace axonn::report
