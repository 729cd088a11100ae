// qmv_mma's order outside the tensor cores: how K is cut into segments and how group sums fold
// (docs/design.md §5b). The sums inside each mma are the hardware's.
#pragma once

#include "exactq/mma_layout.h"
#include "order/primitives.h"

namespace exactq::order {

// Per row and vector, groups fold in increasing g (mma_fold), acc_g from the tensor cores (their
// order, not mirrored). Where a matrix has few 16-row tasks, K is cut into `mma_k_parts` segments
// of whole rounds (mma_layout.h: 128 bytes of a row), balanced: segment p is rounds
// [p R / P, (p + 1) R / P). Each segment's fold starts from +0, and the segment totals are added
// in increasing p: y = T(((t_0 + t_1) + t_2) + ...). The cut depends on N, K and bits only (never
// on M, never on the device), so every vector's bits stay the same at every M.
inline constexpr int kMmaMaxParts = 8;
// Enough (task, segment) pairs to fill a 132-SM GPU. A constant of the order, never read from the
// device: the cut must be the same on every GPU, or the bytes would differ between cards.
inline constexpr long long kMmaTargetTasks = 1024;
// At least 256 bytes of each row per segment: 2 measured 7-15 % faster than 4 on the q/kv
// projections (K = 3840, 4096: 15-16 rounds) and no slower elsewhere.
inline constexpr int kMmaMinSegmentRounds = 2;
EXACTQ_HD constexpr int mma_k_parts(long long n, long long k, int bits, int group) {
  const long long tasks = (n + mma_layout::kTaskRows - 1) / mma_layout::kTaskRows;
  const long long rounds = k / mma_layout::round_values(bits, group);
  int parts = 1;
  while (parts < kMmaMaxParts && tasks * parts < kMmaTargetTasks && rounds >= 2LL * parts * kMmaMinSegmentRounds)
    parts *= 2;
  return parts;
}
// First round of segment `part` of `parts` over `rounds` rounds (part = parts gives the end).
EXACTQ_HD constexpr int mma_segment_begin(int part, int parts, int rounds) {
  return int((long long)part * rounds / parts);
}
EXACTQ_HD float mma_fold(float total, float scale, float acc, float bias, float sum) {
  return fma(scale, acc, fma(bias, sum, total));
}
EXACTQ_HD float mma_segment_add(float total, float segment) { return add(total, segment); }

}  // namespace exactq::order
