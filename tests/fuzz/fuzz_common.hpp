// tests/fuzz/fuzz_common.hpp — what every harness shares (tests/fuzz/README.md).
//
// A harness is one LLVMFuzzerTestOneInput that hands the bytes to one parser of the library, the way
// the tool does: most readers take a path, so the bytes are written to a file first. The documented
// refusals (InvalidArgument, IoError: the message names the file and the problem) are the expected
// outcome of a corrupt input and are swallowed by refused(); anything else escapes: another exception
// (libFuzzer's "deadly signal" from std::terminate), a crash, a leak or undefined behaviour is a finding.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

#include "axonn/core/error.hpp"

namespace axonn::fuzz {

// Runs f; a documented refusal (InvalidArgument, IoError) is a correct answer to a corrupt input.
template <typename F>
void refused(F&& f) {
  try {
    f();
  } catch (const InvalidArgument&) {
  } catch (const IoError&) {
  }
}

// One scratch directory per process (removed at exit), in $TMPDIR or /tmp.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/axonn-fuzz-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("fuzz: cannot make a scratch directory in " + tmpl);
    static struct Remover {
      std::string path;
      ~Remover() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
      }
    } remover{tmpl};
    return tmpl;
  }();
  return dir;
}

// Writes the bytes to `name` in the scratch directory (replacing it) and returns its path.
inline std::string write_file(const std::string& name, std::string_view bytes) {
  std::string path = scratch_dir() + "/" + name;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("fuzz: cannot write " + path);
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) throw std::runtime_error("fuzz: cannot write " + path);
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return path;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits the input at the first occurrence of `sep` (for parsers that read two files): the part before
// it, and the rest (empty if there is no separator).
inline std::pair<std::string_view, std::string_view> split_at(std::string_view all, std::string_view sep) {
  size_t at = all.find(sep);
  if (at == std::string_view::npos) return {all, {}};
  return {all.substr(0, at), all.substr(at + sep.size())};
}

}  // namespace axonn::fuzz
