// comm/mpi/mpi_error.hpp — MPI return codes to axonn::CommError (private to the MPI backend).
//
// Every communicator we create has MPI_ERRORS_RETURN, so a failing call returns a code instead of
// aborting the job; AXONN_MPI_CHECK turns that code into an exception that names the MPI function,
// what we were doing, MPI's own error string, and where in our code the call was made.
#pragma once

#include <mpi.h>

#include <source_location>
#include <string>
#include <string_view>

#include "axonn/core/error.hpp"

namespace axonn::comm::detail {

// "MPI_ERR_COUNT: invalid count argument" for code MPI_ERR_COUNT.
std::string mpi_error_string(int code);
// The exception for a failed call. `call` may be the whole call text; only the function name is
// kept. `context` says what we were doing ("all_reduce of 1024 f32 on communicator 'x'").
CommError mpi_error(int code, std::string_view call, std::string_view context,
                    const std::source_location& loc = std::source_location::current());

}  // namespace axonn::comm::detail

#define AXONN_MPI_CHECK(call, context)                                                        \
  do {                                                                                        \
    const int axonn_mpi_rc_ = (call);                                                         \
    if (axonn_mpi_rc_ != MPI_SUCCESS) [[unlikely]]                                            \
      throw ::axonn::comm::detail::mpi_error(axonn_mpi_rc_, #call, (context),                 \
                                             std::source_location::current());                \
  } while (0)
