// The exact family on AVX-512 with VNNI: 16 chunks per block, one vpdpbusd per 64 codes and digit.
//
// A block's 512 codes are decoded once into 8 registers whose 32-bit lane p holds 4 codes of
// chunk p; X's three signed-byte digits are staged in the same places (qmv_simd.h), so vpdpbusd
// accumulates each chunk's sums in its own lane and no horizontal add is needed. Per lane the
// sum (|.| < 2^36) is rounded to f32 once, as static_cast<float> rounds it (exact_float). Then
// the f32 steps of the scalar kernel, 16 lanes at once.
#include "ops/cpu/qmv_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/cpu/qmv_unpack_x86.h"

#define EXACTQ_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,bmi2,fma,f16c")))

namespace exactq::cpu::simd {
namespace {

// One row's group scales or biases widened to f32, 16 at a time (`out` is padded past them; a
// masked load reads nothing past the last group).
EXACTQ_AVX512 void widen(const std::byte* params, std::int64_t row, std::int64_t groups, DType t, float* out) {
  const std::size_t first = std::size_t(row * groups);
  for (std::int64_t g = 0; g < groups; g += 16) {
    const __mmask16 in = __mmask16(groups - g >= 16 ? 0xffffu : (1u << (groups - g)) - 1u);
    __m512 v;
    if (t == DType::f32) {
      v = _mm512_maskz_loadu_ps(in, reinterpret_cast<const float*>(params) + first + g);
    } else {
      const __m256i h = _mm256_maskz_loadu_epi16(in, reinterpret_cast<const std::uint16_t*>(params) + first + g);
      v = t == DType::f16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    _mm512_storeu_ps(out + g, v);
  }
}

// order::butterfly's lane 0, the 32 lanes halved by vector adds: after the step with mask m,
// lane l < m holds add(lane l, lane l + m), the same operations in the same order.
EXACTQ_AVX512 inline float butterfly(const float* lanes) {
  const __m512 r16 = _mm512_add_ps(_mm512_loadu_ps(lanes), _mm512_loadu_ps(lanes + 16));
  const __m256 r8 = _mm256_add_ps(_mm512_castps512_ps256(r16), _mm512_extractf32x8_ps(r16, 1));
  const __m128 r4 = _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
  const __m128 r2 = _mm_add_ps(r4, _mm_movehl_ps(r4, r4));
  return _mm_cvtss_f32(_mm_add_ss(r2, _mm_movehdup_ps(r2)));
}

// The 512 codes of a block into 8 registers, 32-bit lane p of each holding 4 codes of chunk p
// (Layout::bytes_avx512 and nibbles_avx512). Decoded once per block, whatever the number of vectors.
template <int BITS>
EXACTQ_AVX512 inline void load_codes(const std::uint8_t* src, int bits, __m512i r[8]) {
  if constexpr (BITS == 4) {
    // 64 bytes hold chunks 4i..4i+3, a chunk per 128-bit quarter. A 4x4 transpose of 32-bit words
    // within the quarters gives u[t]: quarter q, word i = word t of chunk 4i+q; a permute puts
    // chunk p in word p. Then the low nibbles and the high ones.
    __m512i v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm512_loadu_si512(src + 64 * i);
    const __m512i a = _mm512_unpacklo_epi32(v[0], v[1]), b = _mm512_unpackhi_epi32(v[0], v[1]);
    const __m512i c = _mm512_unpacklo_epi32(v[2], v[3]), d = _mm512_unpackhi_epi32(v[2], v[3]);
    const __m512i u[4] = {_mm512_unpacklo_epi64(a, c), _mm512_unpackhi_epi64(a, c), _mm512_unpacklo_epi64(b, d),
                          _mm512_unpackhi_epi64(b, d)};
    const __m512i to_chunk = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i low = _mm512_set1_epi8(0x0f);
    for (int t = 0; t < 4; ++t) {
      const __m512i w = _mm512_permutexvar_epi32(to_chunk, u[t]);
      r[2 * t] = _mm512_and_si512(w, low);
      r[2 * t + 1] = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
    }
  } else {
    // Each 8 codes of a chunk (one 64-bit word of bytes) become words 2g and 2g+1 of lane p.
    alignas(64) std::uint32_t words[8][kBlockChunks];
    for (int p = 0; p < int(kBlockChunks); ++p)
      for (int g = 0; g < kChunkValues / 8; ++g) {
        std::uint64_t codes;
        if constexpr (BITS == 8) std::memcpy(&codes, src + p * kChunkValues + 8 * g, 8);
        else unpack_codes8(src + p * chunk_bytes(bits) + g * bits, bits, &codes);
        words[2 * g][p] = std::uint32_t(codes);
        words[2 * g + 1][p] = std::uint32_t(codes >> 32);
      }
    for (int t = 0; t < 8; ++t) r[t] = _mm512_load_si512(words[t]);
  }
}

// f32(l + 2^16 h), rounded once as static_cast<float> rounds the exact int64 sum: with
// a = h + (l >> 16) and b = l & 0xffff, l + 2^16 h = 2^16 a + b exactly, a and b are exact in f32
// (|a| < 2^21, b < 2^16), and one fma rounds 2^16 a + b once.
EXACTQ_AVX512 inline __m512 exact_float(__m512i l, __m512i h) {
  const __m512 a = _mm512_cvtepi32_ps(_mm512_add_epi32(h, _mm512_srai_epi32(l, 16)));
  const __m512 b = _mm512_cvtepi32_ps(_mm512_and_si512(l, _mm512_set1_epi32(0xffff)));
  return _mm512_fmadd_ps(a, _mm512_set1_ps(65536.0f), b);
}

// The exact sums sum q_i X_i of the block's 16 chunks against one vector, each rounded to f32.
// Per 32-bit lane and digit the sums stay inside int32 (|d0 + 256 d1| sums < 2^29, d2 sums < 2^20).
EXACTQ_AVX512 inline __m512 chunk_sums(const __m512i r[8], const Staged& x, std::int64_t v, std::int64_t c0) {
  const std::int64_t at = 32 * c0;  // the block's 512 bytes in each digit plane
  __m512i s[2][3];
  for (int d = 0; d < 3; ++d) {
    const std::uint8_t* plane = x.plane(v, d) + at;
    for (int h = 0; h < 2; ++h) {  // two chains per digit: shorter dependencies
      s[h][d] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), r[h], _mm512_loadu_si512(plane + 64 * h));
      for (int t = 2 + h; t < 8; t += 2) s[h][d] = _mm512_dpbusd_epi32(s[h][d], r[t], _mm512_loadu_si512(plane + 64 * t));
    }
  }
  const __m512i l = _mm512_add_epi32(_mm512_add_epi32(s[0][0], s[1][0]),
                                     _mm512_slli_epi32(_mm512_add_epi32(s[0][1], s[1][1]), 8));
  const __m512i h = _mm512_add_epi32(s[0][2], s[1][2]);
  return exact_float(l, h);
}

// Rows in groups of kRows, block by block: a block's digits for the whole tile (1.5 KiB per
// vector) stay in L1 while the group's rows pass over them, and each row's codes are read once.
inline constexpr std::int64_t kRows = 16;

template <int BITS>
EXACTQ_AVX512 void rows(const QuantizedMatrixView& w, const Staged& x, std::int64_t v0, int tile, std::int64_t first,
                        std::int64_t end, std::span<std::byte> y) {
  const std::int64_t chunks = x.chunks, groups = w.groups_per_row(), per_group = w.group / kChunkValues;
  const std::size_t params = std::size_t(x.padded + 16);  // past the last group: loads of 16 stay inside
  const int bytes = chunk_bytes(w.bits);
  std::vector<float> scales(kRows * params), biases(kRows * params);
  std::vector<float> lanes(std::size_t(kRows * tile * order::kLanes));  // [row][vector][lane]
  alignas(64) std::uint8_t tail[kBlockChunks * kChunkValues];
  const __m512i expand = per_group == 1   ? _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
                         : per_group == 2 ? _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)
                                          : _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  for (std::int64_t n0 = first; n0 < end; n0 += kRows) {
    const std::int64_t count = std::min(kRows, end - n0);
    for (std::int64_t j = 0; j < count; ++j) {
      widen(w.scales.data(), n0 + j, groups, w.dtype, scales.data() + j * params);
      widen(w.biases.data(), n0 + j, groups, w.dtype, biases.data() + j * params);
    }
    std::fill(lanes.begin(), lanes.end(), 0.0f);
    for (std::int64_t c0 = 0; c0 < chunks; c0 += kBlockChunks) {
      const int valid = int(std::min<std::int64_t>(kBlockChunks, chunks - c0));
      // A lane without a chunk in this block adds nothing, not even +0 (it would turn -0 into +0).
      const __mmask16 has_chunk = __mmask16((1u << valid) - 1u);
      for (std::int64_t j = 0; j < count; ++j) {
        const std::uint8_t* src = w.packed.data() + (n0 + j) * w.row_bytes() + c0 * bytes;
        if (valid < kBlockChunks) {  // the row's last block: no read past the row
          std::memset(tail, 0, sizeof tail);
          std::memcpy(tail, src, std::size_t(valid * bytes));
          src = tail;
        }
        __m512i r[8];
        load_codes<BITS>(src, w.bits, r);
        const __m512 scale = _mm512_permutexvar_ps(expand, _mm512_loadu_ps(scales.data() + j * params + c0 / per_group));
        const __m512 bias = _mm512_permutexvar_ps(expand, _mm512_loadu_ps(biases.data() + j * params + c0 / per_group));
        for (int t = 0; t < tile; ++t) {
          const __m512 a = _mm512_mul_ps(chunk_sums(r, x, v0 + t, c0), _mm512_loadu_ps(x.unscale(v0 + t) + c0));
          const __m512 fold = _mm512_fmadd_ps(scale, a, _mm512_mul_ps(bias, _mm512_loadu_ps(x.sum(v0 + t) + c0)));
          float* at = lanes.data() + (j * tile + t) * order::kLanes + c0 % order::kLanes;
          const __m512 total = _mm512_loadu_ps(at);
          _mm512_storeu_ps(at, _mm512_mask_add_ps(total, has_chunk, total, fold));
        }
      }
    }
    for (std::int64_t j = 0; j < count; ++j)
      for (int t = 0; t < tile; ++t)
        store_f32(y.data(), std::size_t((v0 + t) * w.n + n0 + j), w.dtype,
                  butterfly(lanes.data() + (j * tile + t) * order::kLanes));
  }
}

}  // namespace

RowsKernel avx512_rows(int bits) { return bits == 4 ? rows<4> : bits == 8 ? rows<8> : rows<0>; }
Layout avx512_layout(int bits) { return bits == 4 ? Layout::nibbles_avx512 : Layout::bytes_avx512; }

}  // namespace exactq::cpu::simd

#else
namespace exactq::cpu::simd {
RowsKernel avx512_rows(int) { return nullptr; }
Layout avx512_layout(int) { return Layout::bytes_avx512; }
}  // namespace exactq::cpu::simd
#endif
