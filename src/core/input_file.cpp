// core/input_file.cpp — inputs must be regular files (input_file.hpp).
#include "axonn/core/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "axonn/core/error.hpp"

namespace axonn {

namespace {

std::string named(const std::string& what, const std::string& path) {
  return (what.empty() ? "" : what + " ") + "'" + path + "'";
}

void refuse(const std::string& what, const std::string& path, mode_t mode) {
  throw IoError(named(what, path) + " is " + file_kind(mode) + ", not a regular file: give a file");
}

}  // namespace

const char* file_kind(unsigned mode) {
  if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

int open_input_file(const std::string& path, const std::string& what) {
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw IoError("cannot open " + named(what, path) + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw IoError("cannot stat " + named(what, path) + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse(what, path, st.st_mode);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // regular files ignore it; restore anyway
  return fd;
}

FILE* fopen_input_file(const std::string& path, const std::string& what) {
  const int fd = open_input_file(path, what);
  FILE* f = ::fdopen(fd, "rb");
  if (!f) {
    const int err = errno;
    ::close(fd);
    throw IoError("cannot open " + named(what, path) + ": " + std::strerror(err));
  }
  return f;
}

void require_regular_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) refuse(what, path, st.st_mode);
}

}  // namespace axonn
