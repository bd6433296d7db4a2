#include "mpi_error.hpp"

#include <cstring>

namespace axonn::comm::detail {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

CommError mpi_error(int code, std::string_view call, std::string_view context,
                    const std::source_location& loc) {
  const std::string_view fn = call.substr(0, call.find('('));
  const char* file = loc.file_name();
  // Trim the build machine's path down to the project-relative one.
  if (const char* src = std::strstr(file, "src/comm/")) file = src;
  return CommError(::axonn::detail::concat(fn, " failed (", context, "): ", mpi_error_string(code), " [at ", file,
                          ":", loc.line(), "]"));
}

}  // namespace axonn::comm::detail
