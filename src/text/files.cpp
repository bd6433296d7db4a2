#include "files.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "axonn/core/error.hpp"

namespace axonn::text::detail {

std::string read_file(const std::string& path, const std::string& what) {
  FILE* f = std::fopen(path.c_str(), "rb");
  AXONN_CHECK_IO(f, "cannot open ", what, " '", path, "': ", std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  AXONN_CHECK_IO(!failed, "cannot read ", what, " '", path, "': ", std::strerror(err));
  return bytes;
}

}  // namespace axonn::text::detail
