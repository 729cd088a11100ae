// How many weight copies a timing loop rotates through (host arithmetic, no CUDA), shared by the
// CUDA timer, the size-matched read and bench/anchors.py.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace exactq::bench {

// How many copies of a matrix a timing loop rotates through, so that no launch finds any of its
// bytes in the device's L2 (`l2_bytes`). Between two launches on one copy, the other copies must
// push all of it out: together they hold at least four times the L2 (`bytes` each), and their
// group parameters alone (`parameter_bytes` each; 0 where there are none) at least twice the L2,
// because the kernels load codes evict-first but parameters with the default policy: counted by
// size alone, a launch finds earlier launches' parameters in L2 wherever they fit (4-bit qmv on
// Llama's head, 33 MB of parameters, measured 7 % faster with one copy than with three). At least
// three copies; at most 1024, and 16 GB in all.
inline constexpr double kTimingMaxBytes = 16e9;
inline int timing_copies(std::size_t bytes, std::size_t parameter_bytes, double l2_bytes) {
  const double b = double(bytes > 0 ? bytes : 1);
  double copies = std::max(3.0, std::ceil(4 * l2_bytes / b));
  if (parameter_bytes > 0) copies = std::max(copies, 1 + std::ceil(2 * l2_bytes / double(parameter_bytes)));
  return int(std::min({copies, 1024.0, std::max(3.0, std::floor(kTimingMaxBytes / b))}));
}

}  // namespace exactq::bench
