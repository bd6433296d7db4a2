#include "axonn/text/pretokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "axonn/core/error.hpp"
#include "axonn/text/utf8.hpp"

namespace axonn::text {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return "PCRE2 error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

// A JIT stack big enough for any realistic piece; used only when the default one (32 KiB of the
// machine stack) runs out, e.g. on a very long run of whitespace.
constexpr size_t kBigJitStack = 64u << 20;

}  // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;  // JIT-compiled: matched by pcre2_jit_match, which skips pcre2_match's per-call checks
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(std::string_view pattern) : pattern_(pattern), re_(std::make_unique<Compiled>()) {
  int err = 0;
  PCRE2_SIZE at = 0;
  // UTF: code points, not bytes; UCP: \s, \d, \w and [[:classes:]] by Unicode properties;
  // MATCH_INVALID_UTF: invalid bytes never match, instead of failing the whole match.
  re_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
  AXONN_CHECK_ARG(re_->code, "pre-tokenizer regex does not compile: ", pcre2_message(err), " at offset ", at,
                  " of /", pattern_, "/");
  // JIT is an optimisation: without it (a platform PCRE2 has no JIT for) the interpreter runs.
  re_->jit = pcre2_jit_compile(re_->code, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re_->code, nullptr);
  AXONN_CHECK(md, "out of memory for PCRE2 match data");
  pcre2_match_context* mc = nullptr;
  pcre2_jit_stack* stack = nullptr;
  auto release = [&] {
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    pcre2_jit_stack_free(stack);
  };
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, gap = 0;  // next search start; start of text not yet given to a piece
  while (pos < text.size()) {
    const int rc = re_->jit ? pcre2_jit_match(re_->code, subject, text.size(), pos, 0, md, mc)
                            : pcre2_match(re_->code, subject, text.size(), pos, 0, md, mc);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !stack) {
      stack = pcre2_jit_stack_create(32 * 1024, kBigJitStack, nullptr);
      mc = pcre2_match_context_create(nullptr);
      pcre2_jit_stack_assign(mc, nullptr, stack);
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      release();
      throw Error("pre-tokenizer regex failed at byte " + std::to_string(pos) + ": " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t begin = ov[0], end = ov[1];
    if (end == begin) {  // an empty match: step over one character, which joins the text between matches
      if (begin >= text.size()) break;
      pos = begin + utf8_step(text, begin).length;
      continue;
    }
    if (begin > gap) out.push_back(text.substr(gap, begin - gap));
    out.push_back(text.substr(begin, end - begin));
    pos = gap = end;
  }
  if (gap < text.size()) out.push_back(text.substr(gap));
  release();
}

}  // namespace axonn::text
