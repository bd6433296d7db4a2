#include "axonn/checkpoint/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/core/output_file.hpp"
#include "axonn/core/input_file.hpp"

namespace axonn::checkpoint {

namespace {

// Linux transfers at most 0x7ffff000 bytes per write/read call; stay well below.
constexpr size_t kMaxIo = size_t{1} << 30;

std::string parent_dir(const std::string& path) {
  std::filesystem::path p = std::filesystem::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

// An XXH3-64 streaming state, freed with its owner.
struct Xxh3 {
  XXH3_state_t* state = XXH3_createState();
  Xxh3() {
    AXONN_CHECK(state != nullptr, "out of memory for a hash state");
    XXH3_64bits_reset(state);
  }
  ~Xxh3() { XXH3_freeState(state); }
  Xxh3(const Xxh3&) = delete;
  Xxh3& operator=(const Xxh3&) = delete;
};

}  // namespace

struct AtomicFile::HashState : Xxh3 {};

uint64_t hash_bytes(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::string hash_to_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::optional<uint64_t> hash_from_hex(std::string_view s) {
  if (s.size() != 16) return std::nullopt;
  uint64_t h = 0;
  for (char c : s) {
    int v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else
      return std::nullopt;
    h = h << 4 | static_cast<uint64_t>(v);
  }
  return h;
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp"), hash_(new HashState) {
  check_replaceable_file(path_, "");  // never a regular file renamed over a device (/dev/null), a pipe, a socket
  // the temporary is ours alone: one a crash left (or a planted link) is removed, never written
  // through (unlink removes a link itself), and a new file made in its place
  if (::unlink(tmp_.c_str()) != 0 && errno != ENOENT)
    throw IoError("cannot remove the stale '" + tmp_ + "': " + std::strerror(errno));
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  AXONN_CHECK_IO(fd_ >= 0, "cannot create '", tmp_, "': ", std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t n) {
  AXONN_CHECK(fd_ >= 0, "write to '", path_, "' after commit");
  XXH3_64bits_update(hash_->state, data, n);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, std::min(n, kMaxIo));
    if (w < 0 && errno == EINTR) continue;
    AXONN_CHECK_IO(w > 0, "writing '", tmp_, "' failed after ", bytes_,
                   " bytes: ", w < 0 ? std::strerror(errno) : "no progress", " (disk full?)");
    p += w;
    n -= static_cast<size_t>(w);
    bytes_ += static_cast<uint64_t>(w);
  }
}

FileDigest AtomicFile::commit() {
  AXONN_CHECK(fd_ >= 0, "'", path_, "' committed twice");
  // The data must be on disk before the rename makes it visible under the final name; otherwise a
  // crash could leave the new name pointing at a file with holes.
  AXONN_CHECK_IO(::fsync(fd_) == 0, "fsync of '", tmp_, "' failed: ", std::strerror(errno));
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    throw IoError("closing '" + tmp_ + "' failed: " + std::strerror(err));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    throw IoError("cannot rename '" + tmp_ + "' to '" + path_ + "': " + std::strerror(err));
  }
  fsync_dir(parent_dir(path_));
  return FileDigest{bytes_, XXH3_64bits_digest(hash_->state)};
}

FileDigest write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicFile f(path);
  f.write(contents.data(), contents.size());
  return f.commit();
}

FileDigest digest_file(const std::string& path, Progress* progress) {
  int fd = open_input_file(path, "");
  Xxh3 hash;
  std::vector<char> buf(size_t{8} << 20);
  uint64_t total = 0;
  for (;;) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      ::close(fd);
      throw IoError("reading '" + path + "' failed after " + std::to_string(total) + " bytes: " + std::strerror(err));
    }
    if (r == 0) break;
    XXH3_64bits_update(hash.state, buf.data(), static_cast<size_t>(r));
    total += static_cast<uint64_t>(r);
    if (progress) progress->add(r);
  }
  ::close(fd);
  return FileDigest{total, XXH3_64bits_digest(hash.state)};
}

std::string read_text_file(const std::string& path) {
  FILE* f = fopen_input_file(path, "");
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  bool err = std::ferror(f) != 0;
  std::fclose(f);
  AXONN_CHECK_IO(!err, "reading '", path, "' failed");
  return s;
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  AXONN_CHECK_IO(fd >= 0, "cannot open directory '", dir, "': ", std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems (e.g. certain network mounts) do not support fsync on directories; that is
  // their durability model, not an error of ours.
  AXONN_CHECK_IO(rc == 0 || err == EINVAL || err == EROFS, "fsync of directory '", dir,
                 "' failed: ", std::strerror(err));
}

}  // namespace axonn::checkpoint
