// The exact family on AVX2: 8 chunks per block, one chunk's 32 codes per register.
//
// AVX2 has no vpdpbusd; vpmaddubsw (unsigned codes times X's signed-byte digits, adjacent pairs
// added into int16) then vpmaddwd with ones (pairs into int32) computes the same sums, exactly
// while a pair stays inside int16: codes below 2^7 keep |q0 d0 + q1 d1| <= 2 * 127 * 128. 8-bit
// codes are therefore split into nibbles, q = low + 16 high, each dotted on its own. Per lane the
// int32 sums stay far from overflow (as on AVX-512), a horizontal add gives each chunk its two
// sums, rounded to f32 once (exact_float). Then the scalar kernel's f32 steps, 8 lanes at once.
#include "ops/cpu/qmv_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/cpu/qmv_unpack_x86.h"

#define EXACTQ_AVX2 __attribute__((target("avx2,fma,f16c,bmi2")))

namespace exactq::cpu::simd {
namespace {

inline constexpr int kBlock = 8;

// One row's group scales or biases widened to f32, 8 at a time (`out` is padded past them).
EXACTQ_AVX2 void widen(const std::byte* params, std::int64_t row, std::int64_t groups, DType t, float* out) {
  const std::size_t first = std::size_t(row * groups);
  std::int64_t g = 0;
  for (; g + 8 <= groups; g += 8) {
    __m256 v;
    if (t == DType::f32) {
      v = _mm256_loadu_ps(reinterpret_cast<const float*>(params) + first + g);
    } else {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const std::uint16_t*>(params) + first + g));
      v = t == DType::f16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    _mm256_storeu_ps(out + g, v);
  }
  for (; g < groups; ++g) out[g] = load_f32(params, first + std::size_t(g), t);
}

// order::butterfly's lane 0, the 32 lanes halved by vector adds: after the step with mask m,
// lane l < m holds add(lane l, lane l + m), the same operations in the same order.
EXACTQ_AVX2 inline float butterfly(const float* lanes) {
  const __m256 r8 = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(lanes), _mm256_loadu_ps(lanes + 16)),
                                  _mm256_add_ps(_mm256_loadu_ps(lanes + 8), _mm256_loadu_ps(lanes + 24)));
  const __m128 r4 = _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
  const __m128 r2 = _mm_add_ps(r4, _mm_movehl_ps(r4, r4));
  return _mm_cvtss_f32(_mm_add_ss(r2, _mm_movehdup_ps(r2)));
}

// The 256 codes of a block, a chunk per register. At 4 bits a chunk's 16 bytes go to both
// halves, the upper half shifted by 4: its low nibbles (even codes), then its high ones. At
// 8 bits a chunk takes two registers (r and r + 8): its low nibbles and its high ones.
template <int BITS>
EXACTQ_AVX2 inline void load_codes(const std::uint8_t* src, int bits, __m256i r[2 * kBlock]) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  if constexpr (BITS == 4) {
    const __m256i shifts = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    for (int j = 0; j < kBlock; ++j) {
      const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * j)));
      r[j] = _mm256_and_si256(_mm256_srlv_epi32(v, shifts), low);
    }
  } else if constexpr (BITS == 8) {
    for (int j = 0; j < kBlock; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32 * j));
      r[j] = _mm256_and_si256(v, low);
      r[j + kBlock] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
    }
  } else {
    alignas(32) std::uint8_t codes[kBlock * kChunkValues];
    unpack_chunks(src, bits, codes, kBlock);
    for (int j = 0; j < kBlock; ++j) r[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 32 * j));
  }
}

// sum over a register's 32 code bytes of code * digit, as 8 int32 partial sums.
EXACTQ_AVX2 inline __m256i byte_dot(__m256i codes, const std::uint8_t* digits) {
  const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(digits));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(codes, d), _mm256_set1_epi16(1));
}

// Eight registers of 8 partial sums (register j: chunk j) to one register with chunk j's total in lane j.
EXACTQ_AVX2 inline __m256i reduce8(const __m256i a[kBlock]) {
  const __m256i q0 = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
  const __m256i q1 = _mm256_hadd_epi32(_mm256_hadd_epi32(a[4], a[5]), _mm256_hadd_epi32(a[6], a[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

// f32(l + 2^16 h), rounded once as static_cast<float> rounds the exact int64 sum: with
// a = h + (l >> 16) and b = l & 0xffff, l + 2^16 h = 2^16 a + b exactly, a and b are exact in f32
// (|a| < 2^21, b < 2^16), and one fma rounds 2^16 a + b once.
EXACTQ_AVX2 inline __m256 exact_float(__m256i l, __m256i h) {
  const __m256 a = _mm256_cvtepi32_ps(_mm256_add_epi32(h, _mm256_srai_epi32(l, 16)));
  const __m256 b = _mm256_cvtepi32_ps(_mm256_and_si256(l, _mm256_set1_epi32(0xffff)));
  return _mm256_fmadd_ps(a, _mm256_set1_ps(65536.0f), b);
}

// The exact sums sum q_i X_i of the block's 8 chunks against one vector, each rounded to f32.
template <int BITS>
EXACTQ_AVX2 inline __m256 chunk_sums(const __m256i r[2 * kBlock], const Staged& x, std::int64_t v, std::int64_t c0) {
  const std::uint8_t* p[3] = {x.plane(v, 0), x.plane(v, 1), x.plane(v, 2)};
  __m256i lo[kBlock], hi[kBlock];  // d0 + 256 d1 sums, and d2 sums, per 32-bit lane
  for (int j = 0; j < kBlock; ++j) {
    const std::int64_t at = 32 * (c0 + j);
    __m256i s[3];
    for (int d = 0; d < 3; ++d) {
      s[d] = byte_dot(r[j], p[d] + at);
      if constexpr (BITS == 8) s[d] = _mm256_add_epi32(s[d], _mm256_slli_epi32(byte_dot(r[j + kBlock], p[d] + at), 4));
    }
    lo[j] = _mm256_add_epi32(s[0], _mm256_slli_epi32(s[1], 8));
    hi[j] = s[2];
  }
  const __m256i l = reduce8(lo), h = reduce8(hi);
  return exact_float(l, h);
}

template <int BITS>
EXACTQ_AVX2 void rows(const QuantizedMatrixView& w, const Staged& x, std::int64_t v0, int tile, std::int64_t first,
                      std::int64_t end, std::span<std::byte> y) {
  const std::int64_t chunks = x.chunks, groups = w.groups_per_row(), per_group = w.group / kChunkValues;
  const int bytes = chunk_bytes(w.bits);
  std::vector<float> scales(std::size_t(x.padded + 16)), biases(scales.size());
  std::vector<float> lanes(std::size_t(order::kLanes * tile));  // per vector of the tile: its 32 lanes
  alignas(32) std::uint8_t tail[kBlock * kChunkValues];
  const __m256i expand = per_group == 1   ? _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
                         : per_group == 2 ? _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)
                                          : _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const __m256i lane_index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (std::int64_t n = first; n < end; ++n) {
    widen(w.scales.data(), n, groups, w.dtype, scales.data());
    widen(w.biases.data(), n, groups, w.dtype, biases.data());
    std::fill(lanes.begin(), lanes.end(), 0.0f);
    const std::uint8_t* row = w.packed.data() + n * w.row_bytes();
    for (std::int64_t c0 = 0; c0 < chunks; c0 += kBlock) {
      const int valid = int(std::min<std::int64_t>(kBlock, chunks - c0));
      const std::uint8_t* src = row + c0 * bytes;
      if (valid < kBlock) {  // the row's last block: no read past the row
        std::memset(tail, 0, sizeof tail);
        std::memcpy(tail, src, std::size_t(valid * bytes));
        src = tail;
      }
      __m256i r[2 * kBlock];
      load_codes<BITS>(src, w.bits, r);
      const __m256 scale = _mm256_permutevar8x32_ps(_mm256_loadu_ps(scales.data() + c0 / per_group), expand);
      const __m256 bias = _mm256_permutevar8x32_ps(_mm256_loadu_ps(biases.data() + c0 / per_group), expand);
      // A lane without a chunk in this block adds nothing, not even +0 (it would turn -0 into +0).
      const __m256 has_chunk = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(valid), lane_index));
      for (int t = 0; t < tile; ++t) {
        const __m256 a = _mm256_mul_ps(chunk_sums<BITS>(r, x, v0 + t, c0), _mm256_loadu_ps(x.unscale(v0 + t) + c0));
        const __m256 fold = _mm256_fmadd_ps(scale, a, _mm256_mul_ps(bias, _mm256_loadu_ps(x.sum(v0 + t) + c0)));
        float* at = lanes.data() + order::kLanes * t + c0 % order::kLanes;
        const __m256 total = _mm256_loadu_ps(at);
        _mm256_storeu_ps(at, _mm256_blendv_ps(total, _mm256_add_ps(total, fold), has_chunk));
      }
    }
    for (int t = 0; t < tile; ++t) {
      store_f32(y.data(), std::size_t((v0 + t) * w.n + n), w.dtype, butterfly(lanes.data() + order::kLanes * t));
    }
  }
}

}  // namespace

RowsKernel avx2_rows(int bits) { return bits == 4 ? rows<4> : bits == 8 ? rows<8> : rows<0>; }
Layout avx2_layout(int bits) { return bits == 4 ? Layout::nibbles_avx2 : Layout::natural; }

}  // namespace exactq::cpu::simd

#else
namespace exactq::cpu::simd {
RowsKernel avx2_rows(int) { return nullptr; }
Layout avx2_layout(int) { return Layout::natural; }
}  // namespace exactq::cpu::simd
#endif
