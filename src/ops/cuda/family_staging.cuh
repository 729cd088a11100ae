// Staging of the qmv family: x's K tile in shared memory as the integers X of docs/design.md §3.1
// (src/order/qmv.h), per chunk, with the facts every row shares (S and u).
#pragma once

#include "ops/cuda/common.cuh"
#include "ops/cuda/qmv_params.cuh"

namespace exactq::cuda_detail {

// ---- the layout --------------------------------------------------------------------------------
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

// ---- staging -----------------------------------------------------------------------------------
// A thread per (vector, chunk), as order::exact_chunk: its 32 values, E, X, S and u, then the
// digits packed four to a word by byte permutes (7 per slot) and stored as 16-byte pieces.
template <int BITS, int V>
__device__ __forceinline__ void stage_integers(uint4* pieces, float2* facts, int tile_values, const QmvParams& p,
                                               const void* x_rows, std::int64_t v0, std::int64_t first, int count) {
  const int chunks = count / kChunkValues;
  const int tile_chunks = tile_values / kChunkValues;
  for (int t = threadIdx.x; t < V * chunks; t += blockDim.x) {
    const int v = t / chunks, c = t - v * chunks;
    const std::size_t at = std::size_t((v0 + v) * p.k + first) + std::size_t(c) * kChunkValues;
    float x[kChunkValues];
    if (p.dtype == DType::f32) {
      const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(x_rows) + at);
#pragma unroll
      for (int j = 0; j < kChunkValues / 4; ++j) {
        const float4 f = src[j];
        x[4 * j] = f.x, x[4 * j + 1] = f.y, x[4 * j + 2] = f.z, x[4 * j + 3] = f.w;
      }
    } else {
      const uint4* src = reinterpret_cast<const uint4*>(static_cast<const std::uint16_t*>(x_rows) + at);
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


// qmv_streamed (V > 1) stages with stage_integers_fast: the same X, S and u (order::staged_*,
// checked against order::exact_chunk by tests/order StagedChunkEqualsExactChunk) in fewer
// instructions; 0.3-11 % faster at M = 2-16, where each block stages V vectors of x. qmv keeps
// stage_integers: with the fast one it measured 6 % slower on the LM heads and 4 % on 28672x8192,
// where staging is a small part of the time and the loop's code around it changes.
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
                                                    const void* x_rows, std::int64_t v0, std::int64_t first, int count) {
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
      const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(x_rows) + at);
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
      const uint4* src = reinterpret_cast<const uint4*>(static_cast<const std::uint16_t*>(x_rows) + at);
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

// Stages values [first, first + count) of the block's V vectors (rows v0, v0 + 1, ... of x_rows,
// K values each) once every warp is done with the previous tile; returns with the tile staged for
// every warp.
template <int BITS, int V, int PARAM>
__device__ __forceinline__ void stage_tile(uint4* pieces, float2* facts, const QmvParams& p, const void* x_rows,
                                           std::int64_t v0, std::int64_t first, int count) {
  __syncthreads();  // everyone is done with the previous tile
  if constexpr (kFastStaging<V>)
    stage_integers_fast<BITS, V, PARAM>(pieces, facts, p.tile_values, p, x_rows, v0, first, count);
  else
    stage_integers<BITS, V>(pieces, facts, p.tile_values, p, x_rows, v0, first, count);
  __syncthreads();
}

}  // namespace exactq::cuda_detail
