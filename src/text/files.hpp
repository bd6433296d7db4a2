// Internal: reading a whole file for the tokenizer loaders, with errors that name it.
#pragma once

#include <string>

namespace axonn::text::detail {

// The file's bytes; IoError "cannot open <what> '<path>': <reason>" if it cannot be read.
std::string read_file(const std::string& path, const std::string& what);

}  // namespace axonn::text::detail
