// qmv_wide's order (MLX qmv_wide's structure; the inexact arm): docs/design.md §5.
#pragma once

#include "order/primitives.h"

namespace exactq::order {

// One row, one vector. 8 lanes per row; group g belongs to lane g % 8, taken in increasing g.
// Per group: s, b; for each 8-code sub-chunk: w[i] = fma(s, q[i], b) (dequantize first: the qdot
// trap), a = 0, a = fma(x[i], w[i], a) for i = 0..7, R[lane] = R[lane] + a. Then the
// shuffle-down ladder 4, 2, 1: y = ((r0+r4)+(r2+r6)) + ((r1+r5)+(r3+r7)).
inline constexpr int kWideLanes = 8;
inline constexpr int kWideSubChunk = 8;
inline constexpr int kWideMaxVectors = 5;  // vectors per tile; each tile re-reads the weights
inline constexpr int kWideLadderSteps = 3;
EXACTQ_HD constexpr int wide_ladder_offset(int step) { return 4 >> step; }  // 4, 2, 1

EXACTQ_HD float wide_dequant(float scale, float q, float bias) { return fma(scale, q, bias); }
EXACTQ_HD float wide_step(float acc, float x, float w) { return fma(x, w, acc); }

inline float wide_ladder(const float lanes[kWideLanes]) {
  float r[kWideLanes];
  for (int l = 0; l < kWideLanes; ++l) r[l] = lanes[l];
  for (int step = 0; step < kWideLadderSteps; ++step) {
    const int offset = wide_ladder_offset(step);
    // shuffle-down: lane l adds lane l + offset; lanes past the end keep their value (on the
    // GPU they read another row's lane, which never reaches lane 0).
    for (int l = 0; l + offset < kWideLanes; ++l) r[l] = add(r[l], r[l + offset]);
  }
  return r[0];
}

// MLX's tiling of M vectors for qmv_wide: ceil(M/5) tiles of ceil(M/tiles) vectors.
EXACTQ_HD int wide_vectors_per_tile(long long m) {
  const long long tiles = (m + kWideMaxVectors - 1) / kWideMaxVectors;
  return int((m + tiles - 1) / tiles);
}

}  // namespace exactq::order
