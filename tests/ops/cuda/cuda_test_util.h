// Helpers shared by the CUDA test suites: skip without a GPU, fresh seeds.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "exactq/cuda.h"

// Every CUDA test starts with this: without a usable device it skips with a message (CI
// compiles the suites on a machine without a GPU; the H200 runs them).
#define REQUIRE_GPU()                                          \
  do {                                                         \
    if (!::exactq::cuda::device_available()) {                 \
      GTEST_SKIP() << "no usable CUDA device on this machine"; \
    }                                                          \
  } while (0)

namespace exactq::test {
inline std::uint64_t fresh_seed() {
  static std::random_device rd;
  return (std::uint64_t(rd()) << 32) | rd();
}
}  // namespace exactq::test
