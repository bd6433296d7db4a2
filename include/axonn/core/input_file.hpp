// core/input_file.hpp — opening the user's input files safely.
//
// An input must be a regular file: open(2) of a named pipe blocks until some process writes to it
// (`mkfifo f; axonn inspect f` would hang for ever), and a directory or a device is no model, shard
// or manifest. Every reader of the library opens its input through here.
//
//   int fd = open_input_file(path, "token shard");   // IoError "cannot open token shard 'x': ..."
#pragma once

#include <cstdio>
#include <string>

namespace axonn {

// Opens `path` for reading (O_CLOEXEC) and returns the descriptor. Throws IoError "cannot open WHAT
// 'PATH': REASON" (WHAT may be empty) if it cannot be opened, or "WHAT 'PATH' is a named pipe (FIFO),
// not a regular file: give a file" (or a directory, a device, ...) if it is not a regular file; a
// named pipe is never waited on.
int open_input_file(const std::string& path, const std::string& what);
// The same as a FILE* ("rb"); the caller fcloses it.
FILE* fopen_input_file(const std::string& path, const std::string& what);
// Throws the same IoError if `path` exists and is not a regular file (for readers that open
// otherwise, e.g. std::ifstream); a missing file is the caller's to report.
void require_regular_file(const std::string& path, const std::string& what);
// What a file that is not a regular one is, for messages, from its st_mode: "a named pipe (FIFO)", "a
// directory", "a device", "a socket" (also for outputs: core/output_file.hpp).
const char* file_kind(unsigned mode);

}  // namespace axonn
