// Figures `exactq bench` derives from its timings (header-only, so the tests check them directly).
#pragma once

#include <optional>

namespace exactq::bench {

// qmv_streamed's recovered fraction, (t_qmv - t_streamed) / (t_qmv - t_wide), where qmv_wide saves
// at least kMinWideSaving of narrow qmv's time. Below that the denominator is of the order of the
// timing noise (about 1 % between passes) and the quotient amplifies it: on an H100 at 15360x3840,
// M = 5, qmv_wide and qmv both took 59.5 us and the quotient came out at 900.
inline constexpr double kMinWideSaving = 0.05;

inline std::optional<double> recovered_fraction(double t_qmv, double t_streamed, double t_wide) {
  const double saving = t_qmv - t_wide;
  if (!(saving >= kMinWideSaving * t_qmv)) return std::nullopt;  // NaN times are left out too
  return (t_qmv - t_streamed) / saving;
}

}  // namespace exactq::bench
