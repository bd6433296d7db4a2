// core/error.hpp — the project's exceptions and check macros.
//
// Library code never exits: it throws an axonn::Error (or a subclass) whose message says what is
// wrong and, where possible, what to change. The tools catch at the top, print once per rank and
// bring the job down with a non-zero exit.
//
//   AXONN_CHECK(C % NH == 0, "channels ", C, " are not divisible by heads ", NH);
//   AXONN_CHECK_ARG(B > 0, "--batch-size must be positive, got ", B);   // throws InvalidArgument
#pragma once

#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>

namespace axonn {

// Base of every error the library throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A user-supplied value (flag, config, shape, grid) is wrong; the message says what to change.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
// A file is missing, truncated or malformed, or an I/O call failed.
class IoError : public Error {
 public:
  using Error::Error;
};
// A collective or communicator call failed.
class CommError : public Error {
 public:
  using Error::Error;
};
// A CUDA, cuBLAS or NCCL call failed.
class CudaError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
// Internal-invariant failures carry the location; user-facing ones (InvalidArgument, IoError) do not
// need it, their message already names the input at fault.
std::string with_location(const std::string& msg, const char* expr, const std::source_location& loc);
}  // namespace detail

}  // namespace axonn

// Internal invariant: throws axonn::Error with the failed expression and its location.
#define AXONN_CHECK(cond, ...)                                                                  \
  do {                                                                                          \
    if (!(cond)) [[unlikely]]                                                                   \
      throw ::axonn::Error(::axonn::detail::with_location(::axonn::detail::concat(__VA_ARGS__), \
                                                          #cond, std::source_location::current())); \
  } while (0)

// User input: throws axonn::InvalidArgument with the message alone.
#define AXONN_CHECK_ARG(cond, ...)                                                 \
  do {                                                                             \
    if (!(cond)) [[unlikely]]                                                      \
      throw ::axonn::InvalidArgument(::axonn::detail::concat(__VA_ARGS__));        \
  } while (0)

// Files: throws axonn::IoError with the message alone.
#define AXONN_CHECK_IO(cond, ...)                                                  \
  do {                                                                             \
    if (!(cond)) [[unlikely]]                                                      \
      throw ::axonn::IoError(::axonn::detail::concat(__VA_ARGS__));                \
  } while (0)

#ifdef NDEBUG
#define AXONN_DCHECK(cond, ...) \
  do {                          \
  } while (0)
#else
#define AXONN_DCHECK(cond, ...) AXONN_CHECK(cond, __VA_ARGS__)
#endif
