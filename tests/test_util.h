// Helpers shared by the CPU test suites: seeds, and oracles written independently of the code
// under test. Nothing here calls exactq's conversion or packing functions: the f16 oracle is the
// compiler's _Float16 (GCC 12, x86-64), the bf16 oracle decides rounding in double arithmetic,
// and the packer/unpacker move one stream bit at a time.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#if defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#endif
#include <random>
#include <span>
#include <string>
#include <vector>

#include "exactq/dtype.h"
#include "exactq/format.h"
#include "expect_invalid.h"

namespace exactq::test {

// ---- seeds -----------------------------------------------------------------------------------

// A fresh seed per call (std::random_device), unless EXACTQ_TEST_SEED is set: then that value,
// so any failure printed with seed_note() can be replayed exactly.
inline std::uint64_t fresh_seed() {
  if (const char* env = std::getenv("EXACTQ_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  std::random_device rd;
  return (std::uint64_t(rd()) << 32) ^ std::uint64_t(rd());
}

inline std::string seed_note(std::uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay a fresh seed with EXACTQ_TEST_SEED=" + std::to_string(seed) + ")";
}

// Fixed seeds (reproducible baseline) plus one fresh seed (new coverage on every run).
inline std::vector<std::uint64_t> seeds_with_fresh(std::initializer_list<std::uint64_t> fixed) {
  std::vector<std::uint64_t> s(fixed);
  s.push_back(fresh_seed());
  return s;
}

// ---- bit casts -------------------------------------------------------------------------------

inline std::uint32_t f32_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- f16 oracle: the compiler's _Float16 (software conversions in libgcc, IEEE RNE), or where
// the compiler has none on x86 (clang before 15) the F16C instructions (IEEE RNE in hardware) ------

#if defined(__clang__) && __clang_major__ < 15 && defined(__x86_64__)
__attribute__((target("f16c"))) inline float ref_f16_to_f32(std::uint16_t h) { return _cvtsh_ss(h); }
// NaN is not handled here (the conversion keeps the payload and sign); callers never pass one.
__attribute__((target("f16c"))) inline std::uint16_t ref_f32_to_f16(float f) {
  return std::uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
#else
inline float ref_f16_to_f32(std::uint16_t h) {
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
}
// NaN is not handled here (the compiler keeps the payload and sign); callers never pass one.
inline std::uint16_t ref_f32_to_f16(float f) {
  const _Float16 v = static_cast<_Float16>(f);
  std::uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
}
#endif

// ---- bf16 oracle: values from the fields, rounding decided in double -------------------------

// Magnitude of the bf16 pattern m (sign bit clear), from its fields.
inline double bf16_magnitude(std::uint32_t m) {
  const int e = int(m >> 7);
  const int mant = int(m & 0x7f);
  if (e == 0) return std::ldexp(double(mant), -133);  // subnormal: mant * 2^-126 * 2^-7
  return std::ldexp(double(128 + mant), e - 127 - 7);
}

inline float ref_bf16_to_f32(std::uint16_t h) {
  const std::uint32_t m = h & 0x7fffu;
  const bool neg = (h & 0x8000u) != 0;
  if ((m >> 7) == 0xff) {
    if (m & 0x7f) return std::nanf("");
    return neg ? -INFINITY : INFINITY;
  }
  const double v = bf16_magnitude(m);
  return float(neg ? -v : v);  // exact: every bf16 value is an f32 value
}

// Nearest bf16, ties to the even significand, overflow to infinity, NaN to 0x7fff. Decided on
// values in double: bf16 has 8 significant bits, so around |f| in [2^e, 2^(e+1)) its values
// are the multiples of 2^(e-7) (of 2^-133 below the normal range); IEEE rounds as if the
// exponent were unbounded, so a result of 2^128 means infinity.
inline std::uint16_t ref_f32_to_bf16(float f) {
  if (std::isnan(f)) return 0x7fff;
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isinf(f)) return sign | 0x7f80;
  const double a = std::fabs(double(f));
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);                           // a = m * 2^e, m in [0.5, 1)
  const int binade = std::max(e - 1, -126);    // floor(log2 a), clamped to the subnormal step
  const double step = std::ldexp(1.0, binade - 7);
  const double units = std::floor(a / step);  // exact: division by a power of two
  const double below = units * step, above = below + step;
  const double d_below = a - below, d_above = above - a;  // exact in double
  double r;
  if (d_below < d_above) r = below;
  else if (d_above < d_below) r = above;
  else r = std::fmod(units, 2.0) == 0.0 ? below : above;  // the even significand
  if (r >= std::ldexp(1.0, 128)) return sign | 0x7f80;
  return std::uint16_t(sign | (f32_bits(float(r)) >> 16));  // r is a bf16 value: exact in f32
}

// ---- dtype-generic loads/stores through the oracles ------------------------------------------

inline std::size_t ref_size(DType t) { return t == DType::f32 ? 4 : 2; }

inline float ref_load(const std::byte* base, std::size_t i, DType t) {
  if (t == DType::f32) {
    float f;
    std::memcpy(&f, base + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, base + 2 * i, 2);
  return t == DType::f16 ? ref_f16_to_f32(h) : ref_bf16_to_f32(h);
}

inline void ref_store(std::byte* base, std::size_t i, DType t, float v) {
  if (t == DType::f32) {
    const std::uint32_t canonical_nan = 0x7fffffffu;  // design.md §0: every f32 NaN is stored so
    if (std::isnan(v)) std::memcpy(base + 4 * i, &canonical_nan, 4);
    else std::memcpy(base + 4 * i, &v, 4);
    return;
  }
  const std::uint16_t h = t == DType::f16 ? ref_f32_to_f16(v) : ref_f32_to_bf16(v);
  std::memcpy(base + 2 * i, &h, 2);
}

// v rounded to the dtype and widened again.
inline float ref_round_to(float v, DType t) {
  std::byte b[4];
  ref_store(b, 0, t, v);
  return ref_load(b, 0, t);
}

inline const char* dtype_name(DType t) { return t == DType::f32 ? "f32" : t == DType::f16 ? "f16" : "bf16"; }

// ---- packing oracle: one stream bit at a time -------------------------------------------------
// Stream bit j is bit j%8 of byte j/8; code k occupies stream bits [k*bits, (k+1)*bits), least
// significant first (reference §1.2).

inline void ref_pack(std::uint8_t* row, std::int64_t k, int bits, std::uint32_t code) {
  for (int t = 0; t < bits; ++t) {
    const std::int64_t j = k * bits + t;
    const std::uint8_t bit = std::uint8_t((code >> t) & 1u);
    row[j / 8] = std::uint8_t((row[j / 8] & ~(1u << (j % 8))) | (unsigned(bit) << (j % 8)));
  }
}

inline std::uint32_t ref_unpack(const std::uint8_t* row, std::int64_t k, int bits) {
  std::uint32_t code = 0;
  for (int t = 0; t < bits; ++t) {
    const std::int64_t j = k * bits + t;
    code |= std::uint32_t((row[j / 8] >> (j % 8)) & 1u) << t;
  }
  return code;
}

// ---- random problems (generated without exactq's quantizer or converters) --------------------

// A zeroed matrix of this shape, sized here (not by exactq) so the oracles stay independent.
inline QuantizedMatrix reference_zeros(std::int64_t n, std::int64_t k, int bits, int group, DType dtype) {
  QuantizedMatrix q;
  q.n = n;
  q.k = k;
  q.bits = bits;
  q.group = group;
  q.dtype = dtype;
  q.packed.assign(std::size_t(n * k * bits / 8), 0);
  q.scales.assign(std::size_t(n * (k / group)) * ref_size(dtype), std::byte{0});
  q.biases.assign(q.scales.size(), std::byte{0});
  return q;
}

// A valid quantized matrix: uniform random codes, and per-group (scale, bias) spanning about
// [-r, r] with either scale sign, as MLX's rule produces for trained weights.
inline QuantizedMatrix random_matrix(std::int64_t n, std::int64_t k, int bits, int group, DType dtype,
                                     std::mt19937_64& rng) {
  QuantizedMatrix q = reference_zeros(n, k, bits, group, dtype);
  const std::int64_t row_bytes = k * bits / 8;
  const std::uint32_t mask = (1u << bits) - 1u;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) ref_pack(q.packed.data() + r * row_bytes, c, bits, std::uint32_t(rng()) & mask);
  const std::size_t params = std::size_t(n * (k / group));
  std::uniform_real_distribution<float> log_r(std::log(0.005f), std::log(0.2f));
  std::uniform_real_distribution<float> jitter(0.8f, 1.2f);
  const float levels = float(mask);
  for (std::size_t i = 0; i < params; ++i) {
    const float r = std::exp(log_r(rng));
    const bool flip = rng() & 1;
    ref_store(q.scales.data(), i, dtype, (flip ? -2.0f : 2.0f) * r / levels * jitter(rng));
    ref_store(q.biases.data(), i, dtype, flip ? r : -r);
  }
  return q;
}

// Activations [m, k] in dtype: normal with a per-vector scale and a few large outlier channels.
// count normal values of the given scale, stored in type t through the oracles.
inline std::vector<std::byte> random_values(std::size_t count, DType t, float scale, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<std::byte> b(count * ref_size(t));
  for (std::size_t i = 0; i < count; ++i) ref_store(b.data(), i, t, normal(rng));
  return b;
}

inline std::vector<std::byte> random_activations(std::int64_t m, std::int64_t k, DType dtype, std::mt19937_64& rng) {
  std::vector<std::byte> x(std::size_t(m * k) * ref_size(dtype));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(std::log(0.1f), std::log(4.0f));
  for (std::int64_t v = 0; v < m; ++v) {
    const float scale = std::exp(log_scale(rng));
    const std::int64_t outlier_phase = std::int64_t(rng() % 97);
    for (std::int64_t c = 0; c < k; ++c) {
      float value = scale * normal(rng);
      if (c % 97 == outlier_phase) value *= 12.0f;
      ref_store(x.data(), std::size_t(v * k + c), dtype, value);
    }
  }
  return x;
}

inline std::int64_t differing_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  EXPECT_EQ(a.size(), b.size());
  std::int64_t d = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) d += a[i] != b[i];
  return d;
}

}  // namespace exactq::test
