// The machine profiles compiled into the library (generated from profiles/*.json at configure time
// by src/planner/CMakeLists.txt into builtin_profiles.cpp).
#pragma once

#include <cstddef>

namespace axonn::planner::builtin {

struct BuiltinProfile {
  const char* name;  // file name without ".json"
  const char* json;  // file contents
};
extern const BuiltinProfile kBuiltinProfiles[];
extern const std::size_t kBuiltinProfileCount;

}  // namespace axonn::planner::builtin
