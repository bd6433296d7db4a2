// report/raster.hpp — a Drawing (chart.hpp) rasterised into an RGB image, and the image as a PNG.
//
// Our own small drawing: filled rectangles, anti-aliased thick polylines and dots (coverage from the
// distance to the segment), and text in a built-in 5×7 bitmap font (digits, lower-case letters, a few
// capitals — G M — and the punctuation of axis labels; other capitals are drawn in lower case, other
// characters as a box). `scale` multiplies every coordinate: a 640×360 chart at scale 2 is a
// 1280×720 image. The PNG is written with libpng.
//
//   report::Image img = report::rasterize(report::layout_chart(chart), 2);
//   report::write_png("run/loss.png", img);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/report/chart.hpp"

namespace axonn::report {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes a pixel
  Color at(int x, int y) const;
};

Image rasterize(const Drawing& drawing, int scale = 2);

// The image as the bytes of an 8-bit RGB PNG.
std::string encode_png(const Image& image);
// Writes them atomically (temporary + rename); IoError naming the file.
void write_png(const std::string& path, const Image& image);

// The font's glyph for a character: 8 rows (7 above the baseline, 1 below) of 5 bits, bit 4 the
// leftmost; nullptr if the font has none (then lower case is tried, then a box is drawn).
const uint8_t* font_glyph(char c);

}  // namespace axonn::report
