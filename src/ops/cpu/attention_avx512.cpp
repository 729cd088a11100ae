// The attention steps on AVX-512 (attention_kernels.h). Scores: a register holds two keys, the
// eight partials of each in its eight lanes (lane u: dims u, u + 8, ..., one fma per 8 dims, as
// the order's partial u), four registers eight keys; the order's xor butterfly 4, 2, 1 then runs
// on the eight keys at once, each step one add of the same two partials the scalar step adds.
// o_c and the fold: a lane per output dim, j increasing. e_j: exp16, 16 keys per instruction.
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
constexpr int kBlockHeads = 4;  // heads whose accumulators share the registers

// Dims i..i+7 of key rows a and b, widened: lanes 0..7 and 8..15.
template <DType T>
EXACTQ_AVX512 inline __m512 load_pair(const std::byte* a, const std::byte* b) {
  if constexpr (T == DType::f32) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float*>(a))),
                              _mm256_loadu_ps(reinterpret_cast<const float*>(b)), 1);
  } else {
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
    if constexpr (T == DType::f16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// Up to 16 consecutive values (lanes past `lanes` read nothing and hold 0).
template <DType T>
EXACTQ_AVX512 inline __m512 load16(const std::byte* p, __mmask16 lanes) {
  if constexpr (T == DType::f32) return _mm512_maskz_loadu_ps(lanes, p);
  const __m256i h = _mm256_maskz_loadu_epi16(lanes, p);
  if constexpr (T == DType::f16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

EXACTQ_AVX512 inline __m512 pick_add(__m512 a, __m512 b, const int (&x)[16], const int (&y)[16]) {
  const __m512i ix = _mm512_loadu_si512(x), iy = _mm512_loadu_si512(y);
  return _mm512_add_ps(_mm512_permutex2var_ps(a, ix, b), _mm512_permutex2var_ps(a, iy, b));
}

// The butterfly of keys 0..7 (register p: keys 2p, 2p + 1): step 4 leaves lanes 4k + u = key k's
// P_u + P_(u+4) (u < 4), step 2 lanes 2k + u = the sums u and u + 2 of those, step 1 lane k = key
// k's two; each add's first operand is the lower partial, as in order::attention_score.
EXACTQ_AVX512 inline __m256 butterfly8(const __m512 (&acc)[4]) {
  static constexpr int x4[16] = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
  static constexpr int y4[16] = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};
  static constexpr int x2[16] = {0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29};
  static constexpr int y2[16] = {2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31};
  static constexpr int x1[16] = {0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14};
  static constexpr int y1[16] = {1, 3, 5, 7, 9, 11, 13, 15, 1, 3, 5, 7, 9, 11, 13, 15};
  const __m512 low = pick_add(acc[0], acc[1], x4, y4), high = pick_add(acc[2], acc[3], x4, y4);
  const __m512 w = pick_add(low, high, x2, y2);
  return _mm512_castps512_ps256(pick_add(w, w, x1, y1));
}

// Scores of 8 key rows (at keys + j * stride) for NH heads; s[h * kChunk + j] for j < valid.
template <DType T, int NH>
EXACTQ_AVX512 void score8(const float* q, std::size_t q_stride, const std::byte* keys, std::size_t stride, int d,
                          int valid, float* s) {
  constexpr std::size_t e = dtype_size(T);
  __m512 acc[NH][4];
  for (int h = 0; h < NH; ++h)
    for (int p = 0; p < 4; ++p) acc[h][p] = _mm512_setzero_ps();
  for (int i = 0; i < d; i += 8) {
    __m512 qv[NH];
    for (int h = 0; h < NH; ++h) qv[h] = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + std::size_t(h) * q_stride + i));
    for (int p = 0; p < 4; ++p) {
      const std::byte* row = keys + std::size_t(2 * p) * stride + std::size_t(i) * e;
      const __m512 k = load_pair<T>(row, row + stride);
      for (int h = 0; h < NH; ++h) acc[h][p] = _mm512_fmadd_ps(qv[h], k, acc[h][p]);
    }
  }
  for (int h = 0; h < NH; ++h)
    _mm256_mask_storeu_ps(s + h * kChunk, __mmask8((1u << valid) - 1u), butterfly8(acc[h]));
}

template <DType T, int NH>
EXACTQ_AVX512 void scores_block(const float* q, std::size_t q_stride, const std::byte* keys, std::size_t stride,
                                int count, int d, float* s) {
  int j = 0;
  for (; j + 8 <= count; j += 8) score8<T, NH>(q, q_stride, keys + std::size_t(j) * stride, stride, d, 8, s + j);
  if (j == count) return;
  // The last keys, copied below zero rows so that no row past the last visible one is read.
  alignas(64) std::byte tail[8 * order::kMaxHeadDim * 4];
  const std::size_t row = std::size_t(d) * dtype_size(T);
  std::memset(tail, 0, 8 * row);
  for (int r = 0; r < count - j; ++r) std::memcpy(tail + std::size_t(r) * row, keys + std::size_t(j + r) * stride, row);
  score8<T, NH>(q, q_stride, tail, row, d, count - j, s + j);
}

template <DType T>
void scores_t(const float* q, std::size_t q_stride, int heads, const std::byte* keys, std::size_t stride, int count,
              int d, float* s) {
  for (int h = 0; h < heads; h += kBlockHeads) {
    const float* qh = q + std::size_t(h) * q_stride;
    float* sh = s + h * kChunk;
    switch (std::min(kBlockHeads, heads - h)) {
      case 1: scores_block<T, 1>(qh, q_stride, keys, stride, count, d, sh); break;
      case 2: scores_block<T, 2>(qh, q_stride, keys, stride, count, d, sh); break;
      case 3: scores_block<T, 3>(qh, q_stride, keys, stride, count, d, sh); break;
      default: scores_block<T, 4>(qh, q_stride, keys, stride, count, d, sh); break;
    }
  }
}

void scores(const float* q, std::size_t q_stride, int heads, const std::byte* keys, std::size_t stride, int count,
            int d, DType t, float* s) {
  with_dtype(t, [&]<DType T>() { scores_t<T>(q, q_stride, heads, keys, stride, count, d, s); });
}

EXACTQ_AVX512 inline __mmask16 first_lanes(int n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u); }

EXACTQ_AVX512 void weights(float* s, int count, float m) {
  const __m512 minus_m = _mm512_set1_ps(order::negate(m));
  for (int j = 0; j < count; j += 16) {
    const __mmask16 lanes = first_lanes(count - j);
    const __m512 x = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, s + j), minus_m);
    _mm512_mask_storeu_ps(s + j, lanes, simd::exp16(x));
  }
}

// o_c for NH heads over dims [0, 64) of `values` (lanes past `dims` read and write nothing).
template <DType T, int NH>
EXACTQ_AVX512 void values_block(const float* e, const std::byte* values, std::size_t stride, int count, int dims,
                                float* o, std::size_t o_stride) {
  constexpr std::size_t es = dtype_size(T);
  __mmask16 lanes[4];
  __m512 acc[NH][4];
  for (int v = 0; v < 4; ++v) lanes[v] = dims > 16 * v ? first_lanes(dims - 16 * v) : __mmask16(0);
  for (int h = 0; h < NH; ++h)
    for (int v = 0; v < 4; ++v) acc[h][v] = _mm512_setzero_ps();
  for (int j = 0; j < count; ++j) {
    const std::byte* row = values + std::size_t(j) * stride;
    __m512 x[4];
    for (int v = 0; v < 4; ++v) x[v] = load16<T>(row + std::size_t(16 * v) * es, lanes[v]);
    for (int h = 0; h < NH; ++h) {
      const __m512 w = _mm512_set1_ps(e[h * kChunk + j]);
      for (int v = 0; v < 4; ++v) acc[h][v] = _mm512_fmadd_ps(w, x[v], acc[h][v]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int v = 0; v < 4; ++v) _mm512_mask_storeu_ps(o + std::size_t(h) * o_stride + 16 * v, lanes[v], acc[h][v]);
}

template <DType T>
void weighted_values_t(const float* e, int heads, const std::byte* values, std::size_t stride, int count, int d,
                       float* o, std::size_t o_stride) {
  for (int h = 0; h < heads; h += kBlockHeads)
    for (int i = 0; i < d; i += 64) {
      const float* eh = e + h * kChunk;
      const std::byte* vi = values + std::size_t(i) * dtype_size(T);
      float* oh = o + std::size_t(h) * o_stride + i;
      const int dims = std::min(64, d - i);
      switch (std::min(kBlockHeads, heads - h)) {
        case 1: values_block<T, 1>(eh, vi, stride, count, dims, oh, o_stride); break;
        case 2: values_block<T, 2>(eh, vi, stride, count, dims, oh, o_stride); break;
        case 3: values_block<T, 3>(eh, vi, stride, count, dims, oh, o_stride); break;
        default: values_block<T, 4>(eh, vi, stride, count, dims, oh, o_stride); break;
      }
    }
}

void weighted_values(const float* e, int heads, const std::byte* values, std::size_t stride, int count, int d,
                     DType t, float* o, std::size_t o_stride) {
  with_dtype(t, [&]<DType T>() { weighted_values_t<T>(e, heads, values, stride, count, d, o, o_stride); });
}

EXACTQ_AVX512 void fold(float* o, const float* o_c, int n, float a, float b) {
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 lanes = first_lanes(n - i);
    const __m512 folded = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, o + i), va,
                                          _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, o_c + i), vb));
    _mm512_mask_storeu_ps(o + i, lanes, folded);
  }
}

}  // namespace

const AttentionKernels avx512{scores, weights, weighted_values, fold};

}  // namespace exactq::cpu::attention_detail

#else
namespace exactq::cpu::attention_detail {
const AttentionKernels avx512{};  // never chosen: isa_available says no off x86
}
#endif
