// Where the tests' data lives: llm.c's reference run (tests/reference) and the oracles' golden files
// (tests/golden). The build records both folders (the including target defines AXONN_REFERENCE_DIR and
// AXONN_GOLDEN_DIR); the environment variables of the same names override them at run time, so that tests
// built on one machine run from another checkout (scripts/device-check.sh runs the GPU kit's prebuilt tests
// against the checkout carried to the GPU machine).
#pragma once

#include <cstdlib>
#include <string>

namespace axonn::test {

namespace detail {
inline std::string data_dir(const char* variable, const char* built_in) {
  const char* v = std::getenv(variable);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(built_in);
}
}  // namespace detail

#ifdef AXONN_REFERENCE_DIR
// A file of llm.c's reference data, e.g. reference_file("gpt2-tiny/model.bin").
inline std::string reference_file(const std::string& relative) {
  return detail::data_dir("AXONN_REFERENCE_DIR", AXONN_REFERENCE_DIR) + "/" + relative;
}
#endif

#ifdef AXONN_GOLDEN_DIR
// A file or folder of the golden data, e.g. golden_file("llama-gqa/losses.txt").
inline std::string golden_file(const std::string& relative) {
  return detail::data_dir("AXONN_GOLDEN_DIR", AXONN_GOLDEN_DIR) + "/" + relative;
}
#endif

}  // namespace axonn::test
