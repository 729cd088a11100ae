// The exact integer chunk dot (docs/design.md §3.1; src/order/qmv.h, exact_*), before any kernel
// computes qmv with it. Each function is checked bitwise against an oracle written here in double
// arithmetic, which holds every intermediate exactly (a float times a power of two, a 36-bit
// integer): the scaling and its rounding to an integer, the digits, and the chunk value's two
// roundings (float(D), then its product with 2^(E-148), which rounds only when subnormal), on
// random chunks over the whole f32 range (tiny, subnormal, huge, mixed).
// Control: truncating X instead of rounding it must disagree with the oracle on the same data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "order/qmv.h"
#include "test_util.h"

namespace exactq::test {
namespace {

// 32 values whose magnitudes span `decades` binary orders below 2^top, with random signs and
// some exact zeros; top may put the chunk in the subnormal range or near the f32 maximum.
std::vector<float> random_chunk(std::mt19937_64& rng, int top, int decades) {
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(top - decades, top - 1);
  std::uniform_int_distribution<int> coin(0, 15);
  std::vector<float> x(order::kLanes);
  for (float& v : x) {
    const int c = coin(rng);
    v = c == 0 ? 0.0f : static_cast<float>(std::ldexp(mantissa(rng), exponent(rng)));  // rounds to f32 (may go subnormal)
    if (c % 2) v = -v;
  }
  return x;
}

std::uint32_t max_abs_bits(const std::vector<float>& x) {
  std::uint32_t m = 0;
  for (float v : x) m = std::max(m, f32_bits(v) & 0x7fffffffu);
  return m;
}

// The oracle's E, X and A.
int oracle_exponent(const std::vector<float>& x) {
  const int field = int(max_abs_bits(x) >> 23);
  return field < 1 ? 1 : field;
}
std::int64_t oracle_integer(float x, int e) {
  return static_cast<std::int64_t>(std::nearbyint(std::ldexp(double(x), 148 - e)));  // exact product, then RNE
}
// float(D) (|D| < 2^53 is exact in double, then one rounding to f32), then the product with
// 2^(E-148), exact in double, rounded to f32: the contract's two IEEE operations.
float oracle_chunk_value(std::int64_t dot, int e) {
  const float d = static_cast<float>(double(dot));
  return static_cast<float>(std::ldexp(double(d), e - 148));
}

struct Range {
  int top, decades;
};
// The ranges: ordinary activations, wide spreads, near the top of f32, and chunks small enough
// that E < 22 (the unscale factor is subnormal) or that hold subnormals.
constexpr Range kRanges[] = {{4, 8}, {2, 30}, {127, 12}, {-100, 20}, {-118, 12}, {-126, 24}, {-140, 9}};

TEST(ExactChunkDot, IntegersDigitsAndValueMatchDoubleOracle) {
  for (std::uint64_t seed : seeds_with_fresh({7, 8})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> code(0, 255);
    std::int64_t chunks = 0, small_e = 0, subnormal_results = 0, truncation_differs = 0;
    for (const Range r : kRanges) {
      for (int trial = 0; trial < 400; ++trial) {
        const std::vector<float> x = random_chunk(rng, r.top, r.decades);
        const int e = order::exact_exponent(max_abs_bits(x));
        ASSERT_EQ(e, oracle_exponent(x));
        std::int64_t dot = 0, want_dot = 0;
        for (int i = 0; i < order::kLanes; ++i) {
          const std::int32_t big = order::exact_integer(x[i], e);
          const std::int64_t want = oracle_integer(x[i], e);
          ASSERT_EQ(std::int64_t(big), want) << "x = " << x[i] << ", E = " << e;
          ASSERT_LE(std::llabs(want), 1LL << 22) << "x = " << x[i] << ", E = " << e;
          std::int32_t d[3];
          order::exact_digits(big, d);
          ASSERT_EQ(d[0] + 256 * d[1] + 65536 * d[2], big);
          ASSERT_GE(d[0], -128);
          ASSERT_LE(d[0], 127);
          ASSERT_GE(d[1], -128);
          ASSERT_LE(d[1], 127);
          ASSERT_GE(d[2], -64);
          ASSERT_LE(d[2], 64);
          const std::uint32_t bytes = order::exact_digit_bytes(big);
          for (int b = 0; b < 3; ++b) ASSERT_EQ(std::int32_t(std::int8_t(std::uint8_t(bytes >> (8 * b)))), d[b]) << "digit " << b;
          const int q = code(rng);
          dot += std::int64_t(q) * big;
          want_dot += q * want;
          truncation_differs += static_cast<std::int64_t>(std::trunc(std::ldexp(double(x[i]), 148 - e))) != want;
        }
        // exact_chunk (what the kernels call) gives the same X, and S from their exact sum.
        std::int32_t integers[order::kLanes];
        const order::ChunkFacts facts = order::exact_chunk(x.data(), integers);
        std::int64_t sum = 0;
        for (int i = 0; i < order::kLanes; ++i) {
          ASSERT_EQ(std::int64_t(integers[i]), oracle_integer(x[i], e)) << "x = " << x[i] << ", E = " << e;
          sum += integers[i];
        }
        ASSERT_EQ(f32_bits(facts.sum), f32_bits(oracle_chunk_value(sum, e)));
        const float a = order::exact_chunk_value(dot, e);
        const float want_a = oracle_chunk_value(want_dot, e);
        ASSERT_EQ(f32_bits(a), f32_bits(want_a)) << "D = " << dot << ", E = " << e;
        ++chunks;
        small_e += e < 22;
        subnormal_results += want_a != 0.0f && std::fabs(want_a) < std::numeric_limits<float>::min();
      }
    }
    // The data reached the ranges the contract is careful about, and the checks can fail: the
    // truncating variant of X disagrees with the oracle on this data.
    EXPECT_GT(small_e, 0) << "no chunk had E < 22";
    EXPECT_GT(subnormal_results, 0) << "no chunk value was subnormal";
    EXPECT_GT(truncation_differs, chunks) << "truncation and rounding agreed almost everywhere";
  }
}

// The digits, as exact_digits defines them and as the GPU stages them (exact_digit_bytes), on every
// X near the borrows of both low digits and at the ends of the range.
TEST(ExactChunkDot, DigitBytesEqualDigitsAcrossBorrows) {
  std::vector<std::int32_t> xs;
  for (std::int32_t x = -70000; x <= 70000; ++x) xs.push_back(x);
  for (std::int32_t edge : {(1 << 22) - 1, -((1 << 22) - 1), (1 << 22) - 128, -(1 << 22) + 127, (1 << 22) - 32896, -(1 << 22) + 32896})
    xs.push_back(edge);
  std::int64_t negative_high = 0;
  for (std::int32_t x : xs) {
    std::int32_t d[3];
    order::exact_digits(x, d);
    ASSERT_EQ(d[0] + 256 * d[1] + 65536 * d[2], x);
    const std::uint32_t bytes = order::exact_digit_bytes(x);
    for (int b = 0; b < 3; ++b)
      ASSERT_EQ(std::int32_t(std::int8_t(std::uint8_t(bytes >> (8 * b)))), d[b]) << "X = " << x << ", digit " << b;
    negative_high += d[2] < 0;
  }
  EXPECT_GT(negative_high, 0);
}

// Ties in X round to even, as rint does: x * 2^(148 - E) = k + 1/2 exactly.
TEST(ExactChunkDot, HalfwayScaledValuesRoundToEven) {
  for (const int e : {1, 21, 22, 127, 150, 254}) {
    for (const std::int64_t k : {0LL, 1LL, 2LL, 7LL, 1000LL, (1LL << 21) + 1}) {
      const float x = static_cast<float>(std::ldexp(double(k) + 0.5, e - 148));
      if (std::ldexp(double(x), 148 - e) != double(k) + 0.5) continue;  // not representable as f32 there
      const std::int32_t want = std::int32_t(k % 2 == 0 ? k : k + 1);
      EXPECT_EQ(order::exact_integer(x, e), want) << "k = " << k << ", E = " << e;
      EXPECT_EQ(order::exact_integer(-x, e), -want) << "k = " << k << ", E = " << e;
    }
  }
}

// The largest x of a binade, (2 - 2^-23) * 2^(E-127), scales to 2^22 - 1/4 and rounds up to 2^22:
// the bound |X| <= 2^22 is reached, and exact_chunk agrees with exact_integer there.
TEST(ExactChunkDot, LargestValueOfABinadeRoundsUpToTwoToThe22) {
  for (const int e : {2, 21, 22, 100, 148, 200, 254}) {
    const float x = static_cast<float>(std::ldexp(2.0 - std::ldexp(1.0, -23), e - 127));
    EXPECT_EQ(order::exact_exponent(f32_bits(x)), e);
    EXPECT_EQ(order::exact_integer(x, e), 1 << 22) << "E = " << e;
    EXPECT_EQ(order::exact_integer(-x, e), -(1 << 22)) << "E = " << e;
    std::vector<float> chunk(order::kLanes, 0.0f);
    chunk[3] = x, chunk[7] = -x, chunk[9] = x / 3;
    std::int32_t integers[order::kLanes];
    const order::ChunkFacts f = order::exact_chunk(chunk.data(), integers);
    for (int i = 0; i < order::kLanes; ++i) EXPECT_EQ(integers[i], order::exact_integer(chunk[i], e)) << "E = " << e;
    EXPECT_EQ(f32_bits(f.unscale), f32_bits(order::exact_pow2(e - 148)));
    EXPECT_EQ(f32_bits(f.sum), f32_bits(order::exact_chunk_value(integers[9], e)));  // x and -x cancel
  }
}

// A chunk holding a NaN or an infinity has E = 255: its value is NaN, and its X are 0.
TEST(ExactChunkDot, NonFiniteChunkIsNaN) {
  for (const float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> x(order::kLanes, 1.5f);
    x[13] = bad;
    const int e = order::exact_exponent(max_abs_bits(x));
    EXPECT_EQ(e, order::kExactNonFinite);
    EXPECT_EQ(order::exact_integer(x[0], e), 0);
    EXPECT_EQ(order::exact_integer(bad, e), 0);
    EXPECT_TRUE(std::isnan(order::exact_chunk_value(12345, e)));
  }
}

// The GPU's staged form (order::staged_*, max_abs_halves_*) gives exact_chunk's X, S and u, and
// exact_digit_bytes' digits, bit for bit: on f32 chunks over every range, on the same chunks
// rounded to bf16 and to f16 (E then from their 16-bit patterns, two to a word), on values that
// scale to k + 1/2, and on non-finite chunks. Control: with a factor that is not a power of two,
// one fma and a multiply then an add differ somewhere on this data, so the data does tell one
// rounding from two.
struct Halves {
  std::vector<float> widened;
  std::uint32_t raw[order::kLanes / 2];
};
Halves to_halves(const std::vector<float>& x, bool f16) {
  Halves h{std::vector<float>(x.size()), {}};
  for (int i = 0; i < order::kLanes; ++i) {
    const std::uint16_t bits = f16 ? ref_f32_to_f16(x[i]) : ref_f32_to_bf16(x[i]);
    h.widened[i] = f16 ? ref_f16_to_f32(bits) : ref_bf16_to_f32(bits);
    h.raw[i / 2] |= std::uint32_t(bits) << (16 * (i % 2));
  }
  return h;
}
void expect_staged_equals_exact(const std::vector<float>& x, std::uint32_t max_abs_pattern, const char* what) {
  std::int32_t want[order::kLanes], got[order::kLanes];
  const order::ChunkFacts w = order::exact_chunk(x.data(), want);
  const int e = order::exact_exponent(max_abs_pattern);
  const order::ChunkFacts g = order::staged_chunk(x.data(), e, got);
  const order::StagingScale s = order::staging_scale(e);
  for (int i = 0; i < order::kLanes; ++i) {
    ASSERT_EQ(got[i], want[i]) << what << ": x = " << x[i] << ", E = " << e;
    // The digits from the pattern, before the per-word flip of bytes 0 and 1.
    const std::uint32_t bits = s.rare ? order::staged_integer_bits<true>(x[i], s) : order::staged_integer_bits<false>(x[i], s);
    const std::uint32_t digits = (bits + order::kStagedDigitBias) ^ (order::kStagedDigitFlip & 0xffffu);
    ASSERT_EQ(digits & 0xffffffu, order::exact_digit_bytes(want[i]) & 0xffffffu) << what << ": x = " << x[i];
  }
  ASSERT_EQ(f32_bits(g.sum), f32_bits(w.sum)) << what;
  ASSERT_EQ(f32_bits(g.unscale), f32_bits(w.unscale)) << what;
}
std::uint32_t widened_max_bits(std::uint32_t pattern, bool f16) {
  return f16 ? f32_bits(ref_f16_to_f32(std::uint16_t(pattern))) : pattern << 16;
}

TEST(ExactChunkDot, StagedChunkEqualsExactChunk) {
  for (std::uint64_t seed : seeds_with_fresh({11, 12})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    std::int64_t chunks = 0, small_e = 0, double_rounding_differs = 0;
    auto check = [&](const std::vector<float>& x) {
      expect_staged_equals_exact(x, max_abs_bits(x), "f32");
      for (const bool f16 : {false, true}) {
        const Halves h = to_halves(x, f16);
        std::uint32_t m = 0;
        for (const std::uint32_t word : h.raw) m = order::max_abs_halves_step(m, word);
        const std::uint32_t widened = widened_max_bits(order::max_abs_halves_end(m), f16);
        ASSERT_EQ(widened >> 23, max_abs_bits(h.widened) >> 23) << (f16 ? "f16" : "bf16");
        expect_staged_equals_exact(h.widened, widened, f16 ? "f16" : "bf16");
      }
      const int e = order::exact_exponent(max_abs_bits(x));
      small_e += e < 21;
      ++chunks;
      if (e < order::kExactNonFinite && e >= 21) {
        const float factor = order::mul(order::pow2(order::kExactScale - e), 1.0f + std::ldexp(1.0f, -20));
        for (float v : x)
          double_rounding_differs += f32_bits(order::fma(v, factor, order::kRoundingOffset)) !=
                                     f32_bits(order::add(order::mul(v, factor), order::kRoundingOffset));
      }
    };
    for (const Range r : kRanges)
      for (int trial = 0; trial < 300; ++trial) check(random_chunk(rng, r.top, r.decades));
    // Values at k + 1/2 after scaling (ties to even) beside the chunk's largest value, then the
    // same chunk with a NaN or an infinity in it.
    std::uniform_int_distribution<int> exponent(-120, 120), index(1, order::kLanes - 1);
    std::uniform_int_distribution<std::int64_t> k(0, (1 << 21) - 1);
    for (int trial = 0; trial < 300; ++trial) {
      const int top = exponent(rng);  // the largest value 1.5 * 2^top: E = top + 127
      std::vector<float> x(order::kLanes, 0.0f);
      x[0] = std::ldexp(1.5f, top);
      for (int i = 1; i < order::kLanes; ++i)
        x[i] = static_cast<float>(std::ldexp(double(k(rng)) + 0.5, top + 127 - order::kExactScale)) * (i % 2 ? -1.0f : 1.0f);
      check(x);
      x[index(rng)] = trial % 3 == 0 ? std::numeric_limits<float>::quiet_NaN()
                                     : (trial % 3 == 1 ? std::numeric_limits<float>::infinity()
                                                       : -std::numeric_limits<float>::infinity());
      check(x);
    }
    EXPECT_GT(small_e, 0) << "no finite chunk took the rare branch (E < 21)";
    EXPECT_GT(double_rounding_differs, chunks / 10) << "one rounding and two agreed almost everywhere";
  }
}

}  // namespace
}  // namespace exactq::test
