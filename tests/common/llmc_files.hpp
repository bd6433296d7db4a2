// Test helpers that write llm.c-format files, well-formed or deliberately broken.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdlib.h>
#include <filesystem>
#include <string>
#include <vector>

namespace axonn::test {

// A fresh temporary directory, removed with the object.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/axonn-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// A token shard: header {magic, version, declared} and the tokens as uint16 (or uint32 if wide).
inline void write_shard(const std::string& path, const std::vector<uint32_t>& tokens, int magic = 20240520,
                        int version = 1, int64_t declared = -1, bool wide = false) {
  std::vector<char> b(1024, 0);
  int32_t h[3] = {magic, version, (int32_t)(declared < 0 ? (int64_t)tokens.size() : declared)};
  std::memcpy(b.data(), h, sizeof h);
  for (uint32_t t : tokens) {
    if (wide) {
      b.insert(b.end(), reinterpret_cast<char*>(&t), reinterpret_cast<char*>(&t) + 4);
    } else {
      auto s = static_cast<uint16_t>(t);
      b.insert(b.end(), reinterpret_cast<char*>(&s), reinterpret_cast<char*>(&s) + 2);
    }
  }
  write_bytes(path, b);
}

}  // namespace axonn::test
