// exactq's f16/bf16 <-> f32 conversions (include/exactq/dtype.h) against independent oracles:
// the compiler's _Float16 (or F16C) for f16, a double-arithmetic nearest-even search for bf16.
// Widening is checked on all 65536 patterns; narrowing on random f32 patterns from every exponent
// range plus constructed ties and boundaries. Each identity check carries a negative control showing the
// inputs really exercise the rounding (a wrong rounding rule must be caught by the same inputs).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "exactq/dtype.h"
#include "test_util.h"

namespace exactq::test {
namespace {

// ---- sample f32 inputs for narrowing -----------------------------------------------------------

// Random patterns from every exponent range, both signs, plus patterns that sit exactly on a
// rounding tie, or one unit either side of it, at every possible rounding position p (so the
// ties of every f16 subnormal step and of the normal 13-bit cut are all present), plus boundaries.
std::vector<float> narrowing_samples(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> out;
  auto push_bits = [&](std::uint32_t u) {
    const float f = f32_from(u);
    if (!std::isnan(f)) out.push_back(f);
  };
  for (int i = 0; i < (1 << 20); ++i) push_bits(std::uint32_t(rng()));  // uniform over all patterns
  for (int i = 0; i < (1 << 20); ++i) {                                  // the f16-relevant exponents
    const std::uint32_t exp = 96 + std::uint32_t(rng() % 50);            // 2^-31 .. 2^18
    push_bits(std::uint32_t(rng() & 0x807fffffu) | (exp << 23));
  }
  for (std::uint32_t exp = 0; exp < 255; ++exp)
    for (int p = 1; p <= 23; ++p)
      for (int r = 0; r < 4; ++r) {
        const std::uint32_t high = std::uint32_t(rng()) & (0x7fffffu & ~((1u << p) - 1u));
        const std::uint32_t tie = high | (1u << (p - 1));
        for (std::uint32_t mant : {tie, tie - 1, tie + 1, high})
          for (std::uint32_t sign : {0u, 0x80000000u}) push_bits(sign | (exp << 23) | (mant & 0x7fffffu));
      }
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, FLT_MIN, FLT_TRUE_MIN,
                            65504.0f, 65520.0f, std::nextafter(65520.0f, 0.0f), std::nextafter(65520.0f, INFINITY),
                            65536.0f, 65519.99f, std::ldexp(1.0f, -14), std::nextafter(std::ldexp(1.0f, -14), 0.0f),
                            std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::nextafter(std::ldexp(1.0f, -25), 0.0f),
                            std::nextafter(std::ldexp(1.0f, -25), 1.0f), std::ldexp(1.5f, -25), std::ldexp(1.5f, -24),
                            std::ldexp(1023.5f, -24), std::ldexp(2047.5f, -25), 1.0f, 1.0f + std::ldexp(1.0f, -11),
                            1.0f + std::ldexp(3.0f, -11), 1.0f + std::ldexp(1.0f, -8), 1.0f + std::ldexp(3.0f, -8),
                            std::nextafter(FLT_MAX, 0.0f),
                            f32_from(0x7f7f8000u) /* bf16 overflow tie */, f32_from(0x7f7f7fffu)};
  for (float s : specials) {
    out.push_back(s);
    out.push_back(-s);
  }
  return out;
}

// Deliberately wrong narrowings, used as negative controls: the samples must expose them.
std::uint16_t f16_truncating(float f) {  // round toward zero: differs wherever rounding goes up
  const float a = std::fabs(f);
  const std::uint16_t bits = ref_f32_to_f16(f);
  if (std::fabs(ref_f16_to_f32(bits)) > a && std::isfinite(a)) return std::uint16_t(bits - 1);  // a step toward zero
  return bits;
}
std::uint16_t bf16_ties_away(float f) {  // ties away from zero instead of to even
  const std::uint32_t u = f32_bits(f);
  if ((u & 0xffffu) == 0x8000u) return std::uint16_t((u >> 16) + 1);
  return ref_f32_to_bf16(f);
}

// ---- widening: all 65536 patterns --------------------------------------------------------------

TEST(DType, F16ToF32MatchesFloat16OnEveryPattern) {
  int mismatches = 0, nans = 0, ftz_would_differ = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_to_f32(std::uint16_t(h));
    const float want = ref_f16_to_f32(std::uint16_t(h));
    if (std::isnan(want)) {
      ++nans;
      EXPECT_TRUE(std::isnan(got)) << "pattern 0x" << std::hex << h;
      continue;
    }
    if (f32_bits(got) != f32_bits(want)) {
      if (++mismatches < 10) ADD_FAILURE() << std::hex << "f16 0x" << h << ": got 0x" << f32_bits(got) << ", want 0x" << f32_bits(want);
    }
    // Negative control: a flush-to-zero widening would be wrong on every subnormal but zero.
    const bool subnormal = (h & 0x7c00u) == 0 && (h & 0x3ffu) != 0;
    if (subnormal) ftz_would_differ += f32_bits(want) != f32_bits(std::signbit(want) ? -0.0f : 0.0f);
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(nans, 2 * 1023);  // exponent 31 with a non-zero mantissa, both signs
  EXPECT_EQ(ftz_would_differ, 2 * 1023);
}

TEST(DType, Bf16ToF32MatchesFieldDecodingOnEveryPattern) {
  int mismatches = 0, nans = 0, ftz_would_differ = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float got = bf16_to_f32(std::uint16_t(h));
    const float want = ref_bf16_to_f32(std::uint16_t(h));
    if (std::isnan(want)) {
      ++nans;
      EXPECT_TRUE(std::isnan(got)) << "pattern 0x" << std::hex << h;
      continue;
    }
    if (f32_bits(got) != f32_bits(want) && ++mismatches < 10)
      ADD_FAILURE() << std::hex << "bf16 0x" << h << ": got 0x" << f32_bits(got) << ", want 0x" << f32_bits(want);
    // Negative control: a flush-to-zero widening would be wrong on every subnormal but zero.
    const bool subnormal = (h & 0x7f80u) == 0 && (h & 0x7fu) != 0;
    if (subnormal) ftz_would_differ += f32_bits(want) != f32_bits(std::signbit(want) ? -0.0f : 0.0f);
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(nans, 2 * 127);
  EXPECT_EQ(ftz_would_differ, 2 * 127);
}

// Widening then narrowing is the identity on every non-NaN pattern (both directions checked
// against the oracles above; this ties them together on the full domain).
TEST(DType, RoundTripIsIdentityOnEveryNonNanPattern) {
  int f16_bad = 0, bf16_bad = 0, crossed = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto p = std::uint16_t(h);
    if (!std::isnan(ref_f16_to_f32(p))) f16_bad += f32_to_f16(f16_to_f32(p)) != p;
    if (!std::isnan(ref_bf16_to_f32(p))) bf16_bad += f32_to_bf16(bf16_to_f32(p)) != p;
    // Negative control: widening as one format and narrowing as the other is not the identity.
    if (!std::isnan(ref_bf16_to_f32(p))) crossed += f32_to_f16(bf16_to_f32(p)) != p;
  }
  EXPECT_EQ(f16_bad, 0);
  EXPECT_EQ(bf16_bad, 0);
  EXPECT_GT(crossed, 60000);
}

// ---- narrowing -----------------------------------------------------------------------------

TEST(DType, F32ToF16MatchesFloat16) {
  for (std::uint64_t seed : seeds_with_fresh({1, 0xfeedf00d})) {
    SCOPED_TRACE(seed_note(seed));
    const std::vector<float> samples = narrowing_samples(seed);
    std::int64_t mismatches = 0, truncation_caught = 0, subnormal_results = 0, overflow_results = 0;
    for (float f : samples) {
      const std::uint16_t got = f32_to_f16(f);
      const std::uint16_t want = ref_f32_to_f16(f);
      if (got != want && ++mismatches < 10)
        ADD_FAILURE() << std::hexfloat << f << " (0x" << std::hex << f32_bits(f) << "): got 0x" << got << ", want 0x" << want;
      truncation_caught += f16_truncating(f) != got;
      subnormal_results += (want & 0x7c00u) == 0 && (want & 0x3ffu) != 0;
      overflow_results += (want & 0x7fffu) == 0x7c00u && std::isfinite(f);
    }
    EXPECT_EQ(mismatches, 0);
    // Negative control and coverage: the samples hit subnormal results and overflow, and a
    // round-toward-zero conversion is caught by them.
    EXPECT_GT(truncation_caught, 1000);
    EXPECT_GT(subnormal_results, 1000);
    EXPECT_GT(overflow_results, 1000);
  }
}

TEST(DType, F32ToF16Boundaries) {
  // Spelled out from IEEE binary16 (independent of the sampler): max finite 65504, the overflow
  // tie at 65520 goes to infinity (ties to even: 65504 is odd), smallest subnormal 2^-24, and
  // 2^-25 is a tie between 0 and 2^-24 that goes to the even 0.
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bffu);
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7bffu);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00u);
  EXPECT_EQ(f32_to_f16(-65520.0f), 0xfc00u);
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00u);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001u);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000u);
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001u);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002u);  // 1.5 steps: tie to even 2
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -26)), 0x8000u);  // signed zero survives
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400u);   // smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(2047.0f, -25)), 0x0400u); // 1023.5 steps rounds up into the normals
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);  // tie to even (down)
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02u);  // tie to even (up)
}

TEST(DType, F32ToBf16MatchesNearestEven) {
  for (std::uint64_t seed : seeds_with_fresh({2, 0xb16b00b5})) {
    SCOPED_TRACE(seed_note(seed));
    const std::vector<float> samples = narrowing_samples(seed);
    std::int64_t mismatches = 0, ties_caught = 0, overflow_results = 0;
    for (float f : samples) {
      const std::uint16_t got = f32_to_bf16(f);
      const std::uint16_t want = ref_f32_to_bf16(f);
      if (got != want && ++mismatches < 10)
        ADD_FAILURE() << std::hexfloat << f << " (0x" << std::hex << f32_bits(f) << "): got 0x" << got << ", want 0x" << want;
      ties_caught += bf16_ties_away(f) != got;
      overflow_results += (want & 0x7fffu) == 0x7f80u && std::isfinite(f);
    }
    EXPECT_EQ(mismatches, 0);
    EXPECT_GT(ties_caught, 300);  // negative control: ties-away rounding must be caught
    EXPECT_GE(overflow_results, 4);
  }
}

TEST(DType, Bf16Boundaries) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80u);
  EXPECT_EQ(f32_to_bf16(f32_from(0x3f808000u)), 0x3f80u);  // tie, even below
  EXPECT_EQ(f32_to_bf16(f32_from(0x3f818000u)), 0x3f82u);  // tie, even above
  EXPECT_EQ(f32_to_bf16(f32_from(0x3f808001u)), 0x3f81u);
  EXPECT_EQ(f32_to_bf16(FLT_MAX), 0x7f80u);                // rounds past the largest bf16
  EXPECT_EQ(f32_to_bf16(f32_from(0x7f7f7fffu)), 0x7f7fu);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80u);
  EXPECT_EQ(f32_to_bf16(FLT_TRUE_MIN), 0x0000u);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000u);
}

TEST(DType, NanBecomesCanonical7fff) {
  for (std::uint64_t seed : seeds_with_fresh({3})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    std::vector<std::uint32_t> nans = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0xffffffffu};
    for (int i = 0; i < 100000; ++i) {
      std::uint32_t mant = std::uint32_t(rng()) & 0x7fffffu;
      if (mant == 0) mant = 1;
      nans.push_back((std::uint32_t(rng()) & 0x80000000u) | 0x7f800000u | mant);
    }
    int bad = 0;
    for (std::uint32_t u : nans) {
      const float f = f32_from(u);
      ASSERT_TRUE(std::isnan(f));
      bad += f32_to_f16(f) != 0x7fffu;
      bad += f32_to_bf16(f) != 0x7fffu;
    }
    EXPECT_EQ(bad, 0);
    // Negative control: infinities are not NaN and must not become 0x7fff.
    EXPECT_NE(f32_to_f16(INFINITY), 0x7fffu);
    EXPECT_NE(f32_to_bf16(INFINITY), 0x7fffu);
    EXPECT_TRUE(std::isnan(f16_to_f32(0x7fffu)));
    EXPECT_TRUE(std::isnan(bf16_to_f32(0x7fffu)));
  }
}

// load_f32/store_f32 are the dtype dispatch the kernels use: same bytes as the oracles.
TEST(DType, LoadStoreDispatchMatchesOracles) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(t));
    EXPECT_EQ(dtype_size(t), ref_size(t));
    std::vector<std::byte> got(1000 * ref_size(t)), want(1000 * ref_size(t));
    for (std::size_t i = 0; i < 1000; ++i) {
      const float v = normal(rng);
      store_f32(got.data(), i, t, v);
      ref_store(want.data(), i, t, v);
    }
    EXPECT_EQ(differing_bytes(got, want), 0);
    int load_bad = 0;
    for (std::size_t i = 0; i < 1000; ++i) load_bad += f32_bits(load_f32(got.data(), i, t)) != f32_bits(ref_load(got.data(), i, t));
    EXPECT_EQ(load_bad, 0);
  }
  // Negative control: the dispatch must distinguish f16 from bf16 (same size, other bytes).
  std::uint16_t a = 0, b = 0;
  store_f32(&a, 0, DType::f16, 1.1f);
  store_f32(&b, 0, DType::bf16, 1.1f);
  EXPECT_NE(a, b);
}

TEST(DType, ParseAndNames) {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) EXPECT_EQ(parse_dtype(to_string(t)), t);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("float16"), DType::f16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  expect_invalid([] { parse_dtype("fp8"); }, "'fp8'");
  expect_invalid([] { parse_dtype(""); }, "''");
}

}  // namespace
}  // namespace exactq::test

// Outputs: every NaN is stored canonically, whatever its payload, so CPU and GPU bytes agree
// (x86 propagates payloads, CUDA does not). Finite values and infinities are stored unchanged.
TEST(DType, StoreCanonicalisesNaNAndKeepsEverythingElse) {
  const std::uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu, 0xffa5a5a5u};
  for (std::uint32_t bits : nans) {
    std::uint32_t out32 = 0;
    std::uint16_t out16 = 0;
    exactq::store_f32(&out32, 0, exactq::DType::f32, __builtin_bit_cast(float, bits));
    EXPECT_EQ(out32, 0x7fffffffu) << std::hex << bits;
    exactq::store_f32(&out16, 0, exactq::DType::f16, __builtin_bit_cast(float, bits));
    EXPECT_EQ(out16, 0x7fffu) << std::hex << bits;
    exactq::store_f32(&out16, 0, exactq::DType::bf16, __builtin_bit_cast(float, bits));
    EXPECT_EQ(out16, 0x7fffu) << std::hex << bits;
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < 100000; ++i) {
    std::uint32_t bits = rng();
    if ((bits & 0x7fffffffu) > 0x7f800000u) continue;  // NaN: covered above
    std::uint32_t out = 0;
    exactq::store_f32(&out, 0, exactq::DType::f32, __builtin_bit_cast(float, bits));
    ASSERT_EQ(out, bits);
  }
}
