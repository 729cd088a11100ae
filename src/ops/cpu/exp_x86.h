// order::exp (order/math.h) on 8 or 16 lanes: the same sequence of f32 operations per lane, each
// a correctly rounded vector instruction (fma, add, mul), the same integer steps on the bits, and
// the out-of-range and NaN lanes replaced by the values the scalar branches return. So every lane
// gives the scalar function's bits for every input (tests/ops/cpu/test_attention_isa.cpp checks
// it on every f32).
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include "order/math.h"

#define EXACTQ_AVX2 __attribute__((target("avx2,fma,f16c,bmi2")))
#define EXACTQ_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,bmi2,fma,f16c")))

namespace exactq::cpu::simd {

inline constexpr float kExpOverflow = 89.0f, kExpUnderflow = -104.0f;  // order::exp's branches

EXACTQ_AVX512 inline __m512 exp16(__m512 x) {
  using namespace order;
  const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(kLog2e), _mm512_set1_ps(kRoundingMagic));
  const __m512i k = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(int(bits_from_float(kRoundingMagic))));
  const __m512 kf = _mm512_add_ps(t, _mm512_set1_ps(-kRoundingMagic));
  const __m512 r_hi = _mm512_fmadd_ps(kf, _mm512_set1_ps(-kLn2Hi), x);
  const __m512 r = _mm512_add_ps(r_hi, _mm512_fmadd_ps(kf, _mm512_set1_ps(-kLn2Lo), _mm512_setzero_ps()));
  __m512 h = _mm512_set1_ps(kExpC7);
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(kExpC6));
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(kExpC5));
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(kExpC4));
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(kExpC3));
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(kExpC2));
  h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(1.0f));
  const __m512 p = _mm512_fmadd_ps(h, r, _mm512_set1_ps(1.0f));
  // scale_by_power_of_two(p, k): k lies in [-150, 128] wherever x is in range, so both halves of
  // k are normal exponents and the k < -252 branch is never taken there.
  const __m512i k1 = _mm512_srai_epi32(k, 1), k2 = _mm512_sub_epi32(k, k1), bias = _mm512_set1_epi32(127);
  const __m512 two_k1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
  const __m512 two_k2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
  __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, two_k1), two_k2);
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpOverflow), _CMP_GT_OQ), y,
                           _mm512_castsi512_ps(_mm512_set1_epi32(0x7f800000)));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpUnderflow), _CMP_LT_OQ), y, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y,
                              _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff)));
}

EXACTQ_AVX2 inline __m256 exp8(__m256 x) {
  using namespace order;
  const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(kLog2e), _mm256_set1_ps(kRoundingMagic));
  const __m256i k = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(int(bits_from_float(kRoundingMagic))));
  const __m256 kf = _mm256_add_ps(t, _mm256_set1_ps(-kRoundingMagic));
  const __m256 r_hi = _mm256_fmadd_ps(kf, _mm256_set1_ps(-kLn2Hi), x);
  const __m256 r = _mm256_add_ps(r_hi, _mm256_fmadd_ps(kf, _mm256_set1_ps(-kLn2Lo), _mm256_setzero_ps()));
  __m256 h = _mm256_set1_ps(kExpC7);
  h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(kExpC6));
  h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(kExpC5));
  h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(kExpC4));
  h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(kExpC3));
  h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(kExpC2));
  h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(1.0f));
  const __m256 p = _mm256_fmadd_ps(h, r, _mm256_set1_ps(1.0f));
  const __m256i k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1), bias = _mm256_set1_epi32(127);
  const __m256 two_k1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
  const __m256 two_k2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, two_k1), two_k2);
  y = _mm256_blendv_ps(y, _mm256_castsi256_ps(_mm256_set1_epi32(0x7f800000)),
                       _mm256_cmp_ps(x, _mm256_set1_ps(kExpOverflow), _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(kExpUnderflow), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

}  // namespace exactq::cpu::simd

#endif
