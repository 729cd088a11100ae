// expect_invalid, shared by the CPU and CUDA test suites: bad input must be refused with
// std::invalid_argument naming the offending value.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <stdexcept>
#include <string>

namespace exactq::test {

// Runs fn, expects std::invalid_argument whose message contains `needle`.
template <typename Fn>
void expect_invalid(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected std::invalid_argument mentioning '" << needle << "', nothing was thrown";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' does not contain '" << needle << "'";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected std::invalid_argument, got another exception: " << e.what();
  }
}

}  // namespace exactq::test
