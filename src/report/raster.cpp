#include "axonn/report/raster.hpp"

#include <png.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/core/error.hpp"

namespace axonn::report {
namespace {

// The font, one glyph a line: 8 rows of 5 pixels ('#' set), rows 0-6 above the baseline, row 7 below.
constexpr std::pair<char, const char*> kFontArt[] = {
    {'0', ".###. #...# #..## #.#.# ##..# #...# .###. ....."},
    {'1', "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###. ....."},
    {'2', ".###. #...# ....# ...#. ..#.. .#... ##### ....."},
    {'3', "##### ...#. ..#.. ...#. ....# #...# .###. ....."},
    {'4', "...#. ..##. .#.#. #..#. ##### ...#. ...#. ....."},
    {'5', "##### #.... ####. ....# ....# #...# .###. ....."},
    {'6', "..##. .#... #.... ####. #...# #...# .###. ....."},
    {'7', "##### ....# ...#. ..#.. .#... .#... .#... ....."},
    {'8', ".###. #...# #...# .###. #...# #...# .###. ....."},
    {'9', ".###. #...# #...# .#### ....# ...#. .##.. ....."},
    {'a', "..... ..... .###. ....# .#### #...# .#### ....."},
    {'b', "#.... #.... #.##. ##..# #...# #...# ####. ....."},
    {'c', "..... ..... .###. #.... #.... #...# .###. ....."},
    {'d', "....# ....# .##.# #..## #...# #...# .#### ....."},
    {'e', "..... ..... .###. #...# ##### #.... .###. ....."},
    {'f', "..##. .#..# .#... ###.. .#... .#... .#... ....."},
    {'g', "..... ..... .#### #...# #...# .#### ....# .###."},
    {'h', "#.... #.... #.##. ##..# #...# #...# #...# ....."},
    {'i', "..#.. ..... .##.. ..#.. ..#.. ..#.. .###. ....."},
    {'j', "...#. ..... ..##. ...#. ...#. ...#. #..#. .##.."},
    {'k', "#.... #.... #..#. #.#.. ##... #.#.. #..#. ....."},
    {'l', ".##.. ..#.. ..#.. ..#.. ..#.. ..#.. .###. ....."},
    {'m', "..... ..... ##.#. #.#.# #.#.# #...# #...# ....."},
    {'n', "..... ..... #.##. ##..# #...# #...# #...# ....."},
    {'o', "..... ..... .###. #...# #...# #...# .###. ....."},
    {'p', "..... ..... ####. #...# #...# ####. #.... #...."},
    {'q', "..... ..... .#### #...# #...# .#### ....# ....#"},
    {'r', "..... ..... #.##. ##..# #.... #.... #.... ....."},
    {'s', "..... ..... .#### #.... .###. ....# ####. ....."},
    {'t', ".#... .#... ###.. .#... .#... .#..# ..##. ....."},
    {'u', "..... ..... #...# #...# #...# #..## .##.# ....."},
    {'v', "..... ..... #...# #...# #...# .#.#. ..#.. ....."},
    {'w', "..... ..... #...# #...# #.#.# #.#.# .#.#. ....."},
    {'x', "..... ..... #...# .#.#. ..#.. .#.#. #...# ....."},
    {'y', "..... ..... #...# #...# #...# .#### ....# .###."},
    {'z', "..... ..... ##### ...#. ..#.. .#... ##### ....."},
    {'G', ".###. #...# #.... #.### #...# #...# .###. ....."},
    {'M', "#...# ##.## #.#.# #.#.# #...# #...# #...# ....."},
    {' ', "..... ..... ..... ..... ..... ..... ..... ....."},
    {'.', "..... ..... ..... ..... ..... .##.. .##.. ....."},
    {',', "..... ..... ..... ..... ..... .##.. ..#.. .#..."},
    {'-', "..... ..... ..... ##### ..... ..... ..... ....."},
    {'+', "..... ..#.. ..#.. ##### ..#.. ..#.. ..... ....."},
    {'=', "..... ..... ##### ..... ##### ..... ..... ....."},
    {'%', "##... ##..# ...#. ..#.. .#... #..## ...## ....."},
    {'/', "..... ....# ...#. ..#.. .#... #.... ..... ....."},
    {':', "..... .##.. .##.. ..... .##.. .##.. ..... ....."},
    {'(', "...#. ..#.. .#... .#... .#... ..#.. ...#. ....."},
    {')', ".#... ..#.. ...#. ...#. ...#. ..#.. .#... ....."},
    {'_', "..... ..... ..... ..... ..... ..... ..... #####"},
};
constexpr uint8_t kBox[8] = {0x1f, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1f, 0x00};

const std::map<char, std::array<uint8_t, 8>>& font() {
  static const auto glyphs = [] {
    std::map<char, std::array<uint8_t, 8>> m;
    for (const auto& [c, art] : kFontArt) {
      std::array<uint8_t, 8> rows{};
      for (int r = 0; r < 8; r++)
        for (int b = 0; b < 5; b++)
          if (art[r * 6 + b] == '#') rows[r] |= static_cast<uint8_t>(1u << (4 - b));
      m[c] = rows;
    }
    return m;
  }();
  return glyphs;
}

// An image being drawn, with the coverage of the shape in progress (so that a polyline's segments
// do not darken where they meet: each pixel takes the shape's largest coverage, blended once).
class Canvas {
 public:
  explicit Canvas(Image* img) : img_(img), coverage_(static_cast<size_t>(img->width) * img->height, 0.0f) {}

  void cover(int x, int y, float c) {
    if (x < 0 || y < 0 || x >= img_->width || y >= img_->height || c <= 0) return;
    float& v = coverage_[static_cast<size_t>(y) * img_->width + x];
    if (v == 0) touched_.push_back(static_cast<size_t>(y) * img_->width + x);
    v = std::max(v, std::min(c, 1.0f));
  }
  // Blends the shape's coverage in `color` and clears it.
  void paint(Color color) {
    for (size_t i : touched_) {
      const float a = coverage_[i];
      uint8_t* p = &img_->rgb[3 * i];
      const uint8_t c[3] = {color.r, color.g, color.b};
      for (int k = 0; k < 3; k++) p[k] = static_cast<uint8_t>(std::lround(c[k] * a + p[k] * (1 - a)));
      coverage_[i] = 0;
    }
    touched_.clear();
  }

  // The segment a-b, `width` wide, in pixels (pixel centres at +0.5).
  void segment(Point a, Point b, double width) {
    const double hw = width / 2;
    const int x0 = static_cast<int>(std::floor(std::min(a.x, b.x) - hw - 1)),
              x1 = static_cast<int>(std::ceil(std::max(a.x, b.x) + hw + 1));
    const int y0 = static_cast<int>(std::floor(std::min(a.y, b.y) - hw - 1)),
              y1 = static_cast<int>(std::ceil(std::max(a.y, b.y) + hw + 1));
    const double dx = b.x - a.x, dy = b.y - a.y, len2 = dx * dx + dy * dy;
    for (int y = std::max(0, y0); y <= std::min(img_->height - 1, y1); y++)
      for (int x = std::max(0, x0); x <= std::min(img_->width - 1, x1); x++) {
        const double px = x + 0.5, py = y + 0.5;
        const double t = len2 > 0 ? std::clamp(((px - a.x) * dx + (py - a.y) * dy) / len2, 0.0, 1.0) : 0.0;
        const double d = std::hypot(px - (a.x + t * dx), py - (a.y + t * dy));
        cover(x, y, static_cast<float>(hw + 0.5 - d));
      }
  }

  void disc(Point c, double r) {
    for (int y = static_cast<int>(c.y - r - 1); y <= static_cast<int>(c.y + r + 1); y++)
      for (int x = static_cast<int>(c.x - r - 1); x <= static_cast<int>(c.x + r + 1); x++)
        cover(x, y, static_cast<float>(r + 0.5 - std::hypot(x + 0.5 - c.x, y + 0.5 - c.y)));
  }

  void rect(double x, double y, double w, double h) {
    for (int py = static_cast<int>(std::lround(y)); py < static_cast<int>(std::lround(y + h)); py++)
      for (int px = static_cast<int>(std::lround(x)); px < static_cast<int>(std::lround(x + w)); px++) cover(px, py, 1);
  }

 private:
  Image* img_;
  std::vector<float> coverage_;
  std::vector<size_t> touched_;
};

void draw_text(Canvas* cv, const TextShape& t, int scale) {
  // font pixels of k×k image pixels; 6 font pixels a character (0.6 em, as layout_chart assumes)
  const int k = std::max(1, static_cast<int>(std::lround(t.size * scale / 10.0)));
  const double width = 6.0 * k * static_cast<double>(t.text.size()) - k;
  const double shift = t.anchor == Anchor::kStart ? 0 : t.anchor == Anchor::kMiddle ? width / 2 : width;
  // whole pixels, so that glyphs stay crisp
  const double ax = std::round(t.at.x * scale - (t.vertical ? 0 : shift)), ay = std::round(t.at.y * scale + (t.vertical ? shift : 0));
  for (size_t i = 0; i < t.text.size(); i++) {
    const uint8_t* g = font_glyph(t.text[i]);
    if (!g) g = font_glyph(static_cast<char>(std::tolower(static_cast<unsigned char>(t.text[i]))));
    if (!g) g = kBox;
    for (int row = 0; row < 8; row++)
      for (int col = 0; col < 5; col++) {
        if (!(g[row] >> (4 - col) & 1)) continue;
        for (int sy = 0; sy < k; sy++)
          for (int sx = 0; sx < k + (t.bold ? 1 : 0); sx++) {
            // text-local: u along the text, v down from the baseline
            const double u = 6.0 * k * static_cast<double>(i) + col * k + sx;
            const double v = (row - 7) * k + sy;
            const double x = t.vertical ? ax + v : ax + u, y = t.vertical ? ay - u - 1 : ay + v;
            cv->cover(static_cast<int>(std::floor(x)), static_cast<int>(std::floor(y)), 1);
          }
      }
  }
  cv->paint(t.color);
}

}  // namespace

const uint8_t* font_glyph(char c) {
  const auto& f = font();
  const auto it = f.find(c);
  return it == f.end() ? nullptr : it->second.data();
}

Color Image::at(int x, int y) const {
  const uint8_t* p = &rgb[3 * (static_cast<size_t>(y) * width + x)];
  return {p[0], p[1], p[2]};
}

Image rasterize(const Drawing& d, int scale) {
  AXONN_CHECK(scale >= 1, "scale ", scale);
  Image img;
  img.width = static_cast<int>(std::lround(d.width * scale));
  img.height = static_cast<int>(std::lround(d.height * scale));
  img.rgb.assign(static_cast<size_t>(img.width) * img.height * 3, 255);
  Canvas cv(&img);
  const double s = scale;
  for (const Shape& shape : d.shapes) {
    if (const auto* r = std::get_if<RectShape>(&shape)) {
      cv.rect(r->x * s, r->y * s, r->w * s, r->h * s);
      cv.paint(r->fill);
    } else if (const auto* p = std::get_if<PathShape>(&shape)) {
      for (size_t i = 1; i < p->points.size(); i++)
        cv.segment({p->points[i - 1].x * s, p->points[i - 1].y * s}, {p->points[i].x * s, p->points[i].y * s},
                   p->width * s);
      cv.paint(p->stroke);
    } else if (const auto* dot = std::get_if<DotShape>(&shape)) {
      cv.disc({dot->at.x * s, dot->at.y * s}, dot->radius * s);
      cv.paint(dot->fill);
    } else if (const auto* t = std::get_if<TextShape>(&shape)) {
      draw_text(&cv, *t, scale);
    }
  }
  return img;
}

std::string encode_png(const Image& img) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(img.width);
  png.height = static_cast<png_uint_32>(img.height);
  png.format = PNG_FORMAT_RGB;
  png_alloc_size_t bytes = 0;
  // first the size, then the bytes
  AXONN_CHECK(png_image_write_to_memory(&png, nullptr, &bytes, 0, img.rgb.data(), 0, nullptr), "libpng: ",
              png.message);
  std::string out(bytes, '\0');
  AXONN_CHECK(png_image_write_to_memory(&png, out.data(), &bytes, 0, img.rgb.data(), 0, nullptr), "libpng: ",
              png.message);
  out.resize(bytes);
  return out;
}

void write_png(const std::string& path, const Image& img) { checkpoint::write_file_atomic(path, encode_png(img)); }

}  // namespace axonn::report
