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
#include "exactq/mma_layout.h"

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
//   F = chunk_lift(x)                                            (a property of x alone)
//   A = 0;  A = fma(lift_x(x[i], F, shift_i), scaled_code(q[i], shift_i), A)   for i = 0..31
//   S = 0;  S = S + x[i]                                         for i = 0..31  (sum_step)
//   R[lane] = R[lane] + fma(scale, unlift(A, F), bias * S)      (chunk_fold, lane_add)
// then the xor butterfly over the 32 lanes with masks 16, 8, 4, 2, 1, and y = T(R).
//
// Why the lift (docs/design.md §3.1): a 32-bit pattern below 2^24 read as an f32 is exactly
// pattern * 2^-149 (exponent field 0 or 1). So a code masked in place at bit `shift` of a word
// already IS the float q * 2^(shift-149): one AND per code on the GPU, no int-to-float
// conversion, no magic number to subtract. The activations are lifted by 2^(F-shift) to
// compensate, so each product is x*q*2^(F-149), the true product times a power of two that
// depends on the chunk of x only; unlift removes it from A once per chunk. When nothing
// underflows, A is exactly the unlifted sum times 2^(F-149), so the lift changes no bit of the
// plain fma(x, q, A) chain; it only makes the cheap decode legal.
inline constexpr int kLanes = 32;
inline constexpr int kButterflySteps = 5;
EXACTQ_HD constexpr int butterfly_mask(int step) { return 16 >> step; }  // 16, 8, 4, 2, 1

// Where code i of a chunk is masked out. Its stream bits are [i*bits, i*bits + bits); word
// j = i*bits/32 holds bit s = i*bits % 32 of them. The source is the word pair (w[j+1]:w[j])
// shifted right by `code_source_offset` (0, 8 or 16: the least that puts the whole code below
// bit 24, where a masked pattern is still linear in q), and the code then sits at `code_shift`.
EXACTQ_HD constexpr int code_source_offset(int bits, int i) {
  const int s = i * bits % 32;
  return s + bits <= 24 ? 0 : (s + bits <= 32 ? 8 : 16);
}
EXACTQ_HD constexpr int code_shift(int bits, int i) { return i * bits % 32 - code_source_offset(bits, i); }

// 2^n as an f32, for n in [-126, 127].
EXACTQ_HD float pow2(int n) { return float_from_bits(std::uint32_t(n + 127) << 23); }

// The code as the float q * 2^(shift-149) (exact: the pattern q << shift is below 2^24).
EXACTQ_HD float scaled_code(std::uint32_t q, int shift) { return float_from_bits(q << shift); }

// F from the largest |x| of the chunk, given as its bit pattern (the largest pattern of
// bits & 0x7fffffff; a NaN or infinity gives field 255). With E = max(exponent field, 1),
// |x| < 2^(E-126), so F = 253 - E keeps every lifted value below 2^127, and capping F at 127
// keeps the factor 2^(F-shift) an ordinary float. F is in [-2, 127].
EXACTQ_HD int chunk_lift(std::uint32_t max_abs_bits) {
  const int field = int(max_abs_bits >> 23);
  const int e = field < 1 ? 1 : field;
  return 253 - e < 127 ? 253 - e : 127;
}
EXACTQ_HD float lift_x(float x, int lift, int shift) { return mul(x, pow2(lift - shift)); }
// The two factors of unlift, 2^(149-F) split so each is an f32: 149-F is in [22, 151].
EXACTQ_HD float unlift_first(int lift) { return pow2(149 - lift < 127 ? 149 - lift : 127); }
EXACTQ_HD float unlift_second(int lift) { return pow2(149 - lift < 127 ? 0 : 149 - lift - 127); }
// Both factors are >= 1 and |A| < 2^-9, so neither product rounds unless the true value overflows.
EXACTQ_HD float unlift(float code_dot, float first, float second) { return mul(mul(code_dot, first), second); }

EXACTQ_HD float code_step(float acc, float lifted_x, float scaled_q) { return fma(lifted_x, scaled_q, acc); }
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

// The per-chunk facts of x that every row shares, so kernels compute them once per vector:
// the sum S, the lift F, and the lifted activations (which also depend on the code shifts, so
// on bits).
EXACTQ_HD float chunk_x_sum(const float* x) {
  float s = 0.0f;
  for (int i = 0; i < kChunkValues; ++i) s = sum_step(s, x[i]);
  return s;
}
EXACTQ_HD std::uint32_t chunk_max_abs_bits(const float* x) {
  std::uint32_t m = 0;
  for (int i = 0; i < kChunkValues; ++i) {
    const std::uint32_t a = bits_from_float(x[i]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  return m;
}

// ---- the exact integer chunk dot (decision 0003: decided for qmv, not yet its order) -----------
// One definition of the arithmetic that qmv's chunk dot is to become; used today by
// bench/prototypes/qmv_tma_prototype.cu and pinned by tests/cpu/test_exact_chunk_dot.cpp. Per
// chunk of 32 values of one vector:
//   E   = exact_exponent(chunk_max_abs_bits(x))      every |x_i| < 2^(E-126)
//   X_i = exact_integer(x_i, E)                       rint(x_i * 2^(148-E)), |X_i| < 2^22
//   D   = sum q_i * X_i, exactly (int64)             no order: any instruction may compute it
//   A   = exact_chunk_value(D, E)                     float(D) rounded once, times 2^(E-148)
// then qmv's fold, lane chains and butterfly as above. A chunk holding a NaN or an infinity has
// E = 255 and A = NaN.
inline constexpr int kExactNonFinite = 255;
inline constexpr int kExactScale = 148;  // X = x * 2^(148 - E): below 2^22 in magnitude

EXACTQ_HD int exact_exponent(std::uint32_t max_abs_bits) {
  const int field = int(max_abs_bits >> 23);
  return field < 1 ? 1 : field;
}
// 2^n as an f32 for n in [-149, 127]: subnormal below -126, so a single multiply by it is exact
// wherever its product is representable.
EXACTQ_HD float exact_pow2(int n) {
  return n >= -126 ? pow2(n) : float_from_bits(1u << (n + 149));
}
// x * 2^(148 - E) in two multiplies (the factor can exceed the f32 range): both exact unless the
// product falls below 2^-126, where the value is under 1/2 and rounds to 0 either way.
EXACTQ_HD float exact_scaled(float x, int e) {
  const int t = kExactScale - e, first = t < 127 ? t : 127;
  return mul(mul(x, exact_pow2(first)), exact_pow2(t - first));
}
// X_i: the scaled value rounded half to even (|x| < 2^(E-126) keeps it below 2^22). A non-finite
// chunk's X are 0: its A is NaN whatever D is.
EXACTQ_HD std::int32_t exact_integer(float x, int e) {
  if (e >= kExactNonFinite) return 0;
#if defined(__CUDA_ARCH__)
  return __float2int_rn(exact_scaled(x, e));
#else
  return static_cast<std::int32_t>(std::nearbyint(exact_scaled(x, e)));  // the default mode: to nearest, ties to even
#endif
}
// A = float(D) * 2^(E - 148): the conversion rounds once, the power of two (exact, subnormal
// for E < 22) rounds again only where the result is subnormal.
EXACTQ_HD float exact_chunk_value(std::int64_t dot, int e) {
  if (e >= kExactNonFinite) return float_from_bits(0x7fc00000u);
#if defined(__CUDA_ARCH__)
  const float d = __ll2float_rn(dot);
#else
  const float d = static_cast<float>(dot);
#endif
  return mul(d, exact_pow2(e - kExactScale));
}
// X as three signed bytes, X = d0 + 2^8 d1 + 2^16 d2 (d2 in [-64, 64]): the operands of a
// byte-wise integer dot (dp4a, or an integer mma).
EXACTQ_HD void exact_digits(std::int32_t x, std::int32_t (&d)[3]) {
  d[0] = std::int32_t(std::int8_t(std::uint8_t(x & 0xff)));
  d[1] = std::int32_t(std::int8_t(std::uint8_t(((x - d[0]) >> 8) & 0xff)));
  d[2] = (x - d[0] - 256 * d[1]) >> 16;
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

// ---- qmv_mma --------------------------------------------------------------------------------
// Per row and vector, groups fold in increasing g (mma_fold), acc_g from the tensor cores (their
// order, not mirrored). Where a matrix has few 16-row tasks, K is cut into `mma_k_parts` segments
// of whole rounds (mma_layout.h: 128 bytes of a row), balanced: segment p is rounds
// [p R / P, (p + 1) R / P). Each segment's fold starts from +0, and the segment totals are added
// in increasing p: y = T(((t_0 + t_1) + t_2) + ...). The cut depends on N, K and bits only (never
// on M, never on the device), so every vector's bits stay the same at every M.
inline constexpr int kMmaMaxParts = 8;
inline constexpr long long kMmaTargetTasks = 1024;  // enough (task, segment) pairs to fill an H200
// At least 256 bytes of each row per segment: 2 measured 7-15 % faster than 4 on the q/kv
// projections (K = 3840, 4096: 15-16 rounds) and no slower elsewhere (session 10).
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
