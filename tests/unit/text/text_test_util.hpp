// Shared by the text tests: GPT-2's fetched files, the fortunes corpus, node, and writing files.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "axonn/text/bpe.hpp"
#include "axonn/text/tokenizer.hpp"

namespace axonn::test {

// GPT-2's tokenizer loaded from the fetched files, or a skip naming what is missing.
#define AXONN_REQUIRE_GPT2(tok)                                                                              \
  auto tok##_dir = ::axonn::text::find_gpt2_files();                                                      \
  if (!tok##_dir) GTEST_SKIP() << "GPT-2's tokenizer files are not installed (scripts/fetch-gpt2-tokenizer.sh)"; \
  auto tok = ::axonn::text::load_tokenizer("gpt2")

inline void write_text(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The fortunes package's files (Debian's `fortunes`): each fortune, the text between lines "%".
// Symlinks (the .u8 aliases) and the .dat indexes are left out.
inline std::vector<std::string> fortunes() {
  namespace fs = std::filesystem;
  const fs::path dir = "/usr/share/games/fortunes";
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> docs;
  for (const auto& f : files) {
    const std::string s = read_text(f.string());
    for (size_t pos = 0; pos <= s.size();) {
      size_t end = s.find("\n%\n", pos);
      if (end == std::string::npos) end = s.size();
      docs.push_back(s.substr(pos, end - pos));
      pos = end + 3;
    }
  }
  return docs;
}

// Runs a shell command; its stdout, or nullopt if it failed.
inline std::optional<std::string> run_command(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  return pclose(p) == 0 ? std::optional<std::string>(out) : std::nullopt;
}

inline bool have_command(const std::string& name) {
  return run_command("command -v " + name + " >/dev/null 2>&1").has_value();
}

inline std::string random_bytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

// A long text's pieces (split_for_encoding, as axonn prepare encodes a huge document), encoded one
// by one and concatenated, are the whole text's ids, and decode back to it.
inline void expect_pieces_encode_as_whole(const text::Tokenizer& tok, const std::string& text, size_t max_bytes) {
  const auto pieces = text::split_for_encoding(tok, text, max_bytes);
  ASSERT_GE(pieces.size(), text.size() / max_bytes);
  std::vector<int> ids;
  for (const auto p : pieces) {
    ASSERT_LE(p.size(), max_bytes);
    const std::vector<int> some = tok.encode_ordinary(p);
    ids.insert(ids.end(), some.begin(), some.end());
  }
  ASSERT_EQ(ids, tok.encode_ordinary(text)) << pieces.size() << " pieces of at most " << max_bytes << " bytes";
  EXPECT_EQ(tok.decode(ids), text);
}

}  // namespace axonn::test
