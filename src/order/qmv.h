// qmv's order (qmv and qmv_streamed): the one definition of its floating-point steps, shared by the
// CPU mirror (src/ops/cpu/) and the CUDA kernels (src/ops/cuda/). docs/design.md §3 is its prose.
#pragma once

#include "exactq/format.h"
#include "order/primitives.h"

namespace exactq::order {

// One row, one vector. Chunk c (codes 32c .. 32c+31) belongs to lane c % 32; each lane takes its
// chunks in increasing c. Per chunk, with x the f32 activations and q the integer codes
// (docs/design.md §3 and §3.1):
//   E   = exact_exponent(chunk_max_abs_bits(x))      every |x_i| < 2^(E-126)
//   X_i = exact_integer(x_i, E)                      rint(x_i * 2^(148-E)), |X_i| <= 2^22
//   u   = exact_unscale(E)                           2^(E-148); NaN when the chunk holds a NaN or inf
//   A   = chunk_value(exact_float(sum q_i X_i), u)   the sum is exact (|.| < 2^36): it has no order,
//   S   = chunk_value(exact_float(sum X_i), u)       so any instruction may compute it
//   R[lane] = R[lane] + fma(scale, A, bias * S)     (chunk_fold, lane_add)
// then the xor butterfly over the 32 lanes with masks 16, 8, 4, 2, 1, and y = T(R).
//
// Why integers: an f32 chain (32 dependent fmas per chunk, a code made a float by one AND) costs
// two instructions per code and caps qmv at about 66 % of the H200's read ceiling however its
// bytes are fed. An exact sum costs about one instruction per
// code at 2, 4 and 8 bits (dp4a on three signed-byte digits of X), and because it is exact, the
// CPU mirror reproduces it with any loop. With bf16 or f16 activations X is x exactly (11 or 8
// significant bits, scaled by a power of two), so A and S are the true sums rounded once; with
// f32 activations X keeps 22 bits below the chunk's largest |x|.
inline constexpr int kLanes = 32;
inline constexpr int kButterflySteps = 5;
EXACTQ_HD constexpr int butterfly_mask(int step) { return 16 >> step; }  // 16, 8, 4, 2, 1

inline constexpr int kExactNonFinite = 255;  // the exponent field of a NaN or an infinity
inline constexpr int kExactScale = 148;      // X = x * 2^(148 - E): at most 2^22 in magnitude

// 2^n as an f32, for n in [-126, 127].
EXACTQ_HD float pow2(int n) { return float_from_bits(std::uint32_t(n + 127) << 23); }
// 2^n as an f32 for n in [-149, 127]: subnormal below -126, so a single multiply by it is exact
// wherever its product is representable.
EXACTQ_HD float exact_pow2(int n) { return n >= -126 ? pow2(n) : float_from_bits(1u << (n + 149)); }

// The bit pattern of the chunk's largest |x| (a NaN or infinity has exponent field 255).
EXACTQ_HD std::uint32_t chunk_max_abs_bits(const float* x) {
  std::uint32_t m = 0;
  for (int i = 0; i < kChunkValues; ++i) {
    const std::uint32_t a = bits_from_float(x[i]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  return m;
}
EXACTQ_HD int exact_exponent(std::uint32_t max_abs_bits) {
  const int field = int(max_abs_bits >> 23);
  return field < 1 ? 1 : field;
}
// x * 2^(148 - E) in two multiplies (the factor can exceed the f32 range): both exact unless the
// product falls below 2^-126, where the value is under 1/2 and rounds to 0 either way.
EXACTQ_HD float exact_scaled(float x, int e) {
  const int t = kExactScale - e, first = t < 127 ? t : 127;
  return mul(mul(x, exact_pow2(first)), exact_pow2(t - first));
}
// rint(v) for |v| <= 2^22, as an integer: v + 1.5 * 2^23 lands in [2^23, 2^24], where the f32 step
// is 1, so the add rounds v half to even (1.5 * 2^23 is even) and the sum's bit pattern minus
// that of 1.5 * 2^23 is the integer. Full-rate operations on the GPU, where the conversion
// instruction runs at a quarter of the rate (x's staging takes 32 of them per chunk).
inline constexpr float kRoundingOffset = 12582912.0f;  // 1.5 * 2^23
EXACTQ_HD std::int32_t round_to_integer(float v) {
  return std::int32_t(bits_from_float(add(v, kRoundingOffset)) - bits_from_float(kRoundingOffset));
}
// X_i: the scaled value rounded half to even (|x| < 2^(E-126) keeps it at most 2^22: the largest
// x of a chunk can round up to it). A non-finite chunk's X are 0: its u is NaN, so A and S are
// NaN whatever the sums are.
EXACTQ_HD std::int32_t exact_integer(float x, int e) {
  return e >= kExactNonFinite ? 0 : round_to_integer(exact_scaled(x, e));
}
// u = 2^(E - 148): exact, subnormal for E < 22; a quiet NaN for a non-finite chunk.
EXACTQ_HD float exact_unscale(int e) { return e >= kExactNonFinite ? float_from_bits(0x7fc00000u) : exact_pow2(e - kExactScale); }
// An exact integer sum as an f32, rounded once to nearest even.
EXACTQ_HD float exact_float(std::int64_t sum) {
#if defined(__CUDA_ARCH__)
  return __ll2float_rn(sum);
#else
  return static_cast<float>(sum);
#endif
}
EXACTQ_HD float exact_float(std::int32_t sum) {
#if defined(__CUDA_ARCH__)
  return __int2float_rn(sum);
#else
  return static_cast<float>(sum);
#endif
}
// A or S: the rounded sum times u, which rounds again only where the result is subnormal.
EXACTQ_HD float chunk_value(float rounded_sum, float unscale) { return mul(rounded_sum, unscale); }
EXACTQ_HD float exact_chunk_value(std::int64_t sum, int e) { return chunk_value(exact_float(sum), exact_unscale(e)); }
// X as three signed bytes, X = d0 + 2^8 d1 + 2^16 d2 (d2 in [-64, 64]): the operands of a
// byte-wise integer dot (dp4a).
EXACTQ_HD void exact_digits(std::int32_t x, std::int32_t (&d)[3]) {
  d[0] = std::int32_t(std::int8_t(std::uint8_t(x & 0xff)));
  d[1] = std::int32_t(std::int8_t(std::uint8_t(((x - d[0]) >> 8) & 0xff)));
  d[2] = (x - d[0] - 256 * d[1]) >> 16;
}
// The same three digits as bytes 0, 1 and 2 of one word (two's complement), in two operations:
// adding 0x8080 carries out of a byte exactly where exact_digits borrows from the next digit, and
// the xor takes the 128 back off the two low bytes.
EXACTQ_HD std::uint32_t exact_digit_bytes(std::int32_t x) { return (std::uint32_t(x) + 0x8080u) ^ 0x8080u; }

// The facts of one chunk of x that every row shares: X (into `integers`), S and u. Kernels
// compute them once per vector; the GPU's warp-parallel staging computes the same values.
struct ChunkFacts {
  float sum;      // S
  float unscale;  // u
};
EXACTQ_HD ChunkFacts exact_chunk(const float* x, std::int32_t* integers) {
  const int e = exact_exponent(chunk_max_abs_bits(x));
  // exact_integer for each value, with the factors computed once: for E >= 21 (every chunk whose
  // largest |x| is at least 2^-106) exact_scaled's second factor is 1, and the multiply is skipped.
  const int t = kExactScale - e;
  const float first = exact_pow2(t < 127 ? t : 127), second = exact_pow2(t < 127 ? 0 : t - 127);
  std::int32_t total = 0;  // |sum X| <= 2^27
  for (int i = 0; i < kChunkValues; ++i) {
    const float scaled = t <= 127 ? mul(x[i], first) : mul(mul(x[i], first), second);
    integers[i] = e >= kExactNonFinite ? 0 : round_to_integer(scaled);
    total += integers[i];
  }
  const float u = exact_unscale(e);
  return {chunk_value(exact_float(total), u), u};
}

// ---- exact_chunk's X, S and u in fewer operations (x's staging on the GPU) -------------------
// tests/cpu (StagedChunkEqualsExactChunk) checks these pieces against exact_chunk bit for bit.
// - E from the largest 16-bit pattern, two values per operation (max_abs_halves_*): bf16 and f16
//   order magnitudes as their patterns do, infinity and NaN above every finite value, and
//   widening is monotone, so the widened largest pattern has chunk_max_abs_bits's exponent field.
// - X_i by one fma (staged_integer_bits): fma(x, 2^t, 1.5 * 2^23) rounds x * 2^t + 1.5 * 2^23
//   once, which is round_to_integer(exact_scaled(x, E)) wherever x * 2^t is representable;
//   where it is not, |x * 2^t| < 2^-126 and both give the offset itself (X = 0). The pattern is
//   kept, offset included: X is the pattern minus kRoundingOffsetBits (mod 2^32).
// - A chunk with E < 21 (t > 127, every |x| below 2^-106) multiplies its values by 2^127 first,
//   exactly (the product is below 2^21), and uses 2^(t - 127); a non-finite chunk takes its
//   values as 0 (X = 0). Both are "rare", a branch per chunk, not a select per value.
// - The digits: exact_digit_bytes(X) = (X + 0x8080) ^ 0x8080, i.e. the pattern plus
//   kStagedDigitBias, the xor applied once per word of four packed digit-0 or digit-1 bytes.
// - sum X: the patterns' sum minus count * kRoundingOffsetBits, in wrapping 32-bit arithmetic
//   (|sum X| <= 2^27, so the wrapped result is the sum).
inline constexpr std::uint32_t kRoundingOffsetBits = 0x4b400000u;  // the pattern of kRoundingOffset
inline constexpr std::uint32_t kStagedDigitBias = 0x8080u - kRoundingOffsetBits;  // mod 2^32
inline constexpr std::uint32_t kStagedDigitFlip = 0x80808080u;
struct StagingScale {
  float factor;  // 2^t, or 2^(t - 127) for a rare chunk with E < 21
  bool rare;     // E < 21 or non-finite
  bool non_finite;
};
EXACTQ_HD StagingScale staging_scale(int e) {
  const int t = kExactScale - e;  // >= -106: E <= 254 for a finite chunk
  if (e >= kExactNonFinite) return {1.0f, true, true};
  if (t > 127) return {pow2(t - 127), true, false};
  return {pow2(t), false, false};
}
template <bool RARE>
EXACTQ_HD std::uint32_t staged_integer_bits(float x, StagingScale s) {
  if constexpr (RARE) x = s.non_finite ? 0.0f : mul(x, pow2(127));
  return bits_from_float(fma(x, s.factor, kRoundingOffset));
}
EXACTQ_HD std::int32_t staged_integer(std::uint32_t bits) { return std::int32_t(bits - kRoundingOffsetBits); }
EXACTQ_HD std::int32_t staged_sum(std::uint32_t bits_sum, int count) {
  return std::int32_t(bits_sum - std::uint32_t(count) * kRoundingOffsetBits);
}
// Two 16-bit |x| patterns per word, the larger of each half so far; start from 0, end with _end.
EXACTQ_HD std::uint32_t max_abs_halves_step(std::uint32_t m, std::uint32_t word) {
  const std::uint32_t a = word & 0x7fff7fffu;
#if defined(__CUDA_ARCH__)
  return __vmaxu2(m, a);
#else
  const std::uint32_t low = (m & 0xffffu) > (a & 0xffffu) ? (m & 0xffffu) : (a & 0xffffu);
  const std::uint32_t high = (m >> 16) > (a >> 16) ? (m >> 16) : (a >> 16);
  return low | (high << 16);
#endif
}
EXACTQ_HD std::uint32_t max_abs_halves_end(std::uint32_t m) {
  return (m & 0xffffu) > (m >> 16) ? (m & 0xffffu) : (m >> 16);
}
// The staged form of one chunk given E, as the GPU computes it value by value (the test's subject).
EXACTQ_HD ChunkFacts staged_chunk(const float* x, int e, std::int32_t* integers) {
  const StagingScale s = staging_scale(e);
  std::uint32_t bits_sum = 0;
  for (int i = 0; i < kChunkValues; ++i) {
    const std::uint32_t bits = s.rare ? staged_integer_bits<true>(x[i], s) : staged_integer_bits<false>(x[i], s);
    integers[i] = staged_integer(bits);
    bits_sum += bits;
  }
  const float u = exact_unscale(e);
  return {chunk_value(exact_float(staged_sum(bits_sum, kChunkValues)), u), u};
}

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

}  // namespace exactq::order
