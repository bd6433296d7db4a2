// checkpoint/atomic_file.hpp — files that appear whole or not at all, and their checksums.
//
// Every file the checkpoint layer writes goes through AtomicFile: the bytes go to `<path>.tmp`, are
// fsynced, and the temporary is renamed over `<path>` (rename is atomic on POSIX file systems), then
// the directory is fsynced so the rename itself survives a power cut. A crash at any moment leaves
// either the old file or the new one under `<path>`, never a mix; at worst a stale `<path>.tmp`.
// The writer hashes the bytes as they go (XXH3-64), so a checkpoint manifest gets each file's
// checksum without reading it back.
//
//   checkpoint::AtomicFile f("run/latest");
//   f.write(text.data(), text.size());
//   checkpoint::FileDigest d = f.commit();   // d.bytes, d.xxh3
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "axonn/core/progress.hpp"

namespace axonn::checkpoint {

// Size and XXH3-64 hash (seed 0) of a file's bytes.
struct FileDigest {
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;
  bool operator==(const FileDigest&) const = default;
};

// "xxh3_64": the name of the hash, as manifests record it.
constexpr std::string_view kHashName = "xxh3_64";
// XXH3-64 (seed 0) of a buffer.
uint64_t hash_bytes(std::string_view bytes);
// 16 lower-case hex digits, and back (nullopt unless exactly 16 hex digits).
std::string hash_to_hex(uint64_t h);
std::optional<uint64_t> hash_from_hex(std::string_view s);

class AtomicFile {
 public:
  // Creates (truncates) `<path>.tmp`; throws IoError if it cannot.
  explicit AtomicFile(std::string path);
  // Without commit(), the temporary is removed: a failed write never replaces the old file.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends n bytes (any size; large writes are split); throws IoError naming the file.
  void write(const void* data, size_t n);
  // fsync, close, rename over the final path, fsync the directory. Returns what was written.
  FileDigest commit();

  const std::string& path() const { return path_; }

 private:
  struct HashState;
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  std::unique_ptr<HashState> hash_;
};

// Writes `contents` to `path` atomically (an AtomicFile in one call).
FileDigest write_file_atomic(const std::string& path, std::string_view contents);
// Reads a file through and returns its size and hash; throws IoError if it cannot be read. `progress`, if
// any, counts the bytes read.
FileDigest digest_file(const std::string& path, Progress* progress = nullptr);
// Reads a whole (small) file; throws IoError naming it.
std::string read_text_file(const std::string& path);
// fsyncs a directory, so renames and creations inside it are durable; throws IoError.
void fsync_dir(const std::string& dir);

}  // namespace axonn::checkpoint
