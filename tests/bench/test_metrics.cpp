// Figures `exactq bench` derives from its timings.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "metrics.h"
#include "test_util.h"

namespace exactq::test {
namespace {

TEST(BenchMetrics, RecoveredFractionOnlyWhereQmvWideSavesEnough) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> time_us(1.0, 500.0), share(0.0, 1.5);
  int reported = 0, left_out = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const double t_qmv = time_us(rng), t_wide = t_qmv * share(rng), t_streamed = time_us(rng);
    const auto frac = bench::recovered_fraction(t_qmv, t_streamed, t_wide);
    if (t_qmv - t_wide >= bench::kMinWideSaving * t_qmv) {
      ASSERT_TRUE(frac.has_value()) << t_qmv << " " << t_wide;
      EXPECT_DOUBLE_EQ(*frac * (t_qmv - t_wide), t_qmv - t_streamed);
      ++reported;
    } else {
      EXPECT_FALSE(frac.has_value()) << t_qmv << " " << t_wide;
      ++left_out;
    }
  }
  EXPECT_GT(reported, 0);
  EXPECT_GT(left_out, 0);
  // The ends of the scale: streamed as fast as wide recovers all, as slow as qmv recovers none.
  EXPECT_DOUBLE_EQ(*bench::recovered_fraction(100.0, 60.0, 60.0), 1.0);
  EXPECT_DOUBLE_EQ(*bench::recovered_fraction(100.0, 100.0, 60.0), 0.0);
  // Equal times, as an H100 measured at 15360x3840, M = 5: no fraction (the quotient would be 900).
  EXPECT_FALSE(bench::recovered_fraction(59.5, 35.8, 59.49).has_value());
  EXPECT_FALSE(bench::recovered_fraction(100.0, 50.0, std::nan("")).has_value());
}

}  // namespace
}  // namespace exactq::test
