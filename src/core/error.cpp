#include "axonn/core/error.hpp"

namespace axonn::detail {

std::string with_location(const std::string& msg, const char* expr, const std::source_location& loc) {
  std::ostringstream os;
  os << msg << " [check '" << expr << "' failed at " << loc.file_name() << ":" << loc.line() << "]";
  return os.str();
}

}  // namespace axonn::detail
