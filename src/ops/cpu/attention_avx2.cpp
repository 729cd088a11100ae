// The attention steps on AVX2 (attention_kernels.h). Scores: a register per key, its eight
// partials in the eight lanes (lane u: dims u, u + 8, ..., one fma per 8 dims, as the order's
// partial u), four keys at a time; the order's xor butterfly 4, 2, 1 then runs on the four keys
// at once, each step one add of the same two partials the scalar step adds. o_c and the fold: a
// lane per output dim, j increasing. e_j: exp8, 8 keys per instruction.
#include "ops/cpu/attention_kernels.h"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "ops/cpu/exp_x86.h"
#include "order/attention.h"
#include "support/dispatch.h"

namespace exactq::cpu::attention_detail {
namespace {

constexpr int kChunk = order::kAttentionChunk;
constexpr int kScoreHeads = 2;   // heads whose score accumulators share the 16 registers
constexpr int kValueHeads = 4;   // and whose o_c accumulators do

// Eight consecutive values, widened.
template <DType T>
EXACTQ_AVX2 inline __m256 load8(const std::byte* p) {
  if constexpr (T == DType::f32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (T == DType::f16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// The butterfly of keys 0..3 (register k: key k's partials). Step 4 leaves [key 0's P_u +
// P_(u+4) | key 1's] and the same for keys 2, 3; step 2, within each 128-bit half, the sums u and
// u + 2 of keys 0, 2 (low half) and 1, 3 (high); step 1 the two of each. Each add's first operand
// is the lower partial, as in order::attention_score. Scores: lanes 0, 4, 1, 5 for keys 0..3.
EXACTQ_AVX2 inline __m256 butterfly4(const __m256 (&acc)[4]) {
  const __m256 s01 = _mm256_add_ps(_mm256_permute2f128_ps(acc[0], acc[1], 0x20), _mm256_permute2f128_ps(acc[0], acc[1], 0x31));
  const __m256 s23 = _mm256_add_ps(_mm256_permute2f128_ps(acc[2], acc[3], 0x20), _mm256_permute2f128_ps(acc[2], acc[3], 0x31));
  const __m256 w = _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm256_add_ps(_mm256_shuffle_ps(w, w, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(w, w, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of 4 key rows (at keys + j * stride) for NH heads; s[h * kChunk + j] for j < valid.
template <DType T, int NH>
EXACTQ_AVX2 void score4(const float* q, std::size_t q_stride, const std::byte* keys, std::size_t stride, int d,
                        int valid, float* s) {
  constexpr std::size_t e = dtype_size(T);
  __m256 acc[NH][4];
  for (int h = 0; h < NH; ++h)
    for (int k = 0; k < 4; ++k) acc[h][k] = _mm256_setzero_ps();
  for (int i = 0; i < d; i += 8) {
    __m256 qv[NH];
    for (int h = 0; h < NH; ++h) qv[h] = _mm256_loadu_ps(q + std::size_t(h) * q_stride + i);
    for (int k = 0; k < 4; ++k) {
      const __m256 x = load8<T>(keys + std::size_t(k) * stride + std::size_t(i) * e);
      for (int h = 0; h < NH; ++h) acc[h][k] = _mm256_fmadd_ps(qv[h], x, acc[h][k]);
    }
  }
  static constexpr int kLane[4] = {0, 4, 1, 5};
  for (int h = 0; h < NH; ++h) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, butterfly4(acc[h]));
    for (int k = 0; k < valid; ++k) s[h * kChunk + k] = lanes[kLane[k]];
  }
}

template <DType T, int NH>
EXACTQ_AVX2 void scores_block(const float* q, std::size_t q_stride, const std::byte* keys, std::size_t stride,
                              int count, int d, float* s) {
  int j = 0;
  for (; j + 4 <= count; j += 4) score4<T, NH>(q, q_stride, keys + std::size_t(j) * stride, stride, d, 4, s + j);
  if (j == count) return;
  // The last keys, copied below zero rows so that no row past the last visible one is read.
  alignas(32) std::byte tail[4 * order::kMaxHeadDim * 4];
  const std::size_t row = std::size_t(d) * dtype_size(T);
  std::memset(tail, 0, 4 * row);
  for (int r = 0; r < count - j; ++r) std::memcpy(tail + std::size_t(r) * row, keys + std::size_t(j + r) * stride, row);
  score4<T, NH>(q, q_stride, tail, row, d, count - j, s + j);
}

template <DType T>
void scores_t(const float* q, std::size_t q_stride, int heads, const std::byte* keys, std::size_t stride, int count,
              int d, float* s) {
  for (int h = 0; h < heads; h += kScoreHeads) {
    const float* qh = q + std::size_t(h) * q_stride;
    if (heads - h == 1)
      scores_block<T, 1>(qh, q_stride, keys, stride, count, d, s + h * kChunk);
    else
      scores_block<T, 2>(qh, q_stride, keys, stride, count, d, s + h * kChunk);
  }
}

void scores(const float* q, std::size_t q_stride, int heads, const std::byte* keys, std::size_t stride, int count,
            int d, DType t, float* s) {
  with_dtype(t, [&]<DType T>() { scores_t<T>(q, q_stride, heads, keys, stride, count, d, s); });
}

EXACTQ_AVX2 void weights(float* s, int count, float m) {
  const __m256 minus_m = _mm256_set1_ps(order::negate(m));
  int j = 0;
  for (; j + 8 <= count; j += 8) _mm256_storeu_ps(s + j, simd::exp8(_mm256_add_ps(_mm256_loadu_ps(s + j), minus_m)));
  if (j == count) return;
  alignas(32) float tail[8] = {};
  std::memcpy(tail, s + j, sizeof(float) * std::size_t(count - j));
  _mm256_store_ps(tail, simd::exp8(_mm256_add_ps(_mm256_load_ps(tail), minus_m)));
  std::memcpy(s + j, tail, sizeof(float) * std::size_t(count - j));
}

// o_c for NH heads over dims [0, 8 NV) of `values`.
template <DType T, int NH, int NV>
EXACTQ_AVX2 void values_block(const float* e, const std::byte* values, std::size_t stride, int count, float* o,
                              std::size_t o_stride) {
  constexpr std::size_t es = dtype_size(T);
  __m256 acc[NH][NV];
  for (int h = 0; h < NH; ++h)
    for (int v = 0; v < NV; ++v) acc[h][v] = _mm256_setzero_ps();
  for (int j = 0; j < count; ++j) {
    const std::byte* row = values + std::size_t(j) * stride;
    __m256 x[NV];
    for (int v = 0; v < NV; ++v) x[v] = load8<T>(row + std::size_t(8 * v) * es);
    for (int h = 0; h < NH; ++h) {
      const __m256 w = _mm256_set1_ps(e[h * kChunk + j]);
      for (int v = 0; v < NV; ++v) acc[h][v] = _mm256_fmadd_ps(w, x[v], acc[h][v]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(o + std::size_t(h) * o_stride + 8 * v, acc[h][v]);
}

template <DType T, int NV>
void values_heads(const float* e, int heads, const std::byte* values, std::size_t stride, int count, float* o,
                  std::size_t o_stride) {
  switch (heads) {
    case 1: return values_block<T, 1, NV>(e, values, stride, count, o, o_stride);
    case 2: return values_block<T, 2, NV>(e, values, stride, count, o, o_stride);
    case 3: return values_block<T, 3, NV>(e, values, stride, count, o, o_stride);
    default: return values_block<T, 4, NV>(e, values, stride, count, o, o_stride);
  }
}

template <DType T>
void weighted_values_t(const float* e, int heads, const std::byte* values, std::size_t stride, int count, int d,
                       float* o, std::size_t o_stride) {
  for (int h = 0; h < heads; h += kValueHeads) {
    const int nh = std::min(kValueHeads, heads - h);
    const float* eh = e + h * kChunk;
    float* oh = o + std::size_t(h) * o_stride;
    int i = 0;
    for (; i + 16 <= d; i += 16)
      values_heads<T, 2>(eh, nh, values + std::size_t(i) * dtype_size(T), stride, count, oh + i, o_stride);
    if (i < d) values_heads<T, 1>(eh, nh, values + std::size_t(i) * dtype_size(T), stride, count, oh + i, o_stride);
  }
}

void weighted_values(const float* e, int heads, const std::byte* values, std::size_t stride, int count, int d,
                     DType t, float* o, std::size_t o_stride) {
  with_dtype(t, [&]<DType T>() { weighted_values_t<T>(e, heads, values, stride, count, d, o, o_stride); });
}

// n is a multiple of 8 (the head dim).
EXACTQ_AVX2 void fold(float* o, const float* o_c, int n, float a, float b) {
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  for (int i = 0; i < n; i += 8)
    _mm256_storeu_ps(o + i, _mm256_fmadd_ps(_mm256_loadu_ps(o + i), va, _mm256_mul_ps(_mm256_loadu_ps(o_c + i), vb)));
}

}  // namespace

const AttentionKernels avx2{scores, weights, weighted_values, fold};

}  // namespace exactq::cpu::attention_detail

#else
namespace exactq::cpu::attention_detail {
const AttentionKernels avx2{};  // never chosen: isa_available says no off x86
}
#endif
