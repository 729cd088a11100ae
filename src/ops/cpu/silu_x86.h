// order::silu (order/math.h: times_sigmoid(x, x, 0)) on 16 lanes. Both of the scalar function's
// branches are computed on every lane, each as the scalar sequence of correctly rounded steps
// (exp_parts, scale_by_power_of_two, the division), and each lane keeps the branch its sign
// selects; the out-of-range and NaN lanes take the values the scalar early returns give. So
// every lane gives the scalar bits for every input (tests/ops/cpu/test_attention_isa.cpp checks
// it on every f32).
#pragma once

#if defined(__x86_64__)
#include "ops/cpu/exp_x86.h"

namespace exactq::cpu::simd {

// order::exp_parts(hi, lo) on 16 lanes: p, and k as integers.
EXACTQ_AVX512 inline __m512 exp_parts16(__m512 hi, __m512 lo, __m512i& k) {
  using namespace order;
  const __m512 t = _mm512_fmadd_ps(hi, _mm512_set1_ps(kLog2e), _mm512_set1_ps(kRoundingMagic));
  k = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(int(bits_from_float(kRoundingMagic))));
  const __m512 kf = _mm512_add_ps(t, _mm512_set1_ps(-kRoundingMagic));
  const __m512 r_hi = _mm512_fmadd_ps(kf, _mm512_set1_ps(-kLn2Hi), hi);
  const __m512 r = _mm512_add_ps(r_hi, _mm512_fmadd_ps(kf, _mm512_set1_ps(-kLn2Lo), lo));
  __m512 h = _mm512_set1_ps(kExpC7);
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(kExpC6));
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(kExpC5));
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(kExpC4));
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(kExpC3));
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(kExpC2));
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(1.0f));
  return _mm512_fmadd_ps(h, r, _mm512_set1_ps(1.0f));
}

// order::scale_by_power_of_two(t, k) on 16 lanes, its k < -252 branch included.
EXACTQ_AVX512 inline __m512 scale_by_power_of_two16(__m512 t, __m512i k) {
  const __m512i k1 = _mm512_srai_epi32(k, 1), k2 = _mm512_sub_epi32(k, k1), bias = _mm512_set1_epi32(127);
  const __m512 two_k1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
  const __m512 two_k2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
  const __m512 scaled = _mm512_mul_ps(_mm512_mul_ps(t, two_k1), two_k2);
  const __mmask16 tiny = _mm512_cmplt_epi32_mask(k, _mm512_set1_epi32(-252));
  return _mm512_mask_blend_ps(tiny, scaled, _mm512_mul_ps(t, _mm512_setzero_ps()));
}

EXACTQ_AVX512 inline __m512 silu16(__m512 x) {
  using namespace order;
  const __m512 zero = _mm512_setzero_ps(), minus_zero = _mm512_set1_ps(-0.0f);
  const __mmask16 positive = _mm512_cmp_ps_mask(x, zero, _CMP_GE_OQ);  // z >= 0: e^-z <= 1
  const __m512 hi = _mm512_mask_blend_ps(positive, x, _mm512_xor_ps(x, minus_zero));
  const __m512 lo = _mm512_mask_blend_ps(positive, zero, minus_zero);
  __m512i k;
  const __m512 p = exp_parts16(hi, lo, k);
  const __m512 den = _mm512_add_ps(_mm512_set1_ps(1.0f), scale_by_power_of_two16(p, k));
  const __m512 q = _mm512_div_ps(_mm512_mask_blend_ps(positive, _mm512_mul_ps(x, p), x), den);
  __m512 y = _mm512_mask_blend_ps(positive, scale_by_power_of_two16(q, k), q);
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(104.0f), _CMP_GT_OQ), y, x);
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kSigmoidUnderflow), _CMP_LT_OQ), y, minus_zero);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y,
                              _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff)));
}

}  // namespace exactq::cpu::simd

#endif
