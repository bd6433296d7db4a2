#include "axonn/text/utf8.hpp"

#include <algorithm>

namespace axonn::text {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// The allowed range of the second byte for each lead byte (Unicode Table 3-7); later continuation
// bytes are always 80..BF.
struct Lead {
  int length;  // 0: not a lead byte
  unsigned char lo, hi;
};

Lead lead_of(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b == 0xF0) return {4, 0x90, 0xBF};  // no overlong forms
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  return {0, 0, 0};
}

}  // namespace

Utf8Step utf8_step(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const Lead lead = lead_of(b);
  if (lead.length == 1) return {1, true, false};
  if (lead.length == 0) return {1, false, false};
  size_t n = 1;
  for (int k = 1; k < lead.length; k++, n++) {
    if (i + n >= s.size()) return {n, false, true};
    const auto c = static_cast<unsigned char>(s[i + n]);
    const unsigned char lo = k == 1 ? lead.lo : 0x80, hi = k == 1 ? lead.hi : 0xBF;
    if (c < lo || c > hi) return {n, false, false};
  }
  return {n, true, false};
}

std::optional<size_t> find_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // ASCII runs dominate real text: skip them eight bytes at a time
    while (i + 8 <= s.size()) {
      uint64_t w = 0;
      for (int k = 0; k < 8; k++) w |= static_cast<uint64_t>(static_cast<unsigned char>(s[i + k])) << (8 * k);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const Utf8Step st = utf8_step(s, i);
    if (!st.valid) return i;
    i += st.length;
  }
  return std::nullopt;
}

std::string where_invalid_utf8(std::string_view s, size_t bad, uint64_t offset, uint64_t line) {
  const char* digits = "0123456789ABCDEF";
  const auto b = static_cast<unsigned char>(s[bad]);
  line += static_cast<uint64_t>(std::count(s.begin(), s.begin() + static_cast<long>(bad), '\n'));
  return std::string("byte 0x") + digits[b >> 4] + digits[b & 15] + " at offset " + std::to_string(offset + bad) +
         " (line " + std::to_string(line) + ")";
}

std::string replace_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Step st = utf8_step(s, i);
    if (st.valid) {
      out.append(s.substr(i, st.length));
    } else {
      out.append(kReplacement);
    }
    i += st.length;
  }
  return out;
}

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const Utf8Step st = utf8_step(pending_, i);
    if (st.truncated) break;  // may still complete: keep it
    if (st.valid) {
      out.append(pending_, i, st.length);
    } else {
      out.append(kReplacement);
    }
    i += st.length;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out = pending_.empty() ? std::string() : replace_invalid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace axonn::text
