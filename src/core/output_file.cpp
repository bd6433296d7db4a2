// An output never destroys an input (core/output_file.hpp).
#include "axonn/core/output_file.hpp"

#include <sys/stat.h>

#include <filesystem>

#include "axonn/core/error.hpp"
#include "axonn/core/input_file.hpp"

namespace axonn {

namespace fs = std::filesystem;

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

bool same_path(const std::string& a, const std::string& b) {
  std::error_code ec;
  const auto name = [&ec](const std::string& p) { return (fs::absolute(p, ec).lexically_normal() / "").string(); };
  return same_file(a, b) || name(a) == name(b);
}

bool path_inside(const std::string& path, const std::string& dir) {
  std::error_code ec;
  // the links on the way resolved (weakly: the part not made yet is kept as written), so that a path through a
  // link into a directory below `dir` is found inside it
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return false;
  for (p = p.parent_path(); !p.empty(); p = p.parent_path()) {
    if (same_file(p.string(), dir)) return true;
    if (p == p.root_path()) break;
  }
  return false;
}

void check_output_apart(const NamedPath& output, const std::vector<NamedPath>& inputs) {
  for (const NamedPath& in : inputs) {
    AXONN_CHECK_ARG(!same_file(output.path, in.path), output.quoted(), " is ", in.quoted(),
                    ", which this command reads: writing it would destroy the input. Give ", output.flag,
                    " another path");
    std::error_code ec;
    AXONN_CHECK_ARG(!fs::is_directory(in.path, ec) || !path_inside(output.path, in.path), output.quoted(),
                    " lies inside ", in.quoted(), ", which this command reads: an output never goes into an input. ",
                    "Give ", output.flag, " another path");
  }
}

void check_output_file(const NamedPath& output) {
  std::error_code ec;
  AXONN_CHECK_ARG(!output.path.ends_with('/') && !fs::is_directory(output.path, ec), output.quoted(),
                  " is a directory: give the path of a file to write");
  check_replaceable_file(output.path, output.flag);
}

void check_replaceable_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;  // new, or a file to replace
  throw InvalidArgument((what.empty() ? "" : what + " ") + "'" + path + "' is " + file_kind(st.st_mode) +
                        ", not a regular file: " +
                        "an output is written as a new file renamed over the old one, which would replace it; give " +
                        "the path of a file to write");
}

}  // namespace axonn
