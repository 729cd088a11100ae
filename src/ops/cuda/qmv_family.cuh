// The qmv-family kernel: qmv's order (docs/design.md §3) for V vectors per pass over the weights.
// qmv is V = 1 with one grid row per vector (every vector re-reads the weights: the narrow arm);
// qmv_streamed is V = 2..8 with one grid row per tile of V vectors. The arithmetic per row and
// vector is the same function of (x, W) for every V: each vector's bits are qmv's.
//
// Layout: 8 warps per block, ROWS output rows per warp (how rows are spread over warps does not
// enter any row's order). Lane l takes chunks l, l+32, ... of K in increasing order, exactly the
// CPU mirror's lane map. K is walked in tiles staged once per block in shared memory: the integers
// X of §3 (as dp4a digits or int32) and, per chunk, the facts every row shares (S and u).
//
// Cost per weight and vector, which is what decides the speed at M = 1 (the H200 can issue
// about 4.6 instructions per weight at its read ceiling): at 4 bits, 8 codes take two ANDs and
// six dp4a, plus per 16 codes two 16-byte shared-memory reads split over ROWS rows, and per chunk
// a few integer adds, one conversion and qmv's fold. The f32 chain this replaced took two
// instructions per code and capped qmv near 66 % of the ceiling (decision 0003).
#pragma once

#include "ops/cuda/common.cuh"

namespace exactq::cuda_detail {

struct QmvParams {
  const std::uint8_t* packed;
  const void* scales;
  const void* biases;
  const void* x;
  void* y;
  std::int64_t n, k;
  std::int64_t vector_offset;  // first vector of this launch
  int group;
  int tile_values;  // K tile staged at a time (multiple of 1024)
  DType dtype;
  int split;  // qmv, one K tile: warps per task of the last trip (1 to 4, a divisor of the block's warps), K cut into that many runs of rounds
  int l2_prefetch_rounds;  // qmv: rows' bytes this many rounds beyond the register prefetch go to L2 (0: none)
};

// ---- x in shared memory: the integers X of order.h, per chunk ------------------------------------
// At 2, 4 and 8 bits the code dot is dp4a's: a code word masked so that every byte holds one code
// (times 2^(k*BITS) for mask k), against four signed-byte digits of X. So X is staged as its three
// digits (order::exact_digit_bytes), each in the byte that meets its code: mask k of code word j
// is "slot" s = j * (8/BITS) + k, whose byte b holds value i = j * (32/BITS) + b * (8/BITS) + k,
// and word 3s + d holds digit d of those four values. 24 words, 6 pieces of 16 bytes per chunk.
// At 3, 5 and 6 bits codes are extracted one by one (they cross bytes), so X is staged as int32:
// 8 pieces of 4 values per chunk.
template <int BITS>
inline constexpr bool kByteDot = BITS == 2 || BITS == 4 || BITS == 8;
template <int BITS>
inline constexpr int kPieces = kByteDot<BITS> ? 6 : 8;  // 16-byte pieces per chunk and vector
inline constexpr int kSlots = 8;                         // dp4a slots per chunk: 32 codes, 4 per word

// Where piece j of chunk c of a tile sits, in 16-byte units. Chunk-interleaved: the pieces j of 32
// consecutive chunks are 32 consecutive units, so lane l reads its chunk's pieces at fixed offsets
// from one base and a warp's 32 reads are conflict-free.
template <int BITS>
__device__ __forceinline__ int piece_index(int c, int j) {
  return (c >> 5) * (32 * kPieces<BITS>) + j * 32 + (c & 31);
}
// Value of byte b of dp4a slot s.
template <int BITS>
__host__ __device__ constexpr int slot_value(int s, int b) {
  return (s / (8 / BITS)) * (32 / BITS) + b * (8 / BITS) + s % (8 / BITS);
}

// Shared memory of one block: per vector, the pieces of tile_values / 32 chunks, then per vector
// and chunk the facts {S, u} as a float2.
template <int BITS>
std::size_t family_shared_bytes(int vectors, int tile_values) {
  return std::size_t(vectors) * (tile_values / kChunkValues) * (16 * kPieces<BITS> + 8);
}
// Rounds of a row: a chunk per lane per round.
EXACTQ_HD int family_rounds(std::int64_t k) { return int((k / kChunkValues + 31) / 32); }

// Warps per block. A -D knob for qmv (V = 1) at 4 bits (the other widths keep 8): with 16, one
// block per SM stages x once instead of twice. Session 20 call 1 (scripts/sessions/gpu_session20.sh):
// within 5 % of 8 warps, faster on the down projections and slower on the gate/up ones, so 8 stays.
// Sessions 21-22 size 4-bit variants with 12 and 8 warps by it (with EXACTQ_QMV_SM_WARPS).
#ifndef EXACTQ_QMV_WARPS
#define EXACTQ_QMV_WARPS 8
#endif
template <int V, int BITS = 0>  // BITS = 0: a width the knob does not touch
inline constexpr int kFamilyWarps = V == 1 && BITS == 4 ? EXACTQ_QMV_WARPS : kWarps;

// With a K split, the parked chunk values of one block of `warps` warps: per task, every round
// after the first part's, ROWS floats per lane.
inline std::size_t split_park_bytes(int split, int warps, int rows, std::int64_t k) {
  if (split <= 1) return 0;
  const std::int64_t rounds = family_rounds(k);
  const std::int64_t first_part = (rounds + split - 1) / split;
  return std::size_t(warps / split) * std::size_t(rounds - first_part) * rows * 32 * 4;
}

// A thread per (vector, chunk), as order::exact_chunk: its 32 values, E, X, S and u, then the
// digits packed four to a word by byte permutes (7 per slot) and stored as 16-byte pieces.
template <int BITS, int V>
__device__ __forceinline__ void stage_integers(uint4* pieces, float2* facts, int tile_values, const QmvParams& p,
                                               std::int64_t v0, std::int64_t first, int count) {
  const int chunks = count / kChunkValues;
  const int tile_chunks = tile_values / kChunkValues;
  for (int t = threadIdx.x; t < V * chunks; t += blockDim.x) {
    const int v = t / chunks, c = t - v * chunks;
    const std::size_t at = std::size_t((v0 + v) * p.k + first) + std::size_t(c) * kChunkValues;
    float x[kChunkValues];
    if (p.dtype == DType::f32) {
      const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(p.x) + at);
#pragma unroll
      for (int j = 0; j < kChunkValues / 4; ++j) {
        const float4 f = src[j];
        x[4 * j] = f.x, x[4 * j + 1] = f.y, x[4 * j + 2] = f.z, x[4 * j + 3] = f.w;
      }
    } else {
      const uint4* src = reinterpret_cast<const uint4*>(static_cast<const std::uint16_t*>(p.x) + at);
#pragma unroll
      for (int j = 0; j < kChunkValues / 8; ++j) {
        const uint4 h = src[j];
        const unsigned words[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          x[8 * j + 2 * e] = widen_half(words[e] & 0xffffu, p.dtype);
          x[8 * j + 2 * e + 1] = widen_half(words[e] >> 16, p.dtype);
        }
      }
    }
    std::int32_t big[kChunkValues];
    const order::ChunkFacts f = order::exact_chunk(x, big);
    facts[v * tile_chunks + c] = make_float2(f.sum, f.unscale);
    uint4* out = pieces + v * tile_chunks * kPieces<BITS>;
    if constexpr (kByteDot<BITS>) {
      std::uint32_t words[3 * kSlots];
#pragma unroll
      for (int slot = 0; slot < kSlots; ++slot) {
        std::uint32_t d[4];
#pragma unroll
        for (int b = 0; b < 4; ++b) d[b] = order::exact_digit_bytes(big[slot_value<BITS>(slot, b)]);
        const std::uint32_t low01 = __byte_perm(d[0], d[1], 0x5140), low23 = __byte_perm(d[2], d[3], 0x5140);
        const std::uint32_t high01 = __byte_perm(d[0], d[1], 0x7362), high23 = __byte_perm(d[2], d[3], 0x7362);
        words[3 * slot] = __byte_perm(low01, low23, 0x5410);      // digit 0 of the four values
        words[3 * slot + 1] = __byte_perm(low01, low23, 0x7632);  // digit 1
        words[3 * slot + 2] = __byte_perm(high01, high23, 0x5410);  // digit 2
      }
#pragma unroll
      for (int j = 0; j < kPieces<BITS>; ++j)
        out[piece_index<BITS>(c, j)] = make_uint4(words[4 * j], words[4 * j + 1], words[4 * j + 2], words[4 * j + 3]);
    } else {
#pragma unroll
      for (int j = 0; j < kPieces<BITS>; ++j)
        out[piece_index<BITS>(c, j)] =
            make_uint4(std::uint32_t(big[4 * j]), std::uint32_t(big[4 * j + 1]), std::uint32_t(big[4 * j + 2]),
                       std::uint32_t(big[4 * j + 3]));
    }
  }
}

// x staged by stage_integers_fast in qmv_streamed (V > 1), by stage_integers in qmv. The same X, S
// and u (order::staged_*, checked against order::exact_chunk by tests/cpu
// StagedChunkEqualsExactChunk), in fewer instructions. Session 20, same call: qmv_streamed 0.3-11 %
// faster at M = 2-16 (each block stages V vectors of x); qmv 6 % slower on the heads and 4 % on
// 28672x8192, where staging is a small part of the time (the loop's code around it changes).
template <int V>
inline constexpr bool kFastStaging = V > 1;

// One chunk's pieces from its values (value(i), i = 0..31) and E, with order::staged_*: one fma
// per X, the digits' 0x8080 xor once per packed word. A dp4a slot's four values are made when the
// slot is packed, and each 16-byte piece is stored when its four words are, so a thread holds its
// chunk's raw words and one piece, not two 32-entry arrays. Returns the patterns' sum.
template <int BITS, bool RARE, typename Value>
__device__ __forceinline__ std::uint32_t stage_chunk_fast(order::StagingScale s, Value&& value, uint4* out, int c) {
  std::uint32_t bits_sum = 0;
  if constexpr (kByteDot<BITS>) {
    std::uint32_t words[3 * kSlots];
#pragma unroll
    for (int slot = 0; slot < kSlots; ++slot) {
      std::uint32_t d[4];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const std::uint32_t bits = order::staged_integer_bits<RARE>(value(slot_value<BITS>(slot, b)), s);
        bits_sum += bits;
        d[b] = bits + order::kStagedDigitBias;
      }
      const std::uint32_t low01 = __byte_perm(d[0], d[1], 0x5140), low23 = __byte_perm(d[2], d[3], 0x5140);
      const std::uint32_t high01 = __byte_perm(d[0], d[1], 0x7362), high23 = __byte_perm(d[2], d[3], 0x7362);
      words[3 * slot] = __byte_perm(low01, low23, 0x5410) ^ order::kStagedDigitFlip;      // digit 0
      words[3 * slot + 1] = __byte_perm(low01, low23, 0x7632) ^ order::kStagedDigitFlip;  // digit 1
      words[3 * slot + 2] = __byte_perm(high01, high23, 0x5410);                          // digit 2
#pragma unroll
      for (int j = 0; j < kPieces<BITS>; ++j)
        if (4 * j + 3 >= 3 * slot && 4 * j + 3 <= 3 * slot + 2)  // piece j's last word was just made
          out[piece_index<BITS>(c, j)] = make_uint4(words[4 * j], words[4 * j + 1], words[4 * j + 2], words[4 * j + 3]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kPieces<BITS>; ++j) {
      std::uint32_t bits[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) bits[i] = order::staged_integer_bits<RARE>(value(4 * j + i), s), bits_sum += bits[i];
      out[piece_index<BITS>(c, j)] =
          make_uint4(std::uint32_t(order::staged_integer(bits[0])), std::uint32_t(order::staged_integer(bits[1])),
                     std::uint32_t(order::staged_integer(bits[2])), std::uint32_t(order::staged_integer(bits[3])));
    }
  }
  return bits_sum;
}

// stage_integers with stage_chunk_fast: E of 16-bit activations from their patterns, two at a time;
// the activation dtype from PARAM where it is a template argument; the rare chunks (E < 21 or
// non-finite) a branch per chunk.
template <int BITS, int V, int PARAM>
__device__ __forceinline__ void stage_integers_fast(uint4* pieces, float2* facts, int tile_values, const QmvParams& p,
                                                    std::int64_t v0, std::int64_t first, int count) {
  const DType dtype = PARAM == kRuntimeDtype ? p.dtype : DType(PARAM);
  const int chunks = count / kChunkValues;
  const int tile_chunks = tile_values / kChunkValues;
  for (int t = threadIdx.x; t < V * chunks; t += blockDim.x) {
    const int v = t / chunks, c = t - v * chunks;
    const std::size_t at = std::size_t((v0 + v) * p.k + first) + std::size_t(c) * kChunkValues;
    uint4* out = pieces + v * tile_chunks * kPieces<BITS>;
    int e;
    std::uint32_t bits_sum;
    if (dtype == DType::f32) {
      const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(p.x) + at);
      float x[kChunkValues];
#pragma unroll
      for (int j = 0; j < kChunkValues / 4; ++j) {
        const float4 f = src[j];
        x[4 * j] = f.x, x[4 * j + 1] = f.y, x[4 * j + 2] = f.z, x[4 * j + 3] = f.w;
      }
      e = order::exact_exponent(order::chunk_max_abs_bits(x));
      const order::StagingScale s = order::staging_scale(e);
      auto value = [&](int i) { return x[i]; };
      bits_sum = s.rare ? stage_chunk_fast<BITS, true>(s, value, out, c) : stage_chunk_fast<BITS, false>(s, value, out, c);
    } else {
      const uint4* src = reinterpret_cast<const uint4*>(static_cast<const std::uint16_t*>(p.x) + at);
      std::uint32_t raw[kChunkValues / 2];
      std::uint32_t halves_max = 0;
#pragma unroll
      for (int j = 0; j < kChunkValues / 8; ++j) {
        const uint4 h = src[j];
        raw[4 * j] = h.x, raw[4 * j + 1] = h.y, raw[4 * j + 2] = h.z, raw[4 * j + 3] = h.w;
#pragma unroll
        for (int w = 4 * j; w < 4 * j + 4; ++w) halves_max = order::max_abs_halves_step(halves_max, raw[w]);
      }
      e = order::exact_exponent(__float_as_uint(widen_half(order::max_abs_halves_end(halves_max), dtype)));
      const order::StagingScale s = order::staging_scale(e);
      auto bf16 = [&](int i) { return __uint_as_float(i % 2 ? raw[i / 2] & 0xffff0000u : raw[i / 2] << 16); };
      auto f16 = [&](int i) { return __half2float(__ushort_as_half((unsigned short)(i % 2 ? raw[i / 2] >> 16 : raw[i / 2]))); };
      if (s.rare)
        bits_sum = stage_chunk_fast<BITS, true>(s, [&](int i) { return widen_half(i % 2 ? raw[i / 2] >> 16 : raw[i / 2] & 0xffffu, dtype); }, out, c);
      else if (dtype == DType::bf16)
        bits_sum = stage_chunk_fast<BITS, false>(s, bf16, out, c);
      else
        bits_sum = stage_chunk_fast<BITS, false>(s, f16, out, c);
    }
    const float u = order::exact_unscale(e);
    facts[v * tile_chunks + c] = make_float2(order::chunk_value(order::exact_float(order::staged_sum(bits_sum, kChunkValues)), u), u);
  }
}

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

// EXACTQ_QMV_ENERGY_PROBE, a -D knob for measuring only (session 25): it makes 4-bit qmv (V = 1)
// compute WRONG BYTES on purpose, to tell which part of the loop draws the power that puts qmv at
// the 700 W cap where a read of the same bytes draws 400 W (docs/benchmark_results/
// 2026-12-05-h100-session25.md §4). 1: the dot replaced by an xor of the loaded words (loads,
// staging, task ends and butterfly kept); 2: the dot kept, but x's digits made in registers from
// the chunk index instead of read from shared memory (6 fewer 16-byte shared reads per chunk, about
// 24 integer instructions more). Never on in a build that runs tests or parity.
#ifndef EXACTQ_QMV_ENERGY_PROBE
#define EXACTQ_QMV_ENERGY_PROBE 0
#endif
template <int BITS, int V>
inline constexpr int kEnergyProbe = V == 1 && BITS == 4 ? EXACTQ_QMV_ENERGY_PROBE : 0;

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
      if constexpr (kEnergyProbe<BITS, V> == 2) {  // wrong bytes: no shared-memory reads of x
#pragma unroll
        for (int i = 0; i < 3 * kSlots; ++i) digits[i] = std::uint32_t(c) * 0x9e3779b9u + std::uint32_t(i) * 0x85ebca6bu;
      } else {
#pragma unroll
        for (int j = 0; j < kPieces<BITS>; ++j) {
          const uint4 q = base[v * vector_stride + j * 32];
          digits[4 * j] = q.x, digits[4 * j + 1] = q.y, digits[4 * j + 2] = q.z, digits[4 * j + 3] = q.w;
        }
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

// Blocks per SM the register budget is sized for: 2 (128 registers) up to V = 4, 1 from V = 5 on.
// V = 5 at two blocks spilled 200 bytes; at one (211 registers, no spill) it is 1.05-1.5x faster
// (session 20: 3840x15360 56.4 -> 37.4 us).
// qmv's 2-row kernels (5, 6, 8 bits) at 2 blocks per SM: at 3 (80 registers) they spilled 20-92
// bytes, and 8-bit 28672x8192 took 79.8 us instead of 62.0 us. A -D knob for tuning.
#ifndef EXACTQ_QMV_TWO_ROW_BLOCKS
#define EXACTQ_QMV_TWO_ROW_BLOCKS 2
#endif
// EXACTQ_QMV_SM_WARPS, a -D knob for measuring (session 21): the warps per SM qmv's 4-bit kernels
// are sized for; 12 gives them 168 registers.
#ifndef EXACTQ_QMV_SM_WARPS
#define EXACTQ_QMV_SM_WARPS (2 * kWarps)
#endif
template <int V, int ROWS, int BITS = 0>
inline constexpr int kFamilyMinBlocks =  // warps per SM, then blocks of kFamilyWarps
    V >= 5 ? 1
           : ((V == 1 ? (ROWS <= 2 ? EXACTQ_QMV_TWO_ROW_BLOCKS * kWarps : BITS == 4 ? EXACTQ_QMV_SM_WARPS : 2 * kWarps)
                      : 2 * kWarps) +
              kFamilyWarps<V, BITS> - 1) /
                 kFamilyWarps<V, BITS>;

// A -D knob for A/Bs (session 14 §2): 0 compiles the L2 prefetch out of every kernel, and with
// it the branch that keeps ptxas from sinking the 4-bit loads (see `prefetch` below).
#ifndef EXACTQ_QMV_PREFETCH_CODE
#define EXACTQ_QMV_PREFETCH_CODE 1
#endif

// qmv with K in one tile: a trip's first round is loaded at the end of the trip before, ahead of
// the butterfly, the store and the next task's set-up, which otherwise run with nothing of the
// warp's in flight. Built at 4, 5 and 6 bits (session 15, H200: 4-bit Llama head 73.0 -> 69.3 us,
// 28672x8192 35.1 -> 33.4; 5 and 6 bits 1-4 % faster, and their spills gone); at 2 and 8 bits it
// measured 2-6 % slower, at 3 bits within the spread. EXACTQ_QMV_CARRY_BITS, a -D knob: the
// widths it is built for, as a mask of 1 << bits.
#ifndef EXACTQ_QMV_CARRY_BITS
#define EXACTQ_QMV_CARRY_BITS ((1 << 4) | (1 << 5) | (1 << 6))
#endif
template <int BITS, int V>
inline constexpr bool kFamilyCarry = V == 1 && ((EXACTQ_QMV_CARRY_BITS >> BITS) & 1) != 0;

// EXACTQ_QMV_ASYNC_STAGES, a -D knob (session 27): 4-bit qmv's weights reach shared memory by
// cp.async, STAGES - 1 rounds ahead of the round being computed, in a ring of STAGES rounds per
// warp, instead of one round ahead in a second register buffer. Each lane copies, and later reads
// back, only its own 16 bytes of each row, so no lane waits on another. Why: held in registers,
// one round ahead is all 128 registers allow, about 32 KB per SM in flight; the H200 needs about
// 35 GB/s per SM times a loaded latency of a microsecond or more (session 18: qmv without the dot
// and without staging still ran 6 % behind a read of the same bytes). Memory traffic only: the
// values, and so every bit, are the register pipeline's. 0: the register double buffer.
// Session 27 (H100 only; docs/benchmark_results/2026-12-05-session27.md §1): bytes equal to the
// mirror's, and slower: 1 % at 2 stages, 1-1.5 % more for each further stage. The H200 run is
// scripts/sessions/gpu_session27b.sh.
#ifndef EXACTQ_QMV_ASYNC_STAGES
#define EXACTQ_QMV_ASYNC_STAGES 0
#endif
template <int BITS, int V>
inline constexpr int kAsyncStages = V == 1 && BITS == 4 ? EXACTQ_QMV_ASYNC_STAGES : 0;
// With the ring, the group parameters (still loaded one round ahead into registers) would be the
// loads with the least time to arrive: EXACTQ_QMV_ASYNC_PARAM_PREFETCH=1 requests each round's
// parameters into L2 when its weights are copied (session 27, H100: slower still).
#ifndef EXACTQ_QMV_ASYNC_PARAM_PREFETCH
#define EXACTQ_QMV_ASYNC_PARAM_PREFETCH 0
#endif
static_assert(EXACTQ_QMV_ASYNC_STAGES == 0 || EXACTQ_QMV_ASYNC_STAGES >= 2, "a ring of at least two rounds");
// Bytes of the rings of one block of `warps` warps of ROWS rows.
template <int BITS, int V, int ROWS>
std::size_t async_ring_bytes(int warps) {
  return std::size_t(kAsyncStages<BITS, V>) * warps * ROWS * 32 * 16;
}

// qmv's butterfly for a lane's COUNT (row, vector) totals at once, with the same adds: the first
// log2(COUNT) steps send half of the totals a lane still holds to its partner and keep the other
// half, so each shuffle and add does work that the plain butterfly (COUNT shuffles and adds per
// step) would have done in the partner lane anyway: COUNT - 1 + 5 - log2(COUNT) shuffles
// instead of 5 * COUNT (4 rows: 6 instead of 20). Lane l's add for total i at mask m is
// add(R[l], R[l ^ m]), as in order::butterfly_step; add commutes, so every value is the one the
// plain butterfly computes at that lane, and so are the bits. Session 16 (H200, 4-bit): qmv at M = 1
// up to 3 % faster, nowhere slower (call 1); qmv_streamed at M = 2, 4, 8 2-3 % faster on 28672x8192
// and 5-12 % on Gemma's head and gate/up (call 3; ptxas: its spills grow 8 bytes at V = 2 and
// shrink by 20-70 at V = 4). A -D knob: 0, the plain butterfly per total; 1, qmv (V = 1) only;
// 2, also qmv_streamed where ROWS * V is a power of two (V = 2, 4, 8; the others keep the plain one).
#ifndef EXACTQ_QMV_SCATTER_BUTTERFLY
#define EXACTQ_QMV_SCATTER_BUTTERFLY 2
#endif
template <int COUNT, int STEP = 0>
__device__ __forceinline__ float butterfly_scatter(const float (&held)[COUNT], int lane) {
  if constexpr (COUNT == 1) {
    float t = held[0];
#pragma unroll
    for (int step = STEP; step < order::kButterflySteps; ++step)
      t = order::butterfly_step(t, __shfl_xor_sync(0xffffffffu, t, order::butterfly_mask(step)));
    return t;
  } else {
    constexpr int mask = order::butterfly_mask(STEP), half = COUNT / 2;
    static_assert(COUNT % 2 == 0 && STEP < order::kButterflySteps, "a power of two, at most 32 rows");
    const bool upper = (lane & mask) != 0;
    float kept[half];
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float send = upper ? held[i] : held[half + i];
      const float keep = upper ? held[half + i] : held[i];
      kept[i] = order::butterfly_step(keep, __shfl_xor_sync(0xffffffffu, send, mask));
    }
    return butterfly_scatter<half, STEP + 1>(kept, lane);
  }
}
// The lanes that hold total i after butterfly_scatter<COUNT>: lane >> kScatterShift<COUNT> == i;
// -1 where COUNT is not a power of two (qmv_streamed at V = 3, 5, 6, 7: the plain butterfly).
template <int COUNT>
inline constexpr int kScatterShift = COUNT == 2 ? 4 : COUNT == 4 ? 3 : COUNT == 8 ? 2 : COUNT == 16 ? 1 : COUNT == 32 ? 0 : -1;

// qmv's group-parameter loads ask L2 for the 128 bytes around each parameter
// (load_param_bits_fetch). Session 17 (H200, 4-bit g64, three weight copies, same-call A/B, three
// passes): Gemma's head 141.2 -> 140.3 us, Llama's head 73.8 -> 73.4, 28672x8192 34.6 -> 34.3,
// the 33-50 MB shapes unchanged. qmv_streamed (V > 1) was not measured with it and keeps plain
// loads. A -D knob: 0 turns it off.
#ifndef EXACTQ_QMV_PARAM_FETCH
#define EXACTQ_QMV_PARAM_FETCH 128
#endif
template <int V>
inline constexpr int kParamFetch = V == 1 ? EXACTQ_QMV_PARAM_FETCH : 0;

// Session 25 removed three measuring knobs that lost on both cards or were never faster: a third
// register buffer (EXACTQ_QMV_BUFFERS=3, with EXACTQ_QMV_PARAM_BUFFERS=2; sessions 22-24) and two
// rounds in flight while x is staged (EXACTQ_QMV_STAGE_TWO_ROUNDS; session 24). A build that still
// names one stops here rather than silently building main's kernel; the code is in
// bench/prototypes/qmv_pipeline_knobs_s25.patch.
#if defined(EXACTQ_QMV_BUFFERS) || defined(EXACTQ_QMV_PARAM_BUFFERS) || defined(EXACTQ_QMV_STAGE_TWO_ROUNDS)
#error "EXACTQ_QMV_BUFFERS, EXACTQ_QMV_PARAM_BUFFERS and EXACTQ_QMV_STAGE_TWO_ROUNDS were removed in session 25: apply bench/prototypes/qmv_pipeline_knobs_s25.patch"
#endif


template <int BITS, int V, int ROWS, int PARAM>
__global__ void __launch_bounds__(kFamilyWarps<V, BITS> * 32, kFamilyMinBlocks<V, ROWS, BITS>)
    qmv_family_kernel(const QmvParams p) {
  extern __shared__ uint4 shared_raw[];
  const int tile_chunks = p.tile_values / kChunkValues, vector_stride = tile_chunks * kPieces<BITS>;
  uint4* pieces = shared_raw;                                                   // [V][vector_stride], interleaved
  float2* facts = reinterpret_cast<float2*>(pieces + V * vector_stride);       // [V][tile_chunks]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t row_bytes = p.k * BITS / 8;
  const std::int64_t groups = p.k / p.group;
  // Chunks per group is 1, 2 or 4: a shift, never a division in the inner loop.
  const int group_shift = p.group == 32 ? 0 : (p.group == 64 ? 1 : 2);
  const std::int64_t v0 = p.vector_offset + std::int64_t(blockIdx.y) * V;
  const int tiles = ceil_div(p.k, p.tile_values);
  // Work comes in tasks of ROWS rows. Task t goes to warp t % W, counting warps block-fastest
  // (warp w of block b is number w * gridDim.x + b), so the tasks left over after whole rounds
  // spread over all blocks and so over all SMs: an SM's share differs from the mean by at most
  // one task per warp. Every warp runs the same number of trips because staging synchronises
  // the block; a warp without a task in a trip only helps stage.
  //
  // With a K split (qmv, one K tile), the last trip is split: when it has at most W / split
  // tasks, `split` consecutive warps share each of its tasks, warp `part` computing the part-th
  // run of rounds, instead of a few warps taking whole tasks while the others wait (28672 rows
  // are 3.4 trips of 4-row tasks on 132 SMs; with fewer tasks than W / split that trip is the
  // only one). Part 0 adds its chunks into the lanes' chains as usual; the others park each
  // chunk's folded value in shared memory, and part 0 then adds those in increasing round, so
  // every lane's chain, and so every bit, is unchanged.
  const std::int64_t tasks = (p.n + ROWS - 1) / ROWS;
  const std::int64_t slots = std::int64_t(gridDim.x) * kFamilyWarps<V, BITS>;  // tasks per unsplit trip
  const int last_split = V == 1 ? p.split : 1;
  const std::int64_t whole_trips = last_split > 1 ? tasks / slots : (tasks + slots - 1) / slots;
  const std::int64_t trips = whole_trips + (tasks > whole_trips * slots ? 1 : 0);
  const int rounds_total = family_rounds(p.k);
  // The split trip's facts, computed once: a trip only selects them, so that its first loads
  // wait on no division (recomputed in every trip they cost 5 % on Gemma's head, 31 trips: call 4).
  const int last_part = warp % last_split, last_slot = warp / last_split;
  const int last_part_rounds = (rounds_total + last_split - 1) / last_split;
  const std::int64_t first_task = std::int64_t(warp) * gridDim.x + blockIdx.x;
  // The next launch on the stream may take the SM slots this grid frees; it waits for this grid
  // to finish before it touches x or y (wait_for_previous_grid below).
  let_next_grid_start();
  // The L2 prefetch is compiled into qmv at 2 and 4 bits only (see `prefetch` below).
  constexpr bool kPrefetchCode = EXACTQ_QMV_PREFETCH_CODE && (BITS == 2 || BITS == 4) && V == 1;
  // Rows past N read row N-1 and are never written. Group parameters are indexed with 32 bits
  // (the launcher checks N * K / group < 2^31); weights with a 64-bit row base.
  const std::uint8_t* wrow[ROWS];
  int prow[ROWS];
  auto point = [&](std::int64_t row0) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const std::int64_t row = row0 + r < p.n ? row0 + r : p.n - 1;
      wrow[r] = p.packed + row * row_bytes;
      prow[r] = int(row * groups);
      // Opaque to the compiler, so it keeps the row bases in registers instead of recomputing
      // the clamp and the 64-bit product at every load: 705 instead of 774 instructions per
      // two chunks of 4 rows in the SASS, 43.4 instead of 45.3 us on 28672x8192.
      asm("" : "+l"(wrow[r]), "+r"(prow[r]));
    }
  };
  // The software pipeline's two register buffers (see the tile loop). With kCarry, a trip's first
  // round may already be in one, loaded by the trip before (`carried`).
  std::uint32_t wa[ROWS][BITS], wb[ROWS][BITS];
  std::uint32_t sa[ROWS], ba[ROWS], sb[ROWS], bb[ROWS];
  constexpr bool kCarry = kFamilyCarry<BITS, V>;
  bool carried = false;
  // One round's loads into a register buffer: chunk `chunk` of K (counted from the row's start)
  // of each row, and its group's raw parameter bits.
  auto load_row_params = [&](int r, int g, std::uint32_t (&sc)[ROWS], std::uint32_t (&bi)[ROWS]) {
    sc[r] = load_param_bits_fetch<PARAM, kParamFetch<V>>(p.scales, prow[r] + g, p.dtype);
    bi[r] = load_param_bits_fetch<PARAM, kParamFetch<V>>(p.biases, prow[r] + g, p.dtype);
  };
  auto load_round = [&](int chunk, std::uint32_t (&w)[ROWS][BITS], std::uint32_t (&sc)[ROWS], std::uint32_t (&bi)[ROWS]) {
    const int g = chunk >> group_shift;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      load_chunk<BITS>(wrow[r] + std::int64_t(chunk) * (4 * BITS), w[r]);
      load_row_params(r, g, sc, bi);
    }
  };
  // kAsync: the weights of a round go to the warp's ring by cp.async (`issue`), the group
  // parameters to registers one round ahead (`load_params`), as the register pipeline has them.
  constexpr int kAsync = kAsyncStages<BITS, V>;
  static_assert(kAsync == 0 || kEnergyProbe<BITS, V> == 0, "the energy probes measure the register pipeline");
  // The rings are the last async_ring_bytes of the block's shared memory.
  uint4* ring_lane = nullptr;
  if constexpr (kAsync > 0) {
    unsigned dynamic_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_bytes));
    ring_lane = reinterpret_cast<uint4*>(reinterpret_cast<char*>(shared_raw) + dynamic_bytes) -
                (kFamilyWarps<V, BITS> - warp) * kAsync * ROWS * 32 + lane;
  }
  auto load_params = [&](int chunk, std::uint32_t (&sc)[ROWS], std::uint32_t (&bi)[ROWS]) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) load_row_params(r, chunk >> group_shift, sc, bi);
  };
  // Chunk `chunk` of each row into ring stage `stage` where `copy` holds, as one commit group
  // (empty where it does not, so that every round commits exactly one group).
  auto issue = [&](int chunk, int stage, bool copy) {
    if constexpr (kAsync > 0) {
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
        copy_async_if<16>(copy, ring_lane + (stage * ROWS + r) * 32, wrow[r] + std::int64_t(chunk) * (4 * BITS));
      commit_async_copies();
      if constexpr (EXACTQ_QMV_ASYNC_PARAM_PREFETCH != 0) {
        const int bytes = (PARAM == kRuntimeDtype ? p.dtype : DType(PARAM)) == DType::f32 ? 4 : 2;
        const int g = chunk >> group_shift;
        if (copy)
#pragma unroll
          for (int r = 0; r < ROWS; ++r) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char*>(p.scales) + std::int64_t(prow[r] + g) * bytes));
            asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char*>(p.biases) + std::int64_t(prow[r] + g) * bytes));
          }
      }
    }
  };
  // The first kAsync - 1 rounds from chunk c (stages 0, 1, ...) and the first round's parameters.
  auto prime = [&](int chunk0, int c, int c_end, std::uint32_t (&sc)[ROWS], std::uint32_t (&bi)[ROWS]) {
#pragma unroll
    for (int i = 0; i + 1 < kAsync; ++i) issue(chunk0 + c + 32 * i, i, c + 32 * i < c_end);
    if (c < c_end) load_params(chunk0 + c, sc, bi);
  };

  for (std::int64_t trip = 0; trip < trips; ++trip) {
    const bool split_trip = trip == whole_trips;  // the same for every warp of the grid
    const int split = split_trip ? last_split : 1;
    const int part = split_trip ? last_part : 0;
    const int part_rounds = split_trip ? last_part_rounds : rounds_total;
    const std::int64_t task =
        split_trip ? whole_trips * slots + std::int64_t(last_slot) * gridDim.x + blockIdx.x : first_task + trip * slots;
    float* park = reinterpret_cast<float*>(facts + V * tile_chunks) +
                  std::size_t(last_slot) * std::size_t(rounds_total - last_part_rounds) * ROWS * 32;
    const bool active = task < tasks;
    const std::int64_t row0 = task * ROWS;
    if (!kCarry || !carried) point(row0);
    float total[ROWS][V];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int v = 0; v < V; ++v) total[r][v] = 0.0f;

    for (int tile = 0; tile < tiles; ++tile) {
      const std::int64_t first = std::int64_t(tile) * p.tile_values;
      const int count = int(p.k - first < p.tile_values ? p.k - first : p.tile_values);
      const int chunks = count / kChunkValues;
      const int chunk0 = int(first / kChunkValues);
      // Software pipeline: the next chunk's loads (per row) are issued before the current one is
      // computed. Two register buffers, used alternately; chunks still go in increasing order.
      // The buffers hold the parameters' raw bits; they are widened in `step`, when used.
      auto load = [&](int c, std::uint32_t (&w)[ROWS][BITS], std::uint32_t (&sc)[ROWS], std::uint32_t (&bi)[ROWS]) {
        load_round(chunk0 + c, w, sc, bi);
      };
      // This warp's run of chunks: all of them without a split (one tile then, if split > 1).
      const int c_end = chunks < 32 * part_rounds * (part + 1) ? chunks : 32 * part_rounds * (part + 1);
      int c = active ? lane + 32 * part_rounds * part : c_end;
      if constexpr (kAsync > 0) {
        if (!(kCarry && carried)) prime(chunk0, c, c_end, sa, ba);  // in flight while the tile is staged
      } else if (c < c_end && !(kCarry && carried)) {
        load(c, wa, sa, ba);  // in flight while the tile is staged
      }
      if (tiles > 1 || trip == 0) {
        if (trip == 0 && tile == 0) wait_for_previous_grid();  // x may be the previous kernel's output
        __syncthreads();  // everyone is done with the previous tile
        if constexpr (kFastStaging<V>)
          stage_integers_fast<BITS, V, PARAM>(pieces, facts, p.tile_values, p, v0, first, count);
        else
          stage_integers<BITS, V>(pieces, facts, p.tile_values, p, v0, first, count);
        __syncthreads();
      }
      auto step = [&](const std::uint32_t (&w)[ROWS][BITS], const std::uint32_t (&sc_bits)[ROWS],
                      const std::uint32_t (&bi_bits)[ROWS], int c) {
        float sc[ROWS], bi[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
          sc[r] = param_value<PARAM>(sc_bits[r], p.dtype), bi[r] = param_value<PARAM>(bi_bits[r], p.dtype);
        if constexpr (kEnergyProbe<BITS, V> == 1) {  // wrong bytes: the loads kept, no dot
#pragma unroll
          for (int r = 0; r < ROWS; ++r) {
            std::uint32_t h = sc_bits[r] ^ bi_bits[r];
#pragma unroll
            for (int j = 0; j < BITS; ++j) h ^= w[r][j];
            total[r][0] = __uint_as_float(__float_as_uint(total[r][0]) ^ (h & 0x007fffffu));
          }
        } else if (V > 1 || part == 0) {
          chunk_step<BITS, V, ROWS>(w, sc, bi, pieces, vector_stride, facts, tile_chunks, c, total);
        } else if constexpr (V == 1) {
          float folded[ROWS][V];
          chunk_step<BITS, V, ROWS, true>(w, sc, bi, pieces, vector_stride, facts, tile_chunks, c, folded);
#pragma unroll
          for (int r = 0; r < ROWS; ++r) park[((c / 32 - part_rounds) * ROWS + r) * 32 + lane] = folded[r][0];
        }
      };
      // Where the launcher asks for it (family_launch.cuh), each row's bytes l2_prefetch_rounds
      // rounds beyond the register prefetch are requested into L2, so that load finds them nearer.
      // Memory traffic only: no value depends on it. Built into qmv at 2 and 4 bits only (at 3, 5
      // and 6 bits it measured 1-2 % slower in session 13).
      //
      // Compiled in, even where it is off, it also fixes where ptxas puts the next round's loads:
      // without it they sink below the current round's arithmetic (SASS of session 14 call 2),
      // so they have no arithmetic to hide behind, and 4-bit qmv measured 8 % slower on
      // 28672x8192 and 6 % on Gemma's head (call 1, EXACTQ_QMV_PREFETCH_CODE=0).
      auto prefetch = [&](int c) {
        if constexpr (kPrefetchCode) {
          const int ahead = c + 32 * ((kAsync > 0 ? kAsync - 1 : 1) + p.l2_prefetch_rounds);
          if (p.l2_prefetch_rounds > 0 && ahead < c_end)
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
              asm volatile("prefetch.global.L2 [%0];" ::"l"(wrow[r] + std::int64_t(chunk0 + ahead) * (4 * BITS)));
        }
      };
      if constexpr (kAsync > 0) {
        // Round c is in stage `stage`; round c + 32 (kAsync - 1) goes to the stage round c - 32 left.
        auto async_step = [&](int stage, const std::uint32_t (&sc)[ROWS], const std::uint32_t (&bi)[ROWS],
                              std::uint32_t (&sc_next)[ROWS], std::uint32_t (&bi_next)[ROWS]) {
          const int ahead_stage = stage + kAsync - 1 < kAsync ? stage + kAsync - 1 : stage - 1;
          issue(chunk0 + c + 32 * (kAsync - 1), ahead_stage, c + 32 * (kAsync - 1) < c_end);
          if (c + 32 < c_end) load_params(chunk0 + c + 32, sc_next, bi_next);
          prefetch(c);
          wait_async_copies<kAsync - 1>();  // this lane's copies of round c are in its stage
#pragma unroll
          for (int r = 0; r < ROWS; ++r) {
            const uint4 v = ring_lane[(stage * ROWS + r) * 32];
            wa[r][0] = v.x, wa[r][1] = v.y, wa[r][2] = v.z, wa[r][3] = v.w;
          }
          step(wa, sc, bi, c);
          c += 32;
        };
        if constexpr (kAsync % 2 == 0) {
          // A whole ring's rounds per trip of the loop, so that every stage's offsets are constants.
          while (c < c_end) {
#pragma unroll
            for (int stage = 0; stage < kAsync; stage += 2) {
              async_step(stage, sa, ba, sb, bb);
              if (c >= c_end) break;
              async_step(stage + 1, sb, bb, sa, ba);
              if (c >= c_end) break;
            }
          }
        } else {
          int stage = 0;
          while (c < c_end) {
            async_step(stage, sa, ba, sb, bb);
            stage = stage + 1 < kAsync ? stage + 1 : 0;
            if (c >= c_end) break;
            async_step(stage, sb, bb, sa, ba);
            stage = stage + 1 < kAsync ? stage + 1 : 0;
          }
        }
      }
      while (kAsync == 0 && c < c_end) {
        if (c + 32 < c_end) load(c + 32, wb, sb, bb);
        prefetch(c);
        step(wa, sa, ba, c);
        c += 32;
        if (c >= c_end) break;
        if (c + 32 < c_end) load(c + 32, wa, sa, ba);
        prefetch(c);
        step(wb, sb, bb, c);
        c += 32;
      }
    }
    if (split > 1) {  // the same for every warp of the block
      __syncthreads();  // the parked values are written
      if (part == 0 && active) {
        const int chunks = int(p.k / kChunkValues);
        for (int round = part_rounds; round < rounds_total && lane + 32 * round < chunks; ++round)
#pragma unroll
          for (int r = 0; r < ROWS; ++r)
            total[r][0] = order::lane_add(total[r][0], park[((round - part_rounds) * ROWS + r) * 32 + lane]);
      }
      __syncthreads();  // read before the next trip parks again
    }
    // kCarry: the next trip's first round is loaded now, before the butterfly, the store and the
    // next task's set-up, which would otherwise run with nothing of this warp's in flight. The
    // buffers are free (the last round is computed); only an unsplit next trip with K in one
    // tile, whose lanes start at chunk `lane`.
    if constexpr (kCarry) {
      carried = tiles == 1 && trip + 1 < trips && trip + 1 != whole_trips;
      if (carried) {
        const std::int64_t next = task + slots;
        point(next * ROWS);
        if constexpr (kAsync > 0)
          prime(0, lane, next < tasks ? int(p.k / kChunkValues) : 0, sa, ba);
        else if (next < tasks && lane < int(p.k / kChunkValues))
          load_round(lane, wa, sa, ba);
      }
    }

    constexpr int kHeld = ROWS * V;  // (row, vector) totals per lane, r * V + v
    if constexpr ((V == 1 ? EXACTQ_QMV_SCATTER_BUTTERFLY >= 1 : EXACTQ_QMV_SCATTER_BUTTERFLY >= 2) &&
                  kScatterShift<kHeld> >= 0) {
      float held[kHeld];
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int v = 0; v < V; ++v) held[r * V + v] = total[r][v];
      const float mine = butterfly_scatter<kHeld>(held, lane);  // total lane >> kScatterShift
      const int i = lane >> kScatterShift<kHeld>, r = i / V, v = i % V;
      if (active && part == 0 && (lane & ((1 << kScatterShift<kHeld>) - 1)) == 0 && row0 + r < p.n)
        store_f32(p.y, std::size_t((v0 + v) * p.n + row0 + r), p.dtype, mine);
    } else {
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const float own[1] = {total[r][v]};
          total[r][v] = butterfly_scatter<1>(own, lane);  // the plain butterfly
        }
      if (active && part == 0 && lane == 0) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
          if (row0 + r < p.n)
#pragma unroll
            for (int v = 0; v < V; ++v) store_f32(p.y, std::size_t((v0 + v) * p.n + row0 + r), p.dtype, total[r][v]);
      }
    }
  }
}

}  // namespace exactq::cuda_detail
