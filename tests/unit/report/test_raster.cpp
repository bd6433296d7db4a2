// report/raster.hpp: the chart rasterised and written as a PNG, read back with libpng; the pixels of
// the curve, the plot area, the axes' text; the bitmap font; errors.
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/report/raster.hpp"

namespace axonn::report {
namespace {

namespace fs = std::filesystem;

// libpng's simplified reader: the file as 8-bit RGB.
Image read_png(const std::string& path) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  EXPECT_TRUE(png_image_begin_read_from_file(&png, path.c_str())) << png.message;
  png.format = PNG_FORMAT_RGB;
  Image img;
  img.width = static_cast<int>(png.width);
  img.height = static_cast<int>(png.height);
  img.rgb.resize(PNG_IMAGE_SIZE(png));
  EXPECT_TRUE(png_image_finish_read(&png, nullptr, img.rgb.data(), 0, nullptr)) << png.message;
  return img;
}

bool near(Color a, Color b, int tol) {
  return std::abs(a.r - b.r) <= tol && std::abs(a.g - b.g) <= tol && std::abs(a.b - b.b) <= tol;
}

struct TempFile {
  std::string path = (fs::temp_directory_path() / ("axonn-raster-" + std::to_string(::getpid()) + ".png")).string();
  ~TempFile() { fs::remove(path); }
};

// A falling line from (0, 10) to (100, 0): on axes 0..100 and 0..10 its pixels are known.
Chart falling_line() {
  Chart c;
  c.title = "loss";
  c.x_label = "step";
  c.y_label = "loss";
  Series s{"train", {}, {}};
  for (int i = 0; i <= 100; i++) {
    s.x.push_back(i);
    s.y.push_back(10.0 - 0.1 * i);
  }
  c.series.push_back(s);
  return c;
}

TEST(Raster, ThePngHoldsTheCurveWhereTheChartPutsIt) {
  const Drawing d = layout_chart(falling_line());
  RectShape plot;
  for (const Shape& s : d.shapes)
    if (const auto* r = std::get_if<RectShape>(&s); r && r->fill == kPlotBackground) plot = *r;
  ASSERT_GT(plot.w, 0);
  TempFile f;
  write_png(f.path, rasterize(d, 2));
  const Image img = read_png(f.path);
  ASSERT_EQ(img.width, 1280);
  ASSERT_EQ(img.height, 720);
  const Color line = series_color(0);
  // along the diagonal of the plot area (x 0..100 maps to its width, y 10..0 to its height), the
  // curve's colour at the line's centre; a little off it, the plot background
  int on = 0;
  for (int i = 5; i <= 95; i += 5) {
    const double fx = plot.x + plot.w * i / 100.0, fy = plot.y + plot.h * i / 100.0;
    const int x = static_cast<int>(fx * 2), y = static_cast<int>(fy * 2);
    if (near(img.at(x, y), line, 40)) on++;
    EXPECT_TRUE(near(img.at(x, y - 14), kPlotBackground, 30) || near(img.at(x, y - 14), {221, 226, 234}, 30))
        << "above the line at step " << i;
  }
  EXPECT_GE(on, 18) << "the curve is not where the chart puts it";
  // the corners of the image are the white background; the lower-left corner of the plot area is
  // the axis; the title is drawn (dark pixels in its box)
  EXPECT_EQ(img.at(0, 0), (Color{255, 255, 255}));
  EXPECT_EQ(img.at(1279, 719), (Color{255, 255, 255}));
  int dark = 0;
  for (int y = 20; y < 44; y++)
    for (int x = static_cast<int>(plot.x * 2); x < static_cast<int>(plot.x * 2) + 80; x++)
      if (img.at(x, y).r < 120) dark++;
  EXPECT_GT(dark, 40) << "no title";
  const int ax = static_cast<int>(plot.x * 2), ay = static_cast<int>((plot.y + plot.h) * 2);
  EXPECT_LT(img.at(ax, ay - 40).r, 160) << "no y axis";
  EXPECT_LT(img.at(ax + 40, ay).r, 160) << "no x axis";
}

TEST(Raster, NonFiniteValuesLeaveAGap) {
  Chart c = falling_line();
  for (int i = 40; i <= 60; i++) c.series[0].y[static_cast<size_t>(i)] = std::nan("");
  const Drawing d = layout_chart(c);
  RectShape plot;
  for (const Shape& s : d.shapes)
    if (const auto* r = std::get_if<RectShape>(&s); r && r->fill == kPlotBackground) plot = *r;
  const Image img = rasterize(d, 2);
  auto curve_in_column = [&](int step) {
    const int x = static_cast<int>((plot.x + plot.w * step / 100.0) * 2);
    for (int y = static_cast<int>(plot.y * 2); y < static_cast<int>((plot.y + plot.h) * 2); y++)
      if (near(img.at(x, y), series_color(0), 40)) return true;
    return false;
  };
  EXPECT_TRUE(curve_in_column(30));
  EXPECT_FALSE(curve_in_column(50));
  EXPECT_TRUE(curve_in_column(70));
}

TEST(Raster, TheFontHasTheAxisCharacters) {
  for (char c : std::string("0123456789abcdefghijklmnopqrstuvwxyzGM .,-+=%/:()_")) {
    const uint8_t* g = font_glyph(c);
    ASSERT_NE(g, nullptr) << c;
    int bits = 0;
    for (int r = 0; r < 8; r++) {
      EXPECT_EQ(g[r] & ~0x1f, 0) << c;
      bits += __builtin_popcount(g[r]);
    }
    EXPECT_TRUE(c == ' ' || bits > 0) << c;
  }
  EXPECT_EQ(font_glyph('Q'), nullptr);  // drawn as 'q'
  // "1" and "7" differ (no two digits alike)
  for (char a = '0'; a <= '9'; a++)
    for (char b = a + 1; b <= '9'; b++) EXPECT_NE(std::memcmp(font_glyph(a), font_glyph(b), 8), 0) << a << b;
}

TEST(Raster, TextIsDrawnAtItsAnchorAndVertically) {
  Drawing d;
  d.width = 100;
  d.height = 100;
  d.shapes.push_back(TextShape{{50, 50}, "1", 10, {0, 0, 0}, Anchor::kMiddle, false, false});
  Image img = rasterize(d, 1);
  // glyph '1' at scale k=1: 5x7 cell centred on x=50 (width 5), rows 43..49; its stem is column 2
  EXPECT_EQ(img.at(50, 46), (Color{0, 0, 0}));
  EXPECT_EQ(img.at(50, 51), (Color{255, 255, 255}));  // below the baseline: nothing
  EXPECT_EQ(img.at(56, 46), (Color{255, 255, 255}));
  d.shapes[0] = TextShape{{50, 50}, "1111111111", 10, {0, 0, 0}, Anchor::kStart, true, false};
  img = rasterize(d, 1);
  // reads upwards from the anchor, the glyphs' tops to its left (x 43..49), nothing right of or below it
  int left_above = 0, elsewhere = 0;
  for (int y = 0; y < 100; y++)
    for (int x = 0; x < 100; x++)
      if (img.at(x, y).r == 0) (x >= 43 && x < 50 && y < 50 ? left_above : elsewhere)++;
  EXPECT_GT(left_above, 60);  // 10 pixels a "1", 8 of them below y = 50
  EXPECT_EQ(elsewhere, 0);
}

TEST(Raster, AnUnwritablePathIsAnIoError) {
  const Image img = rasterize(layout_chart(falling_line()), 1);
  try {
    write_png("/nonexistent-dir/loss.png", img);
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/loss.png"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace axonn::report
