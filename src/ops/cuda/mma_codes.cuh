// qmv_mma's exact conversions and its tensor-core step, shared by both kernels: a lane's codes to
// the bf16/f16 pairs of its mma A fragment (exact: every code is an integer below 2^8), group
// parameters to f32, and the m16n8k16 step.
#pragma once
#include <cuda_bf16.h>

#include "ops/cuda/common.cuh"
#include "exactq/mma_layout.h"

namespace exactq::cuda_detail::mma {

// A group parameter's 16 raw bits as f32 (exact), with the dtype known at compile time.
template <bool BF16>
__device__ __forceinline__ float widen_param(std::uint32_t raw16) {
  return BF16 ? __uint_as_float(raw16 << 16) : __half2float(__ushort_as_half(std::uint16_t(raw16)));
}

// Two codes' bf16/f16 patterns from 16-bit halves that hold (magic | code): the magic is the
// float whose unit in the last place is 1 (128 in bf16, 1024 in f16), so subtracting it leaves
// the code exactly.
template <bool BF16>
__device__ __forceinline__ std::uint32_t exact_pair(std::uint32_t magic_or_codes) {
  if constexpr (BF16) {
    const __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&magic_or_codes);
    const __nv_bfloat162 r = __hsub2(v, __floats2bfloat162_rn(128.0f, 128.0f));
    return *reinterpret_cast<const std::uint32_t*>(&r);
  } else {
    const __half2 v = *reinterpret_cast<const __half2*>(&magic_or_codes);
    const __half2 r = __hsub2(v, __floats2half2_rn(1024.0f, 1024.0f));
    return *reinterpret_cast<const std::uint32_t*>(&r);
  }
}

// Two f16 codes from halves that hold 1024 + 16 c (a code masked in place at bits 4-7): exactly c.
__device__ __forceinline__ std::uint32_t sixteenths_pair(std::uint32_t magic_or_codes) {
  const __half2 v = *reinterpret_cast<const __half2*>(&magic_or_codes);
  const __half2 r = __hfma2(v, __floats2half2_rn(0.0625f, 0.0625f), __floats2half2_rn(-64.0f, -64.0f));
  return *reinterpret_cast<const std::uint32_t*>(&r);
}

// (x & MASK) | MAGIC in one LOP3; left to itself the compiler emits an AND and an OR (LOP3 takes
// one immediate).
template <std::uint32_t MASK, std::uint32_t MAGIC>
__device__ __forceinline__ std::uint32_t and_or(std::uint32_t x) {
  std::uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(x), "n"(MASK), "n"(MAGIC));
  return r;
}

// The 8 codes of a lane for one chunk and row, as the 4 A registers of the two k-steps:
// pairs (c0,c4), (c1,c5), (c2,c6), (c3,c7) of codes c0..c7 = 8t .. 8t+7.
template <int BITS, bool BF16>
__device__ __forceinline__ void codes_to_pairs(const std::uint32_t* w, std::uint32_t (&pair)[4]) {
  if constexpr (BITS == 4 && BF16) {
    // Word w[0] holds c_i at bits 4i. (w >> 4i) & 0x000F000F puts c_i and c_{i+4} in the halves.
    // bf16 has 7 mantissa bits, so a code must sit at bits 0-3 of its half: one shift per pair.
#pragma unroll
    for (int i = 0; i < 4; ++i) pair[i] = exact_pair<true>(and_or<0x000F000Fu, 0x43004300u>(w[0] >> (4 * i)));
  } else if constexpr (BITS == 4) {
    // f16 has 10 mantissa bits, so codes at bits 4-7 of a half can stay in place: 1024 + 16 c is
    // exact, and fma(1024 + 16 c, 1/16, -64) = c with one rounding of an exact value. So pairs 0
    // and 1 come from w itself and pairs 2 and 3 from w >> 8: one shift per word, not three. The
    // pairs are the same values, so the bits are too.
    const std::uint32_t w8 = w[0] >> 8;
    pair[0] = exact_pair<false>(and_or<0x000F000Fu, 0x64006400u>(w[0]));
    pair[1] = sixteenths_pair(and_or<0x00F000F0u, 0x64006400u>(w[0]));
    pair[2] = exact_pair<false>(and_or<0x000F000Fu, 0x64006400u>(w8));
    pair[3] = sixteenths_pair(and_or<0x00F000F0u, 0x64006400u>(w8));
  } else {
    static_assert(BITS == 8);
    // w[0] holds c0..c3 and w[1] holds c4..c7, one byte each.
    if constexpr (!BF16) {
      // f16 has 10 mantissa bits: 1024 + c is exact for c < 1024.
#pragma unroll
      for (int i = 0; i < 4; ++i)
        pair[i] = exact_pair<false>(and_or<0x00FF00FFu, 0x64006400u>(__byte_perm(w[0], w[1], 0x0400 + 0x0101 * i)));
    } else {
      // bf16 has 7 mantissa bits: split c = 16 h + l, each exact as 128 + nibble, and recombine
      // with results that are all exact in bf16: 16 (128 + h) - 2176 = 16 (h - 8), then
      // + (128 + l) = c.
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const std::uint32_t bytes = __byte_perm(w[0], w[1], 0x0400 + 0x0101 * i);  // c_i, c_{i+4} in the halves
        const std::uint32_t lo = and_or<0x000F000Fu, 0x43004300u>(bytes);
        const std::uint32_t hi = and_or<0x000F000Fu, 0x43004300u>(bytes >> 4);
        const __nv_bfloat162 l = *reinterpret_cast<const __nv_bfloat162*>(&lo);
        const __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&hi);
        const __nv_bfloat162 r =
            __hadd2(__hfma2(h, __floats2bfloat162_rn(16.0f, 16.0f), __floats2bfloat162_rn(-2176.0f, -2176.0f)), l);
        pair[i] = *reinterpret_cast<const std::uint32_t*>(&r);
      }
    }
  }
}

// r | (b & MASK) in one LOP3.
template <std::uint32_t MASK>
__device__ __forceinline__ std::uint32_t or_and(std::uint32_t r, std::uint32_t b) {
  std::uint32_t out;
  asm("lop3.b32 %0, %1, %2, %3, 0xF8;" : "=r"(out) : "r"(r), "r"(b), "n"(MASK));
  return out;
}

// 2, 3, 5 and 6 bits (the fragment layout's bit planes, exactq/mma_layout.h): pair i of chunk j of
// half h from the lane's round words `w`, a shift and a mask per plane (the planes' fields land at
// their place in the code), then the magic number's exact subtraction. The same pairs, so the
// same mma inputs, as the codes themselves: h, j and i are constants once the loops unroll.
template <int BITS, bool BF16>
__device__ __forceinline__ void planar_pairs(const std::uint32_t* w, int h, int j, std::uint32_t (&pair)[4]) {
  namespace ml = mma_layout;
  constexpr std::uint32_t kMagic = BF16 ? 0x43004300u : 0x64006400u;  // 128 / 1024: codes < 2^7 stay exact
  constexpr std::uint32_t kLow = ml::plane_mask(BITS, 0);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    std::uint32_t r = and_or<kLow, kMagic>(ml::shifted(w[ml::plane_word(BITS, 0, h, j)], ml::plane_shift(BITS, 0, j, i)));
    if constexpr (ml::plane_count(BITS) == 2)
      r = or_and<ml::plane_mask(BITS, 1)>(r, ml::shifted(w[ml::plane_word(BITS, 1, h, j)], ml::plane_shift(BITS, 1, j, i)));
    pair[i] = exact_pair<BF16>(r);
  }
}

// The pairs of chunk j of half h (rows g, g + 8) from a lane's round words in the fragment layout:
// 4 and 8 bits through codes_to_pairs (at 4 bits the planes' rule is MLX's word, which
// codes_to_pairs reads with fewer instructions in f16), the others through their planes.
template <int BITS, bool BF16>
__device__ __forceinline__ void fragment_pairs(const std::uint32_t* w, int h, int j, std::uint32_t (&pair)[4]) {
  if constexpr (BITS == 4 || BITS == 8)
    codes_to_pairs<BITS, BF16>(w + h * mma_layout::round_row_bytes(BITS, 0) / 16 + j * (BITS / 4), pair);
  else
    planar_pairs<BITS, BF16>(w, h, j, pair);
}

// One m16n8k16 step, d += A B: A (16 x 16) and B (16 x 8) in bf16 or f16, d in f32.
template <bool BF16>
__device__ __forceinline__ void mma_step(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  if constexpr (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

}  // namespace exactq::cuda_detail::mma
