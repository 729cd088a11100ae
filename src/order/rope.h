// RoPE's order: the frequencies, the angle of a position, its cosine and sine, and the rotation.
// docs/op-contract.md §3 is the prose.
//
// 1. Once per model, on the host, in double: the inverse frequencies w_i (i < d/2) by the
//    config's rule (rope_inverse_frequencies), and from them the phase steps
//    N_i = rint(w_i / (2 pi) * 2^64), a 64-bit fixed-point fraction of a turn (rope_phase_steps).
//    Both sides receive the same N_i (the device gets the host's table).
// 2. The angle of position p is the phase p * N_i mod 2^64: an exact integer product, so the
//    angle is reduced modulo 2 pi exactly, at any p (no 2^24 limit, no f32 rounding of p * w:
//    at p = 10^5 that rounding alone moves the angle by up to 0.004 rad).
// 3. cos and sin of the phase (cos_sin_of_phase): the nearest quarter turn q (top bits) and the
//    signed remainder (the rest, |.| <= 2^61, exact) in f32 as rem_hi + rem_lo; r = rem * 2 pi
//    2^-64 as r_hi + r_lo (|r| <= pi/4); sin r and cos r by fixed polynomials; then the
//    quadrant's swap and signs. Bound: 1 ulp of the exact cos/sin of the phase (measured: 0.750
//    over 2 * 10^8 random phases, half of them near quarter turns).
// 4. The rotation of a pair (x1, x2) by (c, s):
//      y1 = fma(x1, c, -mul(x2, s))      y2 = fma(x2, c, mul(x1, s))
//    pairs (i, i + d/2) for the half-split layout (HF rotate_half, MLX nn.RoPE(traditional=
//    False): Llama, Qwen, Gemma in mlx-lm), pairs (2i, 2i + 1) for the interleaved one
//    (traditional=True).
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "order/math.h"

namespace exactq::order {

// ---- host: frequencies and phase steps --------------------------------------------------------

enum class RopeScalingKind : std::uint8_t { none, linear, llama3 };
struct RopeParams {
  int dims = 0;        // rotated dimensions (the head dim)
  double base = 10000.0;  // rope_theta; Gemma 3: 10000 on local layers, 1e6 on global ones
  RopeScalingKind scaling = RopeScalingKind::none;
  double factor = 1.0;            // linear and llama3
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  double original_max_position_embeddings = 8192.0;  // llama3
};

// w_i = base^(-2i/d), then
//   linear: w_i / factor
//   llama3 (HF _compute_llama3_parameters, mlx-lm Llama3RoPE): with wavelength L = 2 pi / w_i,
//     L < old / high_freq_factor:   w_i
//     L > old / low_freq_factor:    w_i / factor
//     otherwise:  s = (old / L - low_freq_factor) / (high_freq_factor - low_freq_factor),
//                 (1 - s) w_i / factor + s w_i        (continuous at both edges: s = 0 and 1)
// In double; std::pow's error (< 1 ulp of double) is far below f32's, and the table is made
// once and shared, so every backend sees the same values.
inline std::vector<double> rope_inverse_frequencies(const RopeParams& p) {
  if (p.dims <= 0 || p.dims % 2 != 0 || !(p.base > 1.0) || !(p.factor > 0.0))
    throw std::invalid_argument("rope: dims must be even and positive, base > 1 and factor > 0");
  const double pi = 3.14159265358979323846;
  std::vector<double> w(std::size_t(p.dims / 2));
  for (int i = 0; i < p.dims / 2; ++i) {
    double f = 1.0 / std::pow(p.base, double(2 * i) / double(p.dims));
    if (p.scaling == RopeScalingKind::linear) f /= p.factor;
    if (p.scaling == RopeScalingKind::llama3) {
      const double old = p.original_max_position_embeddings;
      const double wavelength = 2.0 * pi / f;
      if (wavelength > old / p.low_freq_factor) {
        f /= p.factor;
      } else if (!(wavelength < old / p.high_freq_factor)) {
        const double s = (old / wavelength - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
        f = (1.0 - s) * f / p.factor + s * f;
      }
    }
    w[std::size_t(i)] = f;
  }
  return w;
}

// N_i = rint(w_i / (2 pi) * 2^64): w_i <= 1, so N_i < 2^62. For w_i / (2 pi) >= 2^-12 the double
// value times 2^64 is an integer already (no rounding); below, rint moves it by at most 2^-65
// of a turn per position.
inline std::vector<std::uint64_t> rope_phase_steps(const std::vector<double>& inverse_frequencies) {
  const double two_pi = 6.283185307179586476925;
  std::vector<std::uint64_t> n(inverse_frequencies.size());
  for (std::size_t i = 0; i < n.size(); ++i) {
    const double w = inverse_frequencies[i];
    if (!(w > 0.0 && w <= 1.0)) throw std::invalid_argument("rope: an inverse frequency outside (0, 1]");
    n[i] = std::uint64_t(std::nearbyint(std::ldexp(w / two_pi, 64)));
  }
  return n;
}

// ---- both sides: phase, cos/sin, rotation -----------------------------------------------------

EXACTQ_HD std::uint64_t rope_phase(std::uint64_t position, std::uint64_t step) { return position * step; }  // mod 2^64

// Exact conversions: int64 -> f32 rounds to nearest even; f32 -> int64 of an integer value.
EXACTQ_HD float float_from_int64(std::int64_t v) {
#if defined(__CUDA_ARCH__)
  return __ll2float_rn(v);
#else
  return static_cast<float>(v);
#endif
}
EXACTQ_HD std::int64_t int64_from_integral_float(float v) {
#if defined(__CUDA_ARCH__)
  return __float2ll_rz(v);
#else
  return static_cast<std::int64_t>(v);
#endif
}

inline constexpr float kTurnHi = 0x1.921fb6p-62f;   // 2 pi 2^-64 = kTurnHi + kTurnLo
inline constexpr float kTurnLo = -0x1.777a5cp-87f;
// sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C'(r^2) on |r| <= pi/4 (Chebyshev fits of
// degree 3 in r^2, the cosine's leading -1/2 kept exact: errors 2.8e-11 and 3.1e-10).
inline constexpr float kSinS3 = 0x1.6dbdeep-19f;   // 2.72498960e-6
inline constexpr float kSinS2 = -0x1.a013a8p-13f;  // -1.98400870e-4
inline constexpr float kSinS1 = 0x1.11110ep-7f;    // 8.33333191e-3
inline constexpr float kSinS0 = -0x1.555556p-3f;   // -1.66666672e-1
inline constexpr float kCosC3 = 0x1.9a6f06p-16f;   // 2.44637540e-5
inline constexpr float kCosC2 = -0x1.6c0e08p-10f;  // -1.38875889e-3
inline constexpr float kCosC1 = 0x1.55554cp-5f;    // 4.16666493e-2

struct CosSin {
  float cos, sin;
};
EXACTQ_HD CosSin cos_sin_of_phase(std::uint64_t phase) {
  const std::uint64_t q = ((phase + (std::uint64_t(1) << 61)) >> 62) & 3u;  // nearest quarter turn
  const std::int64_t rem = std::int64_t(phase - (q << 62));                // in [-2^61, 2^61)
  const float rem_hi = float_from_int64(rem);
  const float rem_lo = float_from_int64(rem - int64_from_integral_float(rem_hi));
  const float r_hi = mul(rem_hi, kTurnHi);
  float r_lo = fma(rem_hi, kTurnHi, negate(r_hi));
  r_lo = fma(rem_hi, kTurnLo, r_lo);
  r_lo = fma(rem_lo, kTurnHi, r_lo);  // r = r_hi + r_lo to ~2^-45 relative
  const float s2 = mul(r_hi, r_hi), s2_lo = fma(r_hi, r_hi, negate(s2));
  float sp = kSinS3;
  sp = fma(sp, s2, kSinS2);
  sp = fma(sp, s2, kSinS1);
  sp = fma(sp, s2, kSinS0);
  float cp = kCosC3;  // C'
  cp = fma(cp, s2, kCosC2);
  cp = fma(cp, s2, kCosC1);
  // cos(r_hi + r_lo) = 1 - s2/2 + tail, tail = s2^2 C' - r_hi r_lo - s2_lo/2 (s2's own error
  // enters through the -1/2). w = 1 - s2/2 rounds; its error (1 - w) - s2/2 is exact (Sterbenz)
  // and goes back in with the tail, so the last add is the only rounding of size.
  const float half_s2 = mul(0.5f, s2);  // exact
  const float w = add(1.0f, negate(half_s2));
  const float w_err = add(add(1.0f, negate(w)), negate(half_s2));
  const float tail = fma(s2, mul(s2, cp), fma(negate(r_hi), r_lo, mul(-0.5f, s2_lo)));
  const float cos_r = add(w, add(w_err, tail));
  // sin(r_hi + r_lo) = r_hi + r_hi^3 S + r_lo cos r.
  const float sin_r = add(r_hi, fma(mul(r_hi, s2), sp, mul(r_lo, cos_r)));
  switch (q) {
    case 0: return {cos_r, sin_r};
    case 1: return {negate(sin_r), cos_r};
    case 2: return {negate(cos_r), negate(sin_r)};
    default: return {sin_r, negate(cos_r)};
  }
}

EXACTQ_HD void rope_rotate_pair(float x1, float x2, CosSin cs, float& y1, float& y2) {
  y1 = fma(x1, cs.cos, negate(mul(x2, cs.sin)));
  y2 = fma(x2, cs.cos, mul(x1, cs.sin));
}

// One head vector of d values at `position`; steps holds d/2 phase steps; y may alias x.
EXACTQ_HD void rope_half_split(const float* x, int d, std::uint64_t position, const std::uint64_t* steps, float* y) {
  const int half = d / 2;
  for (int i = 0; i < half; ++i) {
    const CosSin cs = cos_sin_of_phase(rope_phase(position, steps[i]));
    float y1, y2;
    rope_rotate_pair(x[i], x[i + half], cs, y1, y2);
    y[i] = y1;
    y[i + half] = y2;
  }
}
EXACTQ_HD void rope_interleaved(const float* x, int d, std::uint64_t position, const std::uint64_t* steps, float* y) {
  for (int i = 0; i < d / 2; ++i) {
    const CosSin cs = cos_sin_of_phase(rope_phase(position, steps[i]));
    float y1, y2;
    rope_rotate_pair(x[2 * i], x[2 * i + 1], cs, y1, y2);
    y[2 * i] = y1;
    y[2 * i + 1] = y2;
  }
}

}  // namespace exactq::order
