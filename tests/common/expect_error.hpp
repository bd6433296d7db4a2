// expect_error_with<E>(f, needle): f() must throw an E whose message contains `needle` (a failure
// names what was expected and what was said).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "axonn/core/error.hpp"

namespace axonn::test {

template <typename E = IoError, typename F>
void expect_error_with(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace axonn::test
