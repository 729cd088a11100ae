// The chunk dot of the qmv family: one chunk of ROWS rows against V vectors' staged X, folded into
// each (row, vector)'s lane chain in the order of docs/design.md §3.
#pragma once

#include "ops/cuda/family_staging.cuh"

namespace exactq::cuda_detail {

// The exact code dot of a chunk of one row with one vector's X: below 2^31 in magnitude up to
// 4 bits (32 * 15 * 2^22 < 2^31), so 32-bit arithmetic (wrapping, as unsigned) holds it; up to 2^36 above.
template <int BITS>
using CodeDot = std::conditional_t<(BITS <= 4), std::uint32_t, std::int64_t>;
template <int BITS>
__device__ __forceinline__ float code_dot_value(CodeDot<BITS> dot, float unscale) {
  if constexpr (BITS <= 4) {
    return order::chunk_value(order::exact_float(static_cast<std::int32_t>(dot)), unscale);
  } else {
    return order::chunk_value(order::exact_float(dot), unscale);
  }
}

// One chunk of ROWS rows against V vectors: the order of docs/design.md §3, per (row, vector).
// With PARK, total receives the chunk's folded value itself (the term lane_add would add), to be
// added in order later by the warp that owns the lane's chain.
template <int BITS, int V, int ROWS, bool PARK = false>
__device__ __forceinline__ void chunk_step(const std::uint32_t (&w)[ROWS][BITS], const float (&scale)[ROWS],
                                           const float (&bias)[ROWS], const uint4* pieces, int vector_stride,
                                           const float2* facts, int facts_stride, int c, float (&total)[ROWS][V]) {
  CodeDot<BITS> dot[ROWS][V];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int v = 0; v < V; ++v) dot[r][v] = 0;
  const uint4* base = pieces + piece_index<BITS>(c, 0);
  if constexpr (kByteDot<BITS>) {
    // Mask k of code word j keeps each byte's code times 2^(k*BITS); three dp4a sum it against the
    // three digits of X, and the shift back by k*BITS is exact (each sum is a multiple of it).
    constexpr int masks = 8 / BITS;
    constexpr std::uint32_t low_codes = 0x01010101u * ((1u << BITS) - 1u);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      std::uint32_t digits[3 * kSlots];
#pragma unroll
      for (int j = 0; j < kPieces<BITS>; ++j) {
        const uint4 q = base[v * vector_stride + j * 32];
        digits[4 * j] = q.x, digits[4 * j + 1] = q.y, digits[4 * j + 2] = q.z, digits[4 * j + 3] = q.w;
      }
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        int part[masks][3];
#pragma unroll
        for (int k = 0; k < masks; ++k) part[k][0] = part[k][1] = part[k][2] = 0;
#pragma unroll
        for (int j = 0; j < BITS; ++j)
#pragma unroll
          for (int k = 0; k < masks; ++k) {
            const std::uint32_t codes = w[r][j] & (low_codes << (k * BITS));
            const int slot = j * masks + k;
#pragma unroll
            for (int d = 0; d < 3; ++d) part[k][d] = byte_dot(codes, digits[3 * slot + d], part[k][d]);
          }
#pragma unroll
        for (int d = 0; d < 3; ++d) {
          int digit_dot = part[0][d];
#pragma unroll
          for (int k = 1; k < masks; ++k) digit_dot += part[k][d] >> (k * BITS);
          dot[r][v] += CodeDot<BITS>(digit_dot) << (8 * d);
        }
      }
    }
  } else {
    // Codes one by one against X; 8 products (|.| < 2^31 even at 6 bits) per 32-bit partial sum.
    const int4* xs = reinterpret_cast<const int4*>(base);
    [&]<int... J>(std::integer_sequence<int, J...>) {
      (
          [&] {
            constexpr int j = J;  // values 8j .. 8j+7
#pragma unroll
            for (int v = 0; v < V; ++v) {
              const int4 a = xs[v * vector_stride + (2 * j) * 32], b = xs[v * vector_stride + (2 * j + 1) * 32];
#pragma unroll
              for (int r = 0; r < ROWS; ++r) {
                int part = int(code_value<BITS, 8 * j>(w[r])) * a.x;
                part += int(code_value<BITS, 8 * j + 1>(w[r])) * a.y;
                part += int(code_value<BITS, 8 * j + 2>(w[r])) * a.z;
                part += int(code_value<BITS, 8 * j + 3>(w[r])) * a.w;
                part += int(code_value<BITS, 8 * j + 4>(w[r])) * b.x;
                part += int(code_value<BITS, 8 * j + 5>(w[r])) * b.y;
                part += int(code_value<BITS, 8 * j + 6>(w[r])) * b.z;
                part += int(code_value<BITS, 8 * j + 7>(w[r])) * b.w;
                dot[r][v] += CodeDot<BITS>(part);
              }
            }
          }(),
          ...);
    }(std::make_integer_sequence<int, kChunkValues / 8>{});
  }
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const float2 f = facts[v * facts_stride + c];  // {S, u}
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const float folded = order::chunk_fold(scale[r], bias[r], code_dot_value<BITS>(dot[r][v], f.y), f.x);
      total[r][v] = PARK ? folded : order::lane_add(total[r][v], folded);
    }
  }
}

}  // namespace exactq::cuda_detail
