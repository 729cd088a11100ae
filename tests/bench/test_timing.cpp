// The benchmark's timing rules (host arithmetic: no GPU needed).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "timing.h"

namespace exactq::test {
namespace {

// The timing loops' copy count (bench::timing_copies): at least three copies; the others together
// hold four times the L2, and their group parameters twice the L2; no more copies than that needs;
// at most 1024 and 16 GB. Host arithmetic: no GPU needed.
TEST(Timing, CopiesKeepEveryLaunchOutOfTheL2) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  struct Case {
    std::size_t bytes, parameter_bytes;
  };
  std::vector<Case> cases = {{1, 0}, {16, 0}, {4'423'680, 491'520}, {33'177'600, 3'686'400}, {132'120'576, 14'680'064},
                             {295'501'824, 32'833'536}, {566'231'040, 62'914'560}, {std::size_t(10) << 30, 0}};
  for (int i = 0; i < 300; ++i) {
    const std::size_t bytes = 1 + rng() % (std::size_t(1) << 32);
    cases.push_back({bytes, i % 3 == 0 ? 0 : rng() % (bytes / 8 + 1)});
  }
  for (const double l2 : {40e6, 50e6, 60e6, 96e6}) {
    auto enough = [&](const Case& c, double copies) {
      return copies * double(c.bytes) >= 4 * l2 &&
             (c.parameter_bytes == 0 || (copies - 1) * double(c.parameter_bytes) >= 2 * l2);
    };
    for (const Case& c : cases) {
    const int copies = bench::timing_copies(c.bytes, c.parameter_bytes, l2);
    SCOPED_TRACE("bytes " + std::to_string(c.bytes) + " parameters " + std::to_string(c.parameter_bytes) + " copies " +
                 std::to_string(copies));
    EXPECT_GE(copies, 3);
    EXPECT_LE(copies, 1024);
    const bool capped = copies == 1024 || double(copies + 1) * double(c.bytes) > bench::kTimingMaxBytes;
    if (copies > 3) {
      EXPECT_LE(double(copies) * double(c.bytes), bench::kTimingMaxBytes);
    }
    if (!capped) {
      EXPECT_TRUE(enough(c, copies));
    }
    if (copies > 3 && !capped) {
      EXPECT_FALSE(enough(c, copies - 1));
    }
    }
  }
}

}  // namespace
}  // namespace exactq::test
