// The one definition of each kernel's floating-point steps (docs/design.md is the prose of it).
//
// The CPU mirror (src/cpu/) and the CUDA kernels (src/cuda/) both call these functions, so an
// order change is made once and lands on both sides. Every operation is named: fma, add, mul,
// each rounded to nearest even in f32. Nothing here may be left to the compiler to contract:
// the CPU side builds with -ffp-contract=off, the CUDA side uses the _rn intrinsics.
#pragma once

#include <cmath>

#include "exactq/dtype.h"
#include "exactq/format.h"

namespace exactq::order {

EXACTQ_HD float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
EXACTQ_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
EXACTQ_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// ---- qmv family (qmv, qmv_streamed) ---------------------------------------------------------
// One row, one vector. Chunk c (codes 32c .. 32c+31) belongs to lane c % 32; each lane takes its
// chunks in increasing c. Per chunk, with x the f32 activations and q the integer codes:
//   A = 0;  A = fma(x[i], q[i], A)        for i = 0..31        (code_step)
//   S = 0;  S = S + x[i]                  for i = 0..31        (sum_step; a property of x alone)
//   R[lane] = R[lane] + fma(scale, A, bias * S)                 (chunk_fold, lane_add)
// then the xor butterfly over the 32 lanes with masks 16, 8, 4, 2, 1, and y = T(R).
inline constexpr int kLanes = 32;
inline constexpr int kButterflySteps = 5;
EXACTQ_HD constexpr int butterfly_mask(int step) { return 16 >> step; }  // 16, 8, 4, 2, 1

EXACTQ_HD float code_step(float acc, float x, float q) { return fma(x, q, acc); }
EXACTQ_HD float sum_step(float sum, float x) { return add(sum, x); }
EXACTQ_HD float chunk_fold(float scale, float bias, float code_dot, float x_sum) {
  return fma(scale, code_dot, mul(bias, x_sum));
}
EXACTQ_HD float lane_add(float lane_total, float chunk_value) { return add(lane_total, chunk_value); }
EXACTQ_HD float butterfly_step(float own, float partner) { return add(own, partner); }

// Lane 0's value after the butterfly (every lane ends with the same value: add commutes).
inline float butterfly(const float lanes[kLanes]) {
  float r[kLanes];
  for (int l = 0; l < kLanes; ++l) r[l] = lanes[l];
  for (int step = 0; step < kButterflySteps; ++step) {
    const int mask = butterfly_mask(step);
    float next[kLanes];
    for (int l = 0; l < kLanes; ++l) next[l] = butterfly_step(r[l], r[l ^ mask]);
    for (int l = 0; l < kLanes; ++l) r[l] = next[l];
  }
  return r[0];
}

// The chunk sum S of 32 consecutive activations: shared by every row, so kernels compute it
// once per vector (it only depends on x).
EXACTQ_HD float chunk_x_sum(const float* x) {
  float s = 0.0f;
  for (int i = 0; i < kChunkValues; ++i) s = sum_step(s, x[i]);
  return s;
}

// ---- qmv_wide (the inexact arm) -------------------------------------------------------------
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
