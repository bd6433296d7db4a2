#include "axonn/report/chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <string_view>

#include "axonn/core/error.hpp"

namespace axonn::report {
namespace {

constexpr Color kText{51, 51, 51};
constexpr Color kAxis{102, 102, 102};
constexpr Color kGrid{221, 226, 234};
constexpr Color kNote{136, 136, 136};
constexpr double kTitleSize = 14, kLabelSize = 11, kTickSize = 10;
constexpr double kLegendRow = 16;

// Width of a text in a sans-serif font (and the bitmap font of raster.cpp): about 0.6 em a character.
double text_width(const std::string& s, double size) { return 0.6 * size * static_cast<double>(s.size()); }

// Finite range of some values; nullopt if none is finite.
struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

// A value with three significant digits and no trailing zeros: "37.2", "0.4", "100", "12.3k".
std::string value_label(double v) {
  if (v == 0) return "0";
  std::string s = format_tick(v, std::pow(10.0, std::floor(std::log10(std::fabs(v))) - 2));
  if (s.find('.') != std::string::npos && s.find_first_of("ekMG") == std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

// The plot area inside the chart and the mapping of values to it.
struct Frame {
  double left, top, right, bottom;
  Axis x, y;
  double px(double v) const { return left + (v - x.lo) / (x.hi - x.lo) * (right - left); }
  double py(double v) const { return bottom - (v - y.lo) / (y.hi - y.lo) * (bottom - top); }
};

// Legend entries flow left to right under the title, wrapping at the right edge; returns the rows used.
int layout_legend(const Chart& c, double left, double right, double top, std::vector<Shape>* out) {
  if (c.series.size() < 2) return 0;
  double x = left, y = top;
  int rows = 1;
  for (size_t i = 0; i < c.series.size(); i++) {
    const double w = 22 + text_width(c.series[i].name, kLabelSize) + 14;
    if (x > left && x + w > right) {
      x = left;
      y += kLegendRow;
      rows++;
    }
    if (out) {
      out->push_back(RectShape{x, y - 5, 16, 3, series_color(i), false});
      out->push_back(TextShape{{x + 22, y}, c.series[i].name, kLabelSize, kText, Anchor::kStart, false, false});
    }
    x += w;
  }
  return rows;
}

}  // namespace

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string to_hex(Color c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

Color series_color(size_t i) {
  static const Color palette[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},  {148, 103, 189},
                                  {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
  return palette[i % 10];
}

Axis nice_axis(double lo, double hi, int target) {
  AXONN_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi && target >= 1, "bad axis range ", lo, "..", hi);
  if (lo == hi) {  // one value: a range around it
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  Axis a;
  a.step = step;
  a.lo = std::floor(lo / step + 1e-9) * step;
  a.hi = std::ceil(hi / step - 1e-9) * step;
  if (a.hi <= a.lo) a.hi = a.lo + step;
  const long n = std::lround((a.hi - a.lo) / step);
  for (long i = 0; i <= n; i++) {
    double t = a.lo + static_cast<double>(i) * step;
    if (std::fabs(t) < step * 1e-9) t = 0;  // no "-0" or 1e-17
    a.ticks.push_back(t);
  }
  return a;
}

std::string format_tick(double value, double step) {
  if (value == 0) return "0";
  char buf[48];
  const double a = std::fabs(value);
  step = std::fabs(step);
  if (a >= 1e4) {  // 12k, 1.5M, 2G
    const double div = a >= 1e9 ? 1e9 : a >= 1e6 ? 1e6 : 1e3;
    const char* suffix = div == 1e9 ? "G" : div == 1e6 ? "M" : "k";
    const int digits = std::max(0, static_cast<int>(-std::floor(std::log10(step / div) + 1e-9)));
    std::snprintf(buf, sizeof buf, "%.*f%s", digits, value / div, suffix);
    return buf;
  }
  if (step < 1e-4) {  // 3e-5, 2.5e-5: the mantissa's digits from the step (down to 1e-4: decimals)
    const int exp = static_cast<int>(std::floor(std::log10(a) + 1e-9));
    const int digits = std::max(0, exp - static_cast<int>(std::floor(std::log10(step) + 1e-9)));
    std::snprintf(buf, sizeof buf, "%.*fe%d", digits, value / std::pow(10.0, exp), exp);
    return buf;
  }
  const int digits = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::vector<Point> decimate(const std::vector<Point>& points, double bucket_width) {
  if (points.size() < 4 || !(bucket_width > 0)) return points;
  std::vector<Point> out;
  size_t i = 0;
  while (i < points.size()) {
    // the run of consecutive points in the same column
    const double col = std::floor(points[i].x / bucket_width);
    size_t j = i, lo = i, hi = i;
    while (j < points.size() && std::floor(points[j].x / bucket_width) == col) {
      if (points[j].y < points[lo].y) lo = j;
      if (points[j].y > points[hi].y) hi = j;
      j++;
    }
    // first, min and max in their order, last
    size_t keep[4] = {i, std::min(lo, hi), std::max(lo, hi), j - 1};
    for (int k = 0; k < 4; k++)
      if (k == 0 || keep[k] != keep[k - 1]) out.push_back(points[keep[k]]);
    i = j;
  }
  return out;
}

Drawing layout_chart(const Chart& c) {
  Drawing d;
  d.width = c.width;
  d.height = c.height;
  const bool bars = c.kind == ChartKind::kBar;
  const double left = 62, right = c.width - 16;
  const int legend_rows = layout_legend(c, left, right, 0, nullptr);
  const double top = 30 + legend_rows * kLegendRow + 6, bottom = c.height - 42;

  // ranges over the finite values
  Range xr, yr;
  size_t finite = 0, total = 0;
  for (const Series& s : c.series) {
    for (size_t i = 0; i < s.y.size(); i++) {
      const double x = bars ? 0.0 : (i < s.x.size() ? s.x[i] : std::nan(""));
      total++;
      if (!std::isfinite(x) || !std::isfinite(s.y[i])) continue;
      finite++;
      if (!bars) xr.add(x);
      yr.add(s.y[i]);
    }
  }
  if (bars) yr.add(0.0);  // bars grow from zero
  if (c.y_min) yr.add(*c.y_min);
  if (c.y_max) yr.add(*c.y_max);
  Frame f{left, top, right, bottom, {}, {}};
  f.x = bars ? Axis{0, std::max<double>(1, static_cast<double>(c.categories.size())), {}, 1}
             : xr.empty() ? nice_axis(0, 1) : nice_axis(xr.lo, xr.hi);
  f.y = yr.empty() ? nice_axis(0, 1) : nice_axis(yr.lo, yr.hi);
  if (c.y_min) f.y.lo = *c.y_min;
  if (c.y_max) f.y.hi = *c.y_max;
  if (c.y_min || c.y_max)
    std::erase_if(f.y.ticks, [&](double t) { return t < f.y.lo - 1e-9 * f.y.step || t > f.y.hi + 1e-9 * f.y.step; });

  auto& s = d.shapes;
  s.push_back(RectShape{0, 0, c.width, c.height, {255, 255, 255}, false});
  s.push_back(RectShape{f.left, f.top, f.right - f.left, f.bottom - f.top, kPlotBackground, false});
  // grid and tick labels
  for (double t : f.y.ticks) {
    const double y = f.py(t);
    s.push_back(PathShape{{{f.left, y}, {f.right, y}}, kGrid, 1, false});
    s.push_back(TextShape{{f.left - 6, y + 3.5}, format_tick(t, f.y.step), kTickSize, kText, Anchor::kEnd, false, false});
  }
  if (bars) {
    for (size_t k = 0; k < c.categories.size(); k++)
      s.push_back(TextShape{{f.px(static_cast<double>(k) + 0.5), f.bottom + 15}, c.categories[k], kTickSize, kText,
                            Anchor::kMiddle, false, false});
  } else {
    for (double t : f.x.ticks) {
      const double x = f.px(t);
      s.push_back(PathShape{{{x, f.top}, {x, f.bottom}}, kGrid, 1, false});
      s.push_back(TextShape{{x, f.bottom + 15}, format_tick(t, f.x.step), kTickSize, kText, Anchor::kMiddle, false,
                            false});
    }
  }

  // the data
  const double plot_w = f.right - f.left;
  for (size_t si = 0; si < c.series.size(); si++) {
    const Series& ser = c.series[si];
    const Color color = series_color(si);
    if (bars) {
      const double group = plot_w / f.x.hi, gap = group * 0.2;
      const double bw = (group - gap) / static_cast<double>(std::max<size_t>(1, c.series.size()));
      for (size_t k = 0; k < ser.y.size() && k < c.categories.size(); k++) {
        if (!std::isfinite(ser.y[k])) continue;
        const double v = std::clamp(ser.y[k], f.y.lo, f.y.hi);
        const double x = f.left + static_cast<double>(k) * group + gap / 2 + static_cast<double>(si) * bw;
        const double y0 = f.py(std::clamp(0.0, f.y.lo, f.y.hi)), y1 = f.py(v);
        // a bar of (nearly) zero is a 3-pixel sliver above the x axis, which is drawn over the bars' foot: the
        // bar is seen to exist (the value above it says 0) rather than vanish under the axis
        constexpr double kLeast = 3.0;
        const double h = std::fabs(y0 - y1);
        s.push_back(RectShape{x, h >= kLeast ? std::min(y0, y1) : y0 - kLeast, bw, std::max(kLeast, h), color, true});
        if (c.series.size() == 1)  // one bar per group: its value above it
          s.push_back(TextShape{{x + bw / 2, std::min(y0, y1) - 4}, value_label(ser.y[k]), kTickSize,
                                kText, Anchor::kMiddle, false, false});
      }
      continue;
    }
    // runs of finite points, each a line (or a dot when alone)
    std::vector<Point> run;
    auto flush = [&] {
      if (run.size() == 1) s.push_back(DotShape{run[0], 3, color});
      if (run.size() > 1) s.push_back(PathShape{decimate(run, static_cast<double>(run.size()) > 2 * plot_w ? 1.0 : 0.0), color, 1.75, true});
      run.clear();
    };
    for (size_t i = 0; i < ser.y.size() && i < ser.x.size(); i++) {
      if (!std::isfinite(ser.x[i]) || !std::isfinite(ser.y[i])) {
        flush();
        continue;
      }
      run.push_back({f.px(ser.x[i]), f.py(ser.y[i])});
    }
    flush();
  }
  if (finite == 0)
    s.push_back(TextShape{{(f.left + f.right) / 2, (f.top + f.bottom) / 2}, total ? "no finite values" : "no data",
                          kLabelSize, kNote, Anchor::kMiddle, false, false});

  // axes, labels, title, legend
  s.push_back(PathShape{{{f.left, f.top}, {f.left, f.bottom}, {f.right, f.bottom}}, kAxis, 1, false});
  if (!c.x_label.empty())
    s.push_back(TextShape{{(f.left + f.right) / 2, c.height - 10}, c.x_label, kLabelSize, kText, Anchor::kMiddle, false,
                          false});
  if (!c.y_label.empty())
    s.push_back(TextShape{{16, (f.top + f.bottom) / 2}, c.y_label, kLabelSize, kText, Anchor::kMiddle, true, false});
  s.push_back(TextShape{{f.left, 20}, c.title, kTitleSize, kText, Anchor::kStart, false, true});
  layout_legend(c, f.left, f.right, 30 + 10, &s);
  return d;
}

std::string to_svg(const Drawing& d, const std::string& id) {
  std::string out;
  // appends the parts (one call per element: no temporaries of `"..." + std::string`)
  auto put = [&out](std::initializer_list<std::string_view> parts) {
    for (std::string_view p : parts) out.append(p);
  };
  const std::string w = number(d.width), h = number(d.height);
  put({"<svg id=\"", escape_xml(id), "\" class=\"chart\" viewBox=\"0 0 ", w, " ", h, "\" width=\"", w, "\" height=\"", h,
       "\" role=\"img\" font-family=\"sans-serif\">\n"});
  for (const Shape& shape : d.shapes) {
    if (const auto* r = std::get_if<RectShape>(&shape)) {
      if (r->data)  // a bar: a closed path, like the lines, so every value is a <path class="data">
        put({"<path class=\"data\" d=\"M", number(r->x), " ", number(r->y), "h", number(r->w), "v", number(r->h), "h",
             number(-r->w), "Z\" fill=\"", to_hex(r->fill), "\"/>\n"});
      else
        put({"<rect x=\"", number(r->x), "\" y=\"", number(r->y), "\" width=\"", number(r->w), "\" height=\"",
             number(r->h), "\" fill=\"", to_hex(r->fill), "\"/>\n"});
    } else if (const auto* p = std::get_if<PathShape>(&shape)) {
      put({p->data ? "<path class=\"data\" d=\"" : "<path d=\""});
      for (size_t i = 0; i < p->points.size(); i++)
        put({i ? "L" : "M", number(p->points[i].x), " ", number(p->points[i].y)});
      char width[16];
      std::snprintf(width, sizeof width, "%g", p->width);
      put({"\" fill=\"none\" stroke=\"", to_hex(p->stroke), "\" stroke-width=\"", width, "\" stroke-linejoin=\"round\"/>\n"});
    } else if (const auto* dot = std::get_if<DotShape>(&shape)) {
      put({"<circle class=\"data\" cx=\"", number(dot->at.x), "\" cy=\"", number(dot->at.y), "\" r=\"",
           number(dot->radius), "\" fill=\"", to_hex(dot->fill), "\"/>\n"});
    } else if (const auto* t = std::get_if<TextShape>(&shape)) {
      const char* anchor = t->anchor == Anchor::kStart ? "start" : t->anchor == Anchor::kMiddle ? "middle" : "end";
      const std::string x = number(t->at.x), y = number(t->at.y);
      put({"<text x=\"", x, "\" y=\"", y, "\" font-size=\"", number(t->size), "\" fill=\"", to_hex(t->color),
           "\" text-anchor=\"", anchor, "\""});
      if (t->bold) put({" font-weight=\"bold\""});
      if (t->vertical) put({" transform=\"rotate(-90 ", x, " ", y, ")\""});
      put({">", escape_xml(t->text), "</text>\n"});
    }
  }
  out += "</svg>";
  return out;
}

}  // namespace axonn::report
