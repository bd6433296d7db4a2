// text/utf8.hpp — UTF-8 validation, replacement and streaming.
//
// Valid UTF-8 is the Unicode standard's (Table 3-7): no overlong forms, no surrogates, nothing above
// U+10FFFF. Where text is not valid, each "maximal subpart of an ill-formed subsequence" becomes one
// U+FFFD, the Unicode best practice that Python's errors="replace" and the WHATWG TextDecoder (so
// node's) follow, so replaced text tokenises as theirs does.
//
//   if (auto at = text::find_invalid_utf8(s)) ...            // byte offset of the first bad byte
//   std::string clean = text::replace_invalid_utf8(s);
//   text::Utf8Stream out; std::cout << out.push(bytes);       // only whole characters, as they complete
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace axonn::text {

// One step of decoding at s[i] (i < s.size()): `length` bytes were consumed; `valid` says whether
// they are one whole character. An invalid step consumes the maximal subpart (at least one byte);
// `truncated` says the subpart is a valid beginning that the end of `s` cut short.
struct Utf8Step {
  size_t length = 1;
  bool valid = false;
  bool truncated = false;
};
Utf8Step utf8_step(std::string_view s, size_t i);

// Byte offset of the first byte that is not part of valid UTF-8, or nullopt if `s` is valid.
std::optional<size_t> find_invalid_utf8(std::string_view s);

// Where s[bad], the first bad byte, is, for messages: "byte 0xE9 at offset 15 (line 3)", counted
// from `offset` and `line`, those of s[0] in its file.
std::string where_invalid_utf8(std::string_view s, size_t bad, uint64_t offset = 0, uint64_t line = 1);

// `s` with each maximal ill-formed subpart replaced by U+FFFD (EF BF BD).
std::string replace_invalid_utf8(std::string_view s);

// Bytes in, whole characters out: push() returns the valid characters completed so far (invalid
// bytes as U+FFFD), keeping a character that is still incomplete for the next push; finish()
// returns what is left (an unfinished character becomes U+FFFD).
class Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace axonn::text
