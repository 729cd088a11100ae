// The decoder's elementwise functions as fixed sequences of the contract's primitives (fma, add,
// mul, div, sqrt: src/order/primitives.h), integer and bit operations. No libm call, no
// approximate hardware instruction, nothing left to contract: CPU and GPU give the same bytes on
// every input. docs/op-contract.md §1 is the prose; the bounds below are maxima of |y - f(x)| in
// ulps of f(x) (f computed in double, the ulp of an f32 at |f(x)|, 2^-149 at least), measured by
// tests/order/test_math.cpp on random and special inputs, and once on every f32 (the figures
// in parentheses).
//
// Subnormal results are produced, not flushed: they are rounded once from an f32 value, so they
// too stay within the bounds. A NaN input gives the canonical NaN 0x7fffffff (dtype.h stores
// every NaN that way), so NaN bytes agree as well.
#pragma once

#include <cstdint>

#include "order/primitives.h"

namespace exactq::order {

EXACTQ_HD float canonical_nan() { return float_from_bits(0x7fffffffu); }
EXACTQ_HD bool is_nan(float x) { return x != x; }  // no fast-math anywhere: the comparison holds
EXACTQ_HD float abs_bits(float x) { return float_from_bits(bits_from_float(x) & 0x7fffffffu); }
EXACTQ_HD float with_sign_of(float magnitude, float sign_source) {
  return float_from_bits(bits_from_float(magnitude) | (bits_from_float(sign_source) & 0x80000000u));
}
EXACTQ_HD float negate(float x) { return float_from_bits(bits_from_float(x) ^ 0x80000000u); }

// 2^n for n in [-126, 127] (a normal f32).
EXACTQ_HD float power_of_two(int n) { return float_from_bits(std::uint32_t(n + 127) << 23); }
// t * 2^k with one rounding: the first multiply, by 2^(k>>1), stays normal and exact wherever the
// result can be nonzero (this file passes t = p >= 0.7 with k >= -151, and |t| >= 1 wherever
// k < -151), and the second rounds once, to a subnormal, to zero or to infinity where the result
// lies there. k < -252 gives zero of t's sign.
EXACTQ_HD float scale_by_power_of_two(float t, int k) {
  if (k < -252) return mul(t, 0.0f);
  const int k1 = k >> 1;  // floor(k / 2): both halves lie in [-126, 127] for k in [-252, 254]
  return mul(mul(t, power_of_two(k1)), power_of_two(k - k1));
}

// ---- exp --------------------------------------------------------------------------------------
// e^(hi + lo) = p * 2^k, for hi in [-300, 89] and |lo| <= 2^-20 |hi|:
//   k    = rint(hi * log2e)       one fma with 1.5*2^23: the sum's last bit is k (|k| <= 433)
//   r_hi = hi - k * ln2_hi        one fma, exact: ln2_hi is a multiple of 2^-21, and k != 0 only
//                                 where |hi| > 0.34, a multiple of 2^-25; |r_hi| < 0.36, so the
//                                 difference fits 24 bits (k = 0 gives hi itself)
//   r    = r_hi + (lo - k * ln2_lo)           ln2_hi + ln2_lo = ln 2 to 2^-53
//   p    = 1 + r(1 + r(c2 + r(c3 + ... + r c7)))   Horner, 7 fmas; c2..c7 fit e^r on
//                                 |r| <= ln2/2 + 0.001 (Chebyshev, error 1.4e-9 * r^2)
inline constexpr float kLog2e = 0x1.715476p+0f;          // 1.44269502
inline constexpr float kLn2Hi = 0x1.62e43p-1f;           // 0.693147182 = f32(ln 2)
inline constexpr float kLn2Lo = -0x1.05c61p-29f;         // -1.90465421e-9 = f32(ln 2 - kLn2Hi)
inline constexpr float kRoundingMagic = 0x1.8p+23f;      // 1.5 * 2^23: adding it rounds to an integer
inline constexpr float kExpC7 = 0x1.a1267p-13f;          // 1.98912690e-4
inline constexpr float kExpC6 = 0x1.6d44d2p-10f;         // 1.39339000e-3
inline constexpr float kExpC5 = 0x1.1110ep-7f;           // 8.33331048e-3
inline constexpr float kExpC4 = 0x1.5554e8p-5f;          // 4.16664630e-2
inline constexpr float kExpC3 = 0x1.555556p-3f;          // 1.66666672e-1
inline constexpr float kExpC2 = 0.5f;

struct ExpParts {
  float p;  // in [0.70, 1.42]
  int k;
};
EXACTQ_HD ExpParts exp_parts(float hi, float lo) {
  const float t = fma(hi, kLog2e, kRoundingMagic);
  const int k = int(bits_from_float(t)) - int(bits_from_float(kRoundingMagic));
  const float kf = add(t, -kRoundingMagic);
  const float r_hi = fma(kf, -kLn2Hi, hi);
  const float r = add(r_hi, fma(kf, -kLn2Lo, lo));
  float h = kExpC7;
  h = fma(h, r, kExpC6);
  h = fma(h, r, kExpC5);
  h = fma(h, r, kExpC4);
  h = fma(h, r, kExpC3);
  h = fma(h, r, kExpC2);
  h = fma(h, r, 1.0f);
  return {fma(h, r, 1.0f), k};
}

// e^x. Bound: 1 ulp (every f32: 0.874). x > 89 (and +inf) gives +inf, x < -104 (and
// -inf) gives +0; between, overflow and underflow come from the final multiply's rounding, so
// e^x rounds to infinity exactly when the f32 polynomial value does. exp(±0) = 1 exactly.
EXACTQ_HD float exp(float x) {
  if (is_nan(x)) return canonical_nan();
  if (x > 89.0f) return float_from_bits(0x7f800000u);
  if (x < -104.0f) return 0.0f;
  const ExpParts e = exp_parts(x, 0.0f);
  return scale_by_power_of_two(e.p, e.k);
}

// ---- x * sigmoid(z): silu and gelu_tanh ------------------------------------------------------
// x / (1 + e^-z) for z = z_hi + z_lo of x's sign (z_lo tiny). For z >= 0 (x >= 0): e = e^-z <= 1
// and y = div(x, add(1, e)). For z < 0: e^z = p * 2^k, and
//   y = (x * p) / (1 + e^z) * 2^k  = scale(div(mul(x, p), add(1, scale(p, k))), k)
// so the value is formed at normal magnitude and rounded to a subnormal or zero only once, at
// the end: x e^z keeps its accuracy where e^z alone would underflow. z < -300 gives -0.
inline constexpr float kSigmoidUnderflow = -300.0f;
EXACTQ_HD float times_sigmoid(float x, float z_hi, float z_lo) {
  if (z_hi >= 0.0f) {
    if (z_hi > 104.0f) return x;  // e^-z < 2^-150: 1 + e = 1
    const ExpParts e = exp_parts(negate(z_hi), negate(z_lo));
    return div(x, add(1.0f, scale_by_power_of_two(e.p, e.k)));
  }
  if (z_hi < kSigmoidUnderflow) return negate(0.0f);
  const ExpParts e = exp_parts(z_hi, z_lo);
  const float t = div(mul(x, e.p), add(1.0f, scale_by_power_of_two(e.p, e.k)));
  return scale_by_power_of_two(t, e.k);
}

// silu(x) = x / (1 + e^-x). Bound: 4 ulp (every f32: 3.344; about 1.8 * 2^-24 relative, which
// is more ulps where the result sits low in its binade). +inf -> +inf, -inf -> -0, ±0 -> ±0.
EXACTQ_HD float silu(float x) {
  if (is_nan(x)) return canonical_nan();
  return times_sigmoid(x, x, 0.0f);
}

// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch's gelu(approximate=
// "tanh"), HF's "gelu_pytorch_tanh" and MLX's nn.gelu_approx: the function Gemma 3 uses. Written
// as the identical x * sigmoid(z), z = 2 sqrt(2/pi) (x + 0.044715 x^3) = x (A + B x^2), which
// has no cancellation where 1 + tanh(u) would lose every bit (x < -3). z carries ~44 bits
// (hi + lo, error-free products and a two-sum): e^z has condition |z| (up to 300), so an f32 z
// alone would cost up to ~100 ulps in the tail.
//   A = 2 sqrt(2/pi)          = kGeluAHi + kGeluALo  (1.59576917 - 4.53406805e-8)
//   B = 2 sqrt(2/pi) 0.044715 = kGeluBHi + kGeluBLo  (0.0713548139 + 2.39883247e-9)
// (sqrt(2/pi) alone is 0x1.988454p-1f = 0.797884583 and 0.044715 is 0x1.6e4e26p-5f in f32; the
// constants above are the exact products, split.) Bound: 4 ulp (every f32: 3.208).
// |x| >= 16: y = x for x > 0 (1 - sigmoid < 2^-370), -0 for x < 0 (|y| < 2^-500).
inline constexpr float kGeluAHi = 0x1.988454p+0f;
inline constexpr float kGeluALo = -0x1.857936p-25f;
inline constexpr float kGeluBHi = 0x1.2444f2p-4f;
inline constexpr float kGeluBLo = 0x1.49b16ap-29f;
EXACTQ_HD float gelu_tanh(float x) {
  if (is_nan(x)) return canonical_nan();
  if (x >= 16.0f) return x;
  if (x <= -16.0f) return negate(0.0f);
  const float s_hi = mul(x, x), s_lo = fma(x, x, negate(s_hi));      // x^2 exactly
  const float p_hi = mul(kGeluBHi, s_hi), p_lo = fma(kGeluBHi, s_hi, negate(p_hi));
  const float w_hi = add(kGeluAHi, p_hi);                              // two-sum of A_hi + p_hi
  const float b = add(w_hi, negate(kGeluAHi));
  const float w_err = add(add(kGeluAHi, negate(add(w_hi, negate(b)))), add(p_hi, negate(b)));
  float w_lo = fma(kGeluBHi, s_lo, p_lo);
  w_lo = fma(kGeluBLo, s_hi, w_lo);
  w_lo = add(add(w_lo, kGeluALo), w_err);                              // w = A + B x^2 = w_hi + w_lo
  const float z_hi = mul(x, w_hi);
  const float z_lo = fma(x, w_lo, fma(x, w_hi, negate(z_hi)));         // z = x w = z_hi + z_lo
  return times_sigmoid(x, z_hi, z_lo);
}

// ---- tanh -------------------------------------------------------------------------------------
// a = |x|; the sign is put back at the end (tanh is odd, so ±0 -> ±0).
//   a < 2^-12:   x itself (the correction a^3/3 is below half an ulp)
//   a < 0.625:   x + x s P(s), s = x^2, P of degree 5 (Chebyshev fit of (tanh(a)/a - 1)/s, error
//                1.6e-9): fma(x, mul(s, P), x)
//   a >= 0.625:  1 - 2 / (e^(2a) + 1)   (2a exact; e^(2a) = +inf for a > 44.5 gives exactly 1)
// Bound: 2 ulp (every f32: 1.371). NaN -> NaN, ±inf -> ±1.
inline constexpr float kTanhPolyLimit = 0.625f;
inline constexpr float kTanhT5 = 0x1.2c83cp-9f;    // 2.29274482e-3
inline constexpr float kTanhT4 = -0x1.116a16p-7f;  // -8.34394526e-3
inline constexpr float kTanhT3 = 0x1.64a976p-6f;   // 2.17689183e-2
inline constexpr float kTanhT2 = -0x1.ba08c4p-5f;  // -5.39592579e-2
inline constexpr float kTanhT1 = 0x1.1110eap-3f;   // 1.33333042e-1
inline constexpr float kTanhT0 = -0x1.555556p-2f;  // -3.33333343e-1
EXACTQ_HD float tanh(float x) {
  if (is_nan(x)) return canonical_nan();
  const float a = abs_bits(x);
  if (a < 0x1p-12f) return x;
  if (a < kTanhPolyLimit) {
    const float s = mul(x, x);
    float p = kTanhT5;
    p = fma(p, s, kTanhT4);
    p = fma(p, s, kTanhT3);
    p = fma(p, s, kTanhT2);
    p = fma(p, s, kTanhT1);
    p = fma(p, s, kTanhT0);
    return fma(x, mul(s, p), x);
  }
  const float e = exp(add(a, a));
  return with_sign_of(add(1.0f, negate(div(2.0f, add(e, 1.0f)))), x);
}

// 1/sqrt(x) = div(1, sqrt(x)): two correctly rounded steps, each within half an ulp, so within
// 1.5 ulps of the double result (every f32: 1.490). +0 -> +inf, -0 -> -inf, +inf ->
// +0; x < 0 and NaN -> the canonical NaN (x86's sqrt gives 0xffc00000, CUDA's 0x7fffffff).
EXACTQ_HD float rsqrt(float x) {
  const float s = sqrt(x);
  return is_nan(s) ? canonical_nan() : div(1.0f, s);
}

}  // namespace exactq::order
