// core/output_file.hpp — an output never destroys an input: the comparison every command makes before it
// writes (docs/resilience.md, "What a command writes").
//
// Paths are compared as files, by device and inode, whatever their spelling or the links on the way; an output
// that does not exist yet is compared through the directories above it.
//
//   check_output_apart({"--output", out}, {{"the input", doc}, {"--init", model}});   // InvalidArgument if not
#pragma once

#include <string>
#include <vector>

namespace axonn {

// A path and the flag (or argument) that named it, for messages: "--output 'x.json'".
struct NamedPath {
  std::string flag;
  std::string path;
  std::string quoted() const { return flag + " '" + path + "'"; }
};

// The same existing file or directory (device and inode).
bool same_file(const std::string& a, const std::string& b);
// The same path for an output: the same existing file (same_file), or the same absolute name once normalized (a
// trailing '/' aside), for paths not created yet.
bool same_path(const std::string& a, const std::string& b);
// `path` (existing or not) lies inside the directory `dir`, at any depth: by device and inode of the parents of
// path with its links resolved.
bool path_inside(const std::string& path, const std::string& dir);

// Refuses with InvalidArgument an output that is one of the inputs ("OUTPUT is INPUT, which this command reads:
// writing it would destroy the input. Give FLAG another path"), or lies inside an input directory ("OUTPUT lies
// inside INPUT, which this command reads: an output never goes into an input"), naming both.
void check_output_apart(const NamedPath& output, const std::vector<NamedPath>& inputs);

// Refuses with InvalidArgument an output that must be a file but names a directory (an existing one, or a path
// ending in '/'): "FLAG 'PATH' is a directory: give the path of a file to write", before any work, where the
// atomic write at the end would fail to rename its temporary file over it;
// and one that exists as anything but a regular file (a device such as /dev/null, a named pipe, a socket, or a
// link to one): "FLAG 'PATH' is a device, not a regular file: ...".
void check_output_file(const NamedPath& output);

// The check every atomic write makes before it creates its temporary file (checkpoint::AtomicFile): InvalidArgument
// if `path` exists as anything but a regular file (following links). An atomic write renames a new file over the
// path, which would put a regular file in the place of a device: `--out /dev/null` replaced the system's /dev/null
// (as root), after which every program's `>/dev/null` made a file of that name. `what` names the path in the
// message ("" for the path alone).
void check_replaceable_file(const std::string& path, const std::string& what);

}  // namespace axonn
