// The rule for how many weight copies a timing loop rotates through (host arithmetic, no CUDA),
// shared by the kernels' timing, the size-matched read and the tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace exactq::cuda {

// How many copies of a matrix a timing loop rotates through, so that no launch finds any of its
// bytes in the L2 (60 MB counted). Between two launches on one copy, the other copies must push
// all of it out: together they hold at least four times the L2 (`bytes` each), and their group
// parameters alone (`parameter_bytes` each; 0 where there are none) at least twice the L2, because
// the kernels load codes evict-first but parameters with the default policy. Session 17 measured
// what counting by size alone did: a launch found earlier launches' parameters in L2 wherever
// they fit (4-bit qmv on Llama's head, 33 MB of parameters: 68.3 us with one copy, 73.8 with
// three; 28672x8192, 15 MB: 32.8 us with two copies, 34.6 with three, 35.7 with five). At least
// three copies; at most 1024, and 16 GB in all. bench/anchors.py follows the same rule.
inline constexpr double kTimingL2Bytes = 60e6;
inline constexpr double kTimingMaxBytes = 16e9;
inline int timing_copies(std::size_t bytes, std::size_t parameter_bytes) {
  const double b = double(bytes > 0 ? bytes : 1);
  double copies = std::max(3.0, std::ceil(4 * kTimingL2Bytes / b));
  if (parameter_bytes > 0) copies = std::max(copies, 1 + std::ceil(2 * kTimingL2Bytes / double(parameter_bytes)));
  return int(std::min({copies, 1024.0, std::max(3.0, std::floor(kTimingMaxBytes / b))}));
}

}  // namespace exactq::cuda
