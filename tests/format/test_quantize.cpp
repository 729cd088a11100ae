// Affine quantization (src/format/quantize.cpp) against an independent re-derivation of MLX's two
// scale/bias rules, written here from the reference doc (mlx-format-and-kernels.md §1.3):
//   1. lo = min v, hi = max v (GPU rule: hi starts at 0, so hi = max(0, max v));
//   2. s = max((hi - lo)/n, 1e-7) in f32;
//   3. side = |lo| > |hi|; if not side, s = -s; edge = side ? lo : hi;
//   4. q0 = round(edge/s) (GPU: half away from zero; CPU: half to even);
//   5. if q0 != 0: s = edge/q0, bias = edge; else bias = 0;
//   6. q_i = round((v_i - bias)/s), clamped to n (CPU: to [0, n]);
//   7. scales = T(s), biases = T(bias), codes from the f32 s and bias.
// Plus a sound round-trip error bound, the documented edge cases, and the error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "exactq/quantize.h"
#include "test_util.h"

namespace exactq::test {
namespace {

constexpr int kBits[] = {2, 3, 4, 5, 6, 8};
constexpr int kGroups[] = {32, 64, 128};
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

// Rounding of an f32 value to an integer, decided in double (exact for floats).
float round_half_away(float x) {
  const double t = std::trunc(double(x));
  const double d = double(x) - t;
  if (d >= 0.5) return float(t + 1.0);
  if (d <= -0.5) return float(t - 1.0);
  return float(t);
}
float round_half_even(float x) {
  const double f = std::floor(double(x));
  const double d = double(x) - f;
  if (d > 0.5) return float(f + 1.0);
  if (d < 0.5) return float(f);
  return std::fmod(f, 2.0) == 0.0 ? float(f) : float(f + 1.0);
}

struct RefGroup {
  float scale = 0, bias = 0;  // f32, before rounding to the dtype
  std::vector<std::uint32_t> codes;
};

// MLX's rule, step by step as numbered above (all arithmetic in f32).
RefGroup mlx_reference(const float* v, int count, int bits, QuantRule rule) {
  const bool gpu = rule == QuantRule::mlx_gpu;
  const float n = float((1 << bits) - 1);
  auto rnd = [&](float x) { return gpu ? round_half_away(x) : round_half_even(x); };
  // The GPU kernel starts lo at the dtype's max (any start above every value gives the true
  // min) and hi at 0; the CPU uses the true min and max.
  float lo = v[0], hi = gpu ? 0.0f : v[0];
  for (int i = 0; i < count; ++i) {
    if (v[i] < lo) lo = v[i];
    if (v[i] > hi) hi = v[i];
  }
  float s = (hi - lo) / n;
  if (s < 1e-7f) s = 1e-7f;
  const bool side = std::fabs(lo) > std::fabs(hi);
  if (!side) s = -s;
  const float edge = side ? lo : hi;
  const float q0 = rnd(edge / s);
  RefGroup g;
  g.bias = 0.0f;
  if (q0 != 0.0f) {
    s = edge / q0;
    g.bias = edge;
  }
  g.scale = s;
  for (int i = 0; i < count; ++i) {
    float q = rnd((v[i] - g.bias) / s);
    q = std::min(q, n);
    if (!gpu) q = std::max(q, 0.0f);
    // The GPU kernel clamps only from above, because the ratio cannot go below -0.5: check it.
    EXPECT_GE(q, 0.0f) << "negative code before the cast; value " << v[i];
    g.codes.push_back(std::uint32_t(std::max(q, 0.0f)));
  }
  return g;
}

QuantizedMatrix reference_quantize(const std::vector<float>& w, std::int64_t n, std::int64_t k, int bits, int group,
                                   DType dtype, QuantRule rule) {
  QuantizedMatrix q = reference_zeros(n, k, bits, group, dtype);
  const std::int64_t groups = k / group, row_bytes = k * bits / 8;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t g = 0; g < groups; ++g) {
      const RefGroup p = mlx_reference(w.data() + r * k + g * group, group, bits, rule);
      ref_store(q.scales.data(), std::size_t(r * groups + g), dtype, p.scale);
      ref_store(q.biases.data(), std::size_t(r * groups + g), dtype, p.bias);
      for (int i = 0; i < group; ++i) ref_pack(q.packed.data() + r * row_bytes, g * group + i, bits, p.codes[std::size_t(i)]);
    }
  return q;
}

// Random weights whose groups cover the cases where the rules and roundings matter:
// ordinary (normal, some outliers), all negative, all positive, integer grids with exact .5 ties,
// constants (positive, negative, zero), tiny values (the q0 == 0 branch), and straddling groups
// holding an exact 0.
std::vector<float> varied_weights(std::int64_t n, std::int64_t k, int group, int bits, std::mt19937_64& rng) {
  std::vector<float> w(std::size_t(n * k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(std::log(0.003f), std::log(0.3f));
  const int levels = (1 << bits) - 1;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t g0 = 0; g0 < k; g0 += group) {
      float* v = w.data() + r * k + g0;
      const float scale = std::exp(log_scale(rng));
      const int kind = int(rng() % 10);
      for (int i = 0; i < group; ++i) {
        float x = scale * normal(rng);
        switch (kind) {
          case 0: case 1: case 2: if ((rng() & 63) == 0) x *= 8.0f; break;          // ordinary
          case 3: x = -std::fabs(x) - scale * 0.1f; break;                          // all negative
          case 4: x = std::fabs(x) + scale * 0.1f; break;                           // all positive
          case 5: x = std::ldexp(float(rng() % std::uint64_t(2 * levels + 1)), -6); break;  // .5 ties
          case 6: x = -std::ldexp(float(rng() % std::uint64_t(2 * levels + 1)), -6); break;
          case 7: x = 3e-8f * normal(rng); break;                                   // tiny
          case 8: break;                                                            // straddling + 0
          default: x = 0.0f; break;                                                 // filled below
        }
        v[i] = x;
      }
      if (kind == 5 || kind == 6) {  // make both ends of the integer range present
        v[rng() % std::uint64_t(group)] = 0.0f;
        v[rng() % std::uint64_t(group)] = (kind == 5 ? 1.0f : -1.0f) * std::ldexp(float(2 * levels), -6);
      }
      if (kind == 8) v[rng() % std::uint64_t(group)] = 0.0f;
      if (kind == 9) {
        const int which = int(rng() % 3);
        const float c = which == 0 ? 0.0f : which == 1 ? scale : -scale;
        std::fill(v, v + group, c);
      }
    }
  return w;
}

void round_weights_to(std::vector<float>& w, DType dtype) {
  for (float& x : w) x = ref_round_to(x, dtype);
}

// ---- byte-for-byte against the re-derivation ------------------------------------------------

TEST(Quantize, MatchesIndependentMlxRuleByteForByte) {
  for (std::uint64_t seed : seeds_with_fresh({11})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    std::int64_t rules_differ = 0;  // negative control: the GPU and CPU rules give other bytes
    for (int bits : kBits)
      for (int group : kGroups)
        for (DType dtype : kDtypes) {
          SCOPED_TRACE(std::to_string(bits) + "-bit g" + std::to_string(group) + " " + dtype_name(dtype));
          const std::int64_t n = 1 + std::int64_t(rng() % 13), k = group * (1 + std::int64_t(rng() % 6));
          const std::vector<float> w = varied_weights(n, k, group, bits, rng);
          QuantizedMatrix per_rule[2];
          int i = 0;
          for (QuantRule rule : {QuantRule::mlx_gpu, QuantRule::mlx_cpu}) {
            SCOPED_TRACE(rule == QuantRule::mlx_gpu ? "mlx_gpu" : "mlx_cpu");
            const QuantizedMatrix got = quantize(w, n, k, bits, group, dtype, rule);
            const QuantizedMatrix want = reference_quantize(w, n, k, bits, group, dtype, rule);
            EXPECT_EQ(got.n, n);
            EXPECT_EQ(got.k, k);
            EXPECT_EQ(got.bits, bits);
            EXPECT_EQ(got.group, group);
            EXPECT_EQ(got.dtype, dtype);
            EXPECT_EQ(got.packed, want.packed);
            EXPECT_EQ(got.scales, want.scales);
            EXPECT_EQ(got.biases, want.biases);
            EXPECT_NO_THROW(got.view().validate());
            per_rule[i++] = got;
          }
          rules_differ += per_rule[0].packed != per_rule[1].packed || per_rule[0].scales != per_rule[1].scales;
        }
    // Every combination mixes tie groups and all-negative groups, so the rules differ somewhere
    // in nearly all of them; if they never did, the comparison above would prove little.
    EXPECT_GT(rules_differ, 40);
  }
}

// The default rule is the GPU one.
TEST(Quantize, DefaultRuleIsGpu) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::vector<float> w = varied_weights(8, 256, 64, 4, rng);
  const QuantizedMatrix d = quantize(w, 8, 256, 4, 64, DType::bf16);
  const QuantizedMatrix g = quantize(w, 8, 256, 4, 64, DType::bf16, QuantRule::mlx_gpu);
  EXPECT_EQ(d.packed, g.packed);
  EXPECT_EQ(d.scales, g.scales);
  EXPECT_EQ(d.biases, g.biases);
  // Negative control: an all-negative group separates the two rules.
  const std::vector<float> neg(64, -0.25f);
  EXPECT_NE(quantize(neg, 1, 64, 4, 64, DType::bf16).scales,
            quantize(neg, 1, 64, 4, 64, DType::bf16, QuantRule::mlx_cpu).scales);
}

// ---- round-trip accuracy ----------------------------------------------------------------------

// |w - (s_T q + b_T)| for every element, against a bound derived from the rule:
//  * an unclamped code is the nearest grid point to (w - b)/s: error <= |s|/2;
//  * a code of n may have been clamped; the snap makes the ideal ratio at most n + 1 (the edge
//    carries at least half of the range, so |q0| >= n/2 and |q0|/|edge/s0| <= 1 + 1/n), so
//    the error is <= |s|;
//  * (v - b)/s is computed in f32: the ratio may be off by (n + 1) * 2^-22 steps;
//  * the stored scale s_T differs from the f32 s by at most its rounding to T, times q;
//  * b is exact in T when the weights are (it is one of the group's values, or 0).
TEST(Quantize, RoundTripErrorWithinDerivedBound) {
  for (std::uint64_t seed : seeds_with_fresh({21})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    for (QuantRule rule : {QuantRule::mlx_gpu, QuantRule::mlx_cpu})
      for (int bits : kBits)
        for (int group : kGroups)
          for (DType dtype : kDtypes) {
            SCOPED_TRACE(std::to_string(bits) + "-bit g" + std::to_string(group) + " " + dtype_name(dtype) +
                         (rule == QuantRule::mlx_gpu ? " gpu" : " cpu"));
            const std::int64_t n = 6, k = 2 * group;
            std::vector<float> w = varied_weights(n, k, group, bits, rng);
            round_weights_to(w, dtype);
            const QuantizedMatrix q = quantize(w, n, k, bits, group, dtype, rule);
            const double levels = double((1 << bits) - 1);
            const double rel = dtype == DType::f32 ? 0.0 : dtype == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
            const double abs_floor = dtype == DType::f16 ? std::ldexp(1.0, -25) : 0.0;  // f16 subnormal half-step
            const double ratio_slack = (levels + 1) * std::ldexp(1.0, -22);
            std::int64_t violations = 0, off_by_one_caught = 0, checked = 0;
            double worst_fraction = 0;  // error / |s_T|, to show the bound is not vacuous
            for (std::int64_t r = 0; r < n; ++r)
              for (std::int64_t g = 0; g < k / group; ++g) {
                const std::size_t p = std::size_t(r * (k / group) + g);
                const double s_t = ref_load(q.scales.data(), p, dtype);
                const float b_t = ref_load(q.biases.data(), p, dtype);
                // The bias is 0 or exactly one of the group's values.
                const float* v = w.data() + r * k + g * group;
                EXPECT_TRUE(b_t == 0.0f || std::find(v, v + group, b_t) != v + group) << "bias " << b_t;
                const double scale_err = std::max(std::fabs(s_t) * rel / (1 - rel), abs_floor);  // |s_T - s_f|
                const double s_f = std::fabs(s_t) + scale_err;                                     // >= |s_f|
                for (int i = 0; i < group; ++i) {
                  const std::uint32_t code = ref_unpack(q.packed.data() + r * q.k * bits / 8, g * group + i, bits);
                  const double dq = s_t * code + b_t;
                  const double err = std::fabs(double(v[i]) - dq);
                  const double step = code == std::uint32_t(levels) ? 1.0 : 0.5;
                  const double bound = s_f * (step + ratio_slack) + code * scale_err + 1e-30;
                  violations += err > bound;
                  if (err > bound && violations < 5)
                    ADD_FAILURE() << "w=" << v[i] << " code=" << code << " s=" << s_t << " b=" << b_t << " err=" << err
                                  << " bound=" << bound;
                  if (s_t != 0) worst_fraction = std::max(worst_fraction, err / std::fabs(s_t));
                  // Negative control: a code off by one (a wrong rounding) must break the bound
                  // for most elements (all but exact half-way values), wherever the bound is
                  // tight, i.e. where the scale's own rounding (times q) is small.
                  if (code < std::uint32_t(levels) && (code + 1) * scale_err <= 0.25 * s_f) {
                    ++checked;
                    off_by_one_caught += std::fabs(double(v[i]) - (s_t * (code + 1) + b_t)) > bound;
                  }
                }
              }
            EXPECT_EQ(violations, 0);
            EXPECT_GT(worst_fraction, 0.3);  // the errors do reach the scale of a rounding step
            EXPECT_GT(off_by_one_caught, checked / 2);
          }
  }
}

// dequantize() is s*q + b as an f32 multiply then an f32 add.
TEST(Quantize, DequantizeIsMultiplyThenAdd) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::int64_t fma_differs = 0;
  for (DType dtype : kDtypes)
    for (int bits : kBits) {
      const QuantizedMatrix q = random_matrix(9, 256, bits, 64, dtype, rng);
      const std::vector<float> got = dequantize(q.view());
      ASSERT_EQ(got.size(), std::size_t(9 * 256));
      std::int64_t bad = 0;
      for (std::int64_t r = 0; r < 9; ++r)
        for (std::int64_t c = 0; c < 256; ++c) {
          const float s = ref_load(q.scales.data(), std::size_t(r * 4 + c / 64), dtype);
          const float b = ref_load(q.biases.data(), std::size_t(r * 4 + c / 64), dtype);
          const float code = float(ref_unpack(q.packed.data() + r * 256 * bits / 8, c, bits));
          const float prod = s * code;
          const float want = prod + b;
          bad += f32_bits(got[std::size_t(r * 256 + c)]) != f32_bits(want);
          if (dtype == DType::f32) fma_differs += f32_bits(got[std::size_t(r * 256 + c)]) != f32_bits(std::fma(s, code, b));
        }
      EXPECT_EQ(bad, 0) << dtype_name(dtype) << " " << bits << "-bit";
    }
  // Negative control: with f32 scales the fused form rounds differently somewhere.
  EXPECT_GT(fma_differs, 0);
}

// ---- documented edge cases -----------------------------------------------------------------

struct OneGroup {
  float scale, bias;
  std::vector<std::uint32_t> codes;
};
OneGroup quantize_one_group(const std::vector<float>& v, int bits, DType dtype, QuantRule rule) {
  const QuantizedMatrix q = quantize(v, 1, std::int64_t(v.size()), bits, int(v.size()), dtype, rule);
  OneGroup g{ref_load(q.scales.data(), 0, dtype), ref_load(q.biases.data(), 0, dtype), {}};
  for (std::size_t i = 0; i < v.size(); ++i) g.codes.push_back(ref_unpack(q.packed.data(), std::int64_t(i), bits));
  return g;
}

bool all_zero(const std::vector<std::uint32_t>& c) {
  return std::all_of(c.begin(), c.end(), [](std::uint32_t x) { return x == 0; });
}

TEST(Quantize, AllEqualPositiveGroup) {
  // Both rules: s = -1e-7 snapped to c/round(-c*1e7) (about -1e-7), bias = c, codes 0.
  for (DType dtype : kDtypes)
    for (QuantRule rule : {QuantRule::mlx_gpu, QuantRule::mlx_cpu})
      for (float c : {1.0f, 0.375f, 3.0e-5f, 1.2e-7f, 1000.0f}) {
        const float cv = ref_round_to(c, dtype);
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " c=" + std::to_string(cv));
        for (int bits : kBits) {
          const OneGroup g = quantize_one_group(std::vector<float>(64, cv), bits, dtype, rule);
          EXPECT_EQ(f32_bits(g.bias), f32_bits(cv));
          EXPECT_TRUE(all_zero(g.codes));
          EXPECT_TRUE(std::signbit(g.scale)) << g.scale;
          if (dtype == DType::f32) {
            EXPECT_GE(std::fabs(g.scale), 0.5e-7f);
            EXPECT_LE(std::fabs(g.scale), 1.5e-7f);
          }
        }
      }
}

TEST(Quantize, AllEqualNegativeGroupDiffersBetweenRules) {
  for (DType dtype : kDtypes)
    for (float c : {-1.0f, -0.375f, -3.0e-5f, -1000.0f})
      for (int bits : kBits) {
        const float cv = ref_round_to(c, dtype);
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " c=" + std::to_string(cv) + " bits=" + std::to_string(bits));
        const std::vector<float> v(32, cv);
        // GPU: hi starts at 0, so the range is [c, 0]: s = |c|/n, bias = c, codes 0.
        const OneGroup gpu = quantize_one_group(v, bits, dtype, QuantRule::mlx_gpu);
        const float levels = float((1 << bits) - 1);
        EXPECT_EQ(f32_bits(gpu.scale), f32_bits(ref_round_to(-cv / levels, dtype)));
        EXPECT_EQ(f32_bits(gpu.bias), f32_bits(cv));
        EXPECT_TRUE(all_zero(gpu.codes));
        // CPU: the true max is c, so s snaps to about -1e-7, bias = c, codes 0.
        const OneGroup cpu = quantize_one_group(v, bits, dtype, QuantRule::mlx_cpu);
        EXPECT_EQ(f32_bits(cpu.bias), f32_bits(cv));
        EXPECT_TRUE(all_zero(cpu.codes));
        EXPECT_TRUE(std::signbit(cpu.scale));
        EXPECT_NE(f32_bits(gpu.scale), f32_bits(cpu.scale));  // the rules differ here
      }
}

TEST(Quantize, AllZeroGroup) {
  for (DType dtype : kDtypes)
    for (QuantRule rule : {QuantRule::mlx_gpu, QuantRule::mlx_cpu})
      for (int bits : kBits) {
        const std::vector<float> v(128, 0.0f);
        const QuantizedMatrix q = quantize(v, 1, 128, bits, 128, dtype, rule);
        std::vector<std::byte> want_scale(ref_size(dtype));
        ref_store(want_scale.data(), 0, dtype, -1e-7f);  // s = -1e-7 stored in T
        EXPECT_EQ(q.scales, want_scale) << dtype_name(dtype);
        EXPECT_EQ(q.biases, std::vector<std::byte>(ref_size(dtype), std::byte{0}));  // +0
        EXPECT_EQ(q.packed, std::vector<std::uint8_t>(q.packed.size(), 0));
        EXPECT_EQ(dequantize(q.view()), std::vector<float>(128, 0.0f));
      }
  // The stored -1e-7 in f16 is a subnormal: 1e-7 / 2^-24 = 1.68 steps rounds to 2 steps.
  const QuantizedMatrix h = quantize(std::vector<float>(32, 0.0f), 1, 32, 4, 32, DType::f16);
  EXPECT_EQ(ref_load(h.scales.data(), 0, DType::f16), -std::ldexp(2.0f, -24));
}

// A group straddling zero puts 0 on its grid: the code of an exact 0 weight is j = -q0, and
// s*j + bias = 0 up to the one rounding of s = edge/q0 (|s*q0 - edge| <= 2^-24 |edge| exactly).
// In f32 the dequantized value s*j + b is then exactly 0 unless fl(s*q0) != edge, which happens
// for some (edge, q0): the claim "exactly on the grid" holds only up to that last rounding.
TEST(Quantize, StraddlingGroupHasZeroOnTheGrid) {
  for (std::uint64_t seed : seeds_with_fresh({31})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::int64_t groups = 0, exact_zero = 0;
    for (QuantRule rule : {QuantRule::mlx_gpu, QuantRule::mlx_cpu})
      for (int bits : kBits)
        for (int rep = 0; rep < 200; ++rep) {
          std::vector<float> v(64);
          const float scale = std::exp(float(rng() % 1000) / 100.0f - 8.0f);
          for (float& x : v) x = scale * normal(rng);
          const std::size_t zero_at = rng() % 64;
          v[zero_at] = 0.0f;
          v[(zero_at + 1) % 64] = std::fabs(v[(zero_at + 1) % 64]) + scale * 0.01f;  // make sure it straddles
          v[(zero_at + 2) % 64] = -std::fabs(v[(zero_at + 2) % 64]) - scale * 0.01f;
          const OneGroup g = quantize_one_group(v, bits, DType::f32, rule);
          const std::uint32_t j = g.codes[zero_at];
          ++groups;
          // The zero grid point, in exact arithmetic, is off by at most the rounding of s.
          EXPECT_LE(std::fabs(double(g.scale) * j + g.bias), std::ldexp(std::fabs(double(g.bias)), -24))
              << "bits " << bits << " s=" << g.scale << " b=" << g.bias << " j=" << j;
          // Every element's code stays on the grid of the same (s, b), and j is interior or an end.
          EXPECT_LE(j, (1u << bits) - 1);
          const float dq = g.scale * float(j) + g.bias;  // as dequantize computes it
          exact_zero += dq == 0.0f;
          EXPECT_LE(std::fabs(dq), std::ldexp(std::fabs(g.bias), -22));
        }
    // Most groups land exactly; report how many did.
    std::cout << "[ info     ] straddling groups with an exact f32 zero on the grid: " << exact_zero << " of "
              << groups << "\n";
    EXPECT_GT(exact_zero, groups / 2);
  }
}

// ---- errors ----------------------------------------------------------------------------------

TEST(Quantize, NonFiniteWeightThrowsNamingTheIndex) {
  for (float bad : {std::nanf(""), INFINITY, -INFINITY})
    for (QuantRule rule : {QuantRule::mlx_gpu, QuantRule::mlx_cpu}) {
      std::vector<float> w(4 * 128, 0.5f);
      w[2 * 128 + 70] = bad;
      expect_invalid([&] { quantize(w, 4, 128, 4, 64, DType::bf16, rule); }, "[2, 70]");
      w[2 * 128 + 70] = 0.5f;  // control: the same matrix without it is fine
      EXPECT_NO_THROW(quantize(w, 4, 128, 4, 64, DType::bf16, rule));
    }
}

TEST(Quantize, SizeMismatchAndBadShapeThrow) {
  const std::vector<float> w(3 * 128 - 1, 0.1f);
  expect_invalid([&] { quantize(w, 3, 128, 4, 64, DType::f16); }, "383");
  const std::vector<float> w2(3 * 128 + 1, 0.1f);
  expect_invalid([&] { quantize(w2, 3, 128, 4, 64, DType::f16); }, "385");
  const std::vector<float> ok(3 * 128, 0.1f);
  EXPECT_NO_THROW(quantize(ok, 3, 128, 4, 64, DType::f16));
  expect_invalid([&] { quantize(ok, 3, 128, 7, 64, DType::f16); }, "bits = 7");
  expect_invalid([&] { quantize(ok, 3, 128, 4, 48, DType::f16); }, "group = 48");
  expect_invalid([&] { quantize(ok, 1, 384, 4, 128 * 3, DType::f16); }, "group = 384");
  const std::vector<float> w100(100, 0.1f);
  expect_invalid([&] { quantize(w100, 1, 100, 4, 64, DType::f16); }, "K = 100");
}

}  // namespace
}  // namespace exactq::test
