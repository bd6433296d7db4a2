// core/version.hpp — which axonn this is: its release, and the source it was built from.
//
//   std::printf("axonn %s (%s)\n", axonn::version(), axonn::git_commit());
#pragma once

namespace axonn {

// The release, "0.1.0" (the CMake project's VERSION).
const char* version();
// The git commit of the source tree when the build was configured (40 hex digits), followed by "-dirty"
// when tracked files had uncommitted changes then; "unknown" outside a git checkout. Recorded at configure
// time (cmake/axonn_version.cmake): a build configured once and rebuilt after later commits still names
// the commit it was configured at (a fresh configure, as CI and the Debian package make, is exact).
const char* git_commit();

}  // namespace axonn
