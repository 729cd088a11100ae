// The exact family on AVX-512 with VNNI: 16 chunks per block, one vpdpbusd per 64 codes and digit.
//
// A block's 512 codes sit in 8 registers whose 128-bit quarters each hold part of one chunk (at
// 4 bits: 64 bytes are 4 chunks, split into their low and high nibbles; otherwise 2 chunks of
// byte codes per register). vpdpbusd meets them with X's three signed-byte digits, staged in the
// same places (qmv_simd.h), and sums 4 products per 32-bit lane. Per lane and digit the sums stay
// far inside int32 (|d0 + 256 d1| sums < 2^29, d2 sums < 2^20); a transposing add gives each chunk
// its two sums, and lo + 2^16 hi, < 2^36, is exact in double and rounded to f32 once, as
// static_cast<float>(int64) rounds it. Then the f32 steps of the scalar kernel, 16 lanes at once.
#include "ops/cpu/qmv_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/cpu/qmv_unpack_x86.h"

#define EXACTQ_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,bmi2,fma,f16c")))

namespace exactq::cpu::simd {
namespace {

// One row's group scales or biases widened to f32, 16 at a time (`out` is padded past them).
EXACTQ_AVX512 void widen(const std::byte* params, std::int64_t row, std::int64_t groups, DType t, float* out) {
  const std::size_t first = std::size_t(row * groups);
  std::int64_t g = 0;
  for (; g + 16 <= groups; g += 16) {
    __m512 v;
    if (t == DType::f32) {
      v = _mm512_loadu_ps(reinterpret_cast<const float*>(params) + first + g);
    } else {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const std::uint16_t*>(params) + first + g));
      v = t == DType::f16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    _mm512_storeu_ps(out + g, v);
  }
  for (; g < groups; ++g) out[g] = load_f32(params, first + std::size_t(g), t);
}

// The 512 codes of a block into 8 registers. At 4 bits register 2i holds the low nibbles of
// chunks 4i..4i+3 (a chunk per 128-bit quarter), 2i+1 their high nibbles; otherwise register j
// holds chunks 2j and 2j+1 (two quarters each).
template <int BITS>
EXACTQ_AVX512 inline void load_codes(const std::uint8_t* src, int bits, __m512i r[8]) {
  if constexpr (BITS == 4) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    for (int i = 0; i < 4; ++i) {
      const __m512i v = _mm512_loadu_si512(src + 64 * i);
      r[2 * i] = _mm512_and_si512(v, low);
      r[2 * i + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    }
  } else if constexpr (BITS == 8) {
    for (int j = 0; j < 8; ++j) r[j] = _mm512_loadu_si512(src + 64 * j);
  } else {
    alignas(64) std::uint8_t codes[kBlockChunks * kChunkValues];
    unpack_chunks(src, bits, codes, int(kBlockChunks));
    for (int j = 0; j < 8; ++j) r[j] = _mm512_load_si512(codes + 64 * j);
  }
}

// Four registers whose quarter q of register i holds partial sums of chunk 4i+q, summed to one
// register holding chunk c's total in lane c.
EXACTQ_AVX512 inline __m512i reduce4(const __m512i a[4]) {
  const __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
  const __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
  const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
  // s: quarter q, lane i holds chunk 4i+q.
  const __m512i to_chunk_order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(to_chunk_order, s);
}

// The exact sums sum q_i X_i of the block's 16 chunks against one vector, each rounded to f32.
template <int BITS>
EXACTQ_AVX512 inline __m512 chunk_sums(const __m512i r[8], const Staged& x, std::int64_t v, std::int64_t c0) {
  const std::uint8_t* p[3] = {x.plane(v, 0), x.plane(v, 1), x.plane(v, 2)};
  __m512i lo[4], hi[4];  // d0 + 256 d1 sums, and d2 sums, per 32-bit lane
  if constexpr (BITS == 4) {
    for (int i = 0; i < 4; ++i) {
      const std::int64_t even = 16 * (c0 + 4 * i), odd = even + 16 * x.padded;
      __m512i s[3];
      for (int d = 0; d < 3; ++d)
        s[d] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), r[2 * i], _mm512_loadu_si512(p[d] + even)),
                                   r[2 * i + 1], _mm512_loadu_si512(p[d] + odd));
      lo[i] = _mm512_add_epi32(s[0], _mm512_slli_epi32(s[1], 8));
      hi[i] = s[2];
    }
  } else {
    __m512i l8[8], h8[8];
    for (int j = 0; j < 8; ++j) {
      const std::int64_t at = 32 * (c0 + 2 * j);
      __m512i s[3];
      for (int d = 0; d < 3; ++d) s[d] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), r[j], _mm512_loadu_si512(p[d] + at));
      l8[j] = _mm512_add_epi32(s[0], _mm512_slli_epi32(s[1], 8));
      h8[j] = s[2];
    }
    // Registers 2i and 2i+1 hold chunks 4i..4i+3, two quarters each: add the quarter pairs.
    for (int i = 0; i < 4; ++i) {
      lo[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(l8[2 * i], l8[2 * i + 1], 0x88),
                               _mm512_shuffle_i32x4(l8[2 * i], l8[2 * i + 1], 0xdd));
      hi[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(h8[2 * i], h8[2 * i + 1], 0x88),
                               _mm512_shuffle_i32x4(h8[2 * i], h8[2 * i + 1], 0xdd));
    }
  }
  const __m512i l = reduce4(lo), h = reduce4(hi);
  const __m512d scale = _mm512_set1_pd(65536.0);
  const __m512d t0 = _mm512_add_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(l)),
                                   _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(h)), scale));
  const __m512d t1 = _mm512_add_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(l, 1)),
                                   _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(h, 1)), scale));
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(t0)), _mm512_cvtpd_ps(t1), 1);
}

template <int BITS>
EXACTQ_AVX512 void rows(const QuantizedMatrixView& w, const Staged& x, std::int64_t v0, int tile, std::int64_t first,
                        std::int64_t end, std::span<std::byte> y) {
  const std::int64_t chunks = x.chunks, groups = w.groups_per_row(), per_group = w.group / kChunkValues;
  const int bytes = chunk_bytes(w.bits);
  std::vector<float> scales(std::size_t(x.padded + 16)), biases(scales.size());
  std::vector<float> lanes(std::size_t(order::kLanes * tile));  // per vector of the tile: its 32 lanes
  alignas(64) std::uint8_t tail[kBlockChunks * kChunkValues];
  const __m512i expand = per_group == 1   ? _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
                         : per_group == 2 ? _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)
                                          : _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  for (std::int64_t n = first; n < end; ++n) {
    widen(w.scales.data(), n, groups, w.dtype, scales.data());
    widen(w.biases.data(), n, groups, w.dtype, biases.data());
    std::fill(lanes.begin(), lanes.end(), 0.0f);
    const std::uint8_t* row = w.packed.data() + n * w.row_bytes();
    for (std::int64_t c0 = 0; c0 < chunks; c0 += kBlockChunks) {
      const int valid = int(std::min<std::int64_t>(kBlockChunks, chunks - c0));
      const std::uint8_t* src = row + c0 * bytes;
      if (valid < kBlockChunks) {  // the row's last block: no read past the row
        std::memset(tail, 0, sizeof tail);
        std::memcpy(tail, src, std::size_t(valid * bytes));
        src = tail;
      }
      __m512i r[8];
      load_codes<BITS>(src, w.bits, r);
      const __m512 scale = _mm512_permutexvar_ps(expand, _mm512_loadu_ps(scales.data() + c0 / per_group));
      const __m512 bias = _mm512_permutexvar_ps(expand, _mm512_loadu_ps(biases.data() + c0 / per_group));
      // A lane without a chunk in this block adds nothing, not even +0 (it would turn -0 into +0).
      const __mmask16 has_chunk = __mmask16((1u << valid) - 1u);
      for (int t = 0; t < tile; ++t) {
        const __m512 a = _mm512_mul_ps(chunk_sums<BITS>(r, x, v0 + t, c0), _mm512_loadu_ps(x.unscale(v0 + t) + c0));
        const __m512 fold = _mm512_fmadd_ps(scale, a, _mm512_mul_ps(bias, _mm512_loadu_ps(x.sum(v0 + t) + c0)));
        float* at = lanes.data() + order::kLanes * t + c0 % order::kLanes;
        const __m512 total = _mm512_loadu_ps(at);
        _mm512_storeu_ps(at, _mm512_mask_add_ps(total, has_chunk, total, fold));
      }
    }
    for (int t = 0; t < tile; ++t) {
      store_f32(y.data(), std::size_t((v0 + t) * w.n + n), w.dtype, order::butterfly(lanes.data() + order::kLanes * t));
    }
  }
}

}  // namespace

RowsKernel avx512_rows(int bits) { return bits == 4 ? rows<4> : bits == 8 ? rows<8> : rows<0>; }
Layout avx512_layout(int bits) { return bits == 4 ? Layout::nibbles_avx512 : Layout::natural; }

}  // namespace exactq::cpu::simd

#else
namespace exactq::cpu::simd {
RowsKernel avx512_rows(int) { return nullptr; }
Layout avx512_layout(int) { return Layout::natural; }
}  // namespace exactq::cpu::simd
#endif
