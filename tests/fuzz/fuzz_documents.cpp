// The documents `axonn prepare` reads (text/documents.hpp): a JSON Lines file, and a text file split
// at "%" lines, each under both UTF-8 policies.
#include "axonn/text/documents.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  std::string jsonl = fuzz::write_file("docs.jsonl", fuzz::as_text(data, size));
  std::string txt = fuzz::write_file("docs.txt", fuzz::as_text(data, size));
  for (auto policy : {text::InvalidUtf8::kError, text::InvalidUtf8::kReplace}) {
    for (const std::string& path : {jsonl, txt}) {
      fuzz::refused([&] {
        text::DocumentReader docs({path}, {.separator = "%", .exclude = {}, .invalid_utf8 = policy});
        for (text::Document d; docs.next(d);) {
          if (d.text.empty()) __builtin_trap();  // empty documents are skipped
        }
      });
    }
  }
  return 0;
}
