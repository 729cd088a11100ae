// The vectorised qmv family (qmv_avx2.cpp, qmv_avx512.cpp): what they share.
//
// Per chunk the order asks for one exact integer, sum q_i X_i (src/order/qmv.h), so a kernel may
// compute it with any instructions and lay the codes and X out however its loads fall: here each
// vector's X is staged once as three signed-byte digits (order::exact_digit_bytes), in the byte
// positions where the kernel's unpacked codes land, and a byte dot (vpdpbusd, or vpmaddubsw on
// AVX2) meets them. Everything after the integer (A = f32(sum) * u, chunk_fold, lane_add into
// lane c % 32 in increasing c, the butterfly) is the scalar kernel's sequence of f32 operations,
// done for 8 or 16 consecutive chunks at once: those go to 8 or 16 different lanes, so each lane
// still takes its chunks in increasing c.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exactq/qmv.h"
#include "ops/cpu/common.h"

namespace exactq::cpu::simd {

// Staged chunks are padded with zeros to a multiple of this (the widest kernel's block).
inline constexpr std::int64_t kBlockChunks = 16;

// Where code i of chunk c sits among the unpacked codes (its byte offset in a digit plane).
enum class Layout {
  natural,       // 32c + i: codes unpacked to one byte each, in order (AVX2)
  nibbles_avx2,  // 4 bits, one chunk per 32 bytes: the low nibbles (even i), then the high ones
  // AVX-512: per block of 16 chunks, 8 registers of 64 bytes; 32-bit lane p of each holds 4 codes
  // of chunk p. Register t holds codes 4t..4t+3 (bytes_avx512); at 4 bits register 2t + h holds
  // codes 8t + 2b + h, b = 0..3 (the low or high nibbles of the chunk's bytes 4t..4t+3).
  bytes_avx512,
  nibbles_avx512,
};

// The X of M vectors as digit planes (3 per vector, 32 bytes per chunk), with S and u per chunk.
struct Staged {
  std::int64_t m = 0, chunks = 0, padded = 0;  // padded: chunks rounded up to kBlockChunks
  std::vector<std::uint8_t> digits;            // [m][3][32 * padded]
  std::vector<float> sums, unscales;           // [m][padded]; 0 past the last chunk

  const std::uint8_t* plane(std::int64_t v, int d) const {
    return digits.data() + (v * 3 + d) * 32 * padded;
  }
  const float* sum(std::int64_t v) const { return sums.data() + v * padded; }
  const float* unscale(std::int64_t v) const { return unscales.data() + v * padded; }
};

inline std::int64_t layout_offset(Layout layout, std::int64_t c, int i) {
  const std::int64_t block = 512 * (c / kBlockChunks) + 4 * (c % kBlockChunks);
  switch (layout) {
    case Layout::natural: return 32 * c + i;
    case Layout::nibbles_avx2: return 32 * c + (i & 1) * 16 + (i >> 1);
    case Layout::bytes_avx512: return block + 64 * (i / 4) + i % 4;
    case Layout::nibbles_avx512: return block + 64 * (2 * (i / 8) + (i & 1)) + (i >> 1) % 4;
  }
  return 0;
}

inline Staged stage(const Activations& x, Layout layout) {
  Staged s;
  s.m = x.m;
  s.chunks = x.k / kChunkValues;
  s.padded = (s.chunks + kBlockChunks - 1) / kBlockChunks * kBlockChunks;
  s.digits.assign(std::size_t(s.m * 3 * 32 * s.padded), 0);
  s.sums.assign(std::size_t(s.m * s.padded), 0.0f);
  s.unscales.assign(std::size_t(s.m * s.padded), 0.0f);
  for (std::int64_t v = 0; v < s.m; ++v) {
    const std::int32_t* integers = x.integer_row(v);
    std::uint8_t* planes[3] = {s.digits.data() + (v * 3) * 32 * s.padded, s.digits.data() + (v * 3 + 1) * 32 * s.padded,
                               s.digits.data() + (v * 3 + 2) * 32 * s.padded};
    for (std::int64_t c = 0; c < s.chunks; ++c) {
      for (int i = 0; i < kChunkValues; ++i) {
        const std::uint32_t bytes = order::exact_digit_bytes(integers[c * kChunkValues + i]);
        const std::int64_t at = layout_offset(layout, c, i);
        for (int d = 0; d < 3; ++d) planes[d][at] = std::uint8_t(bytes >> (8 * d));
      }
      s.sums[std::size_t(v * s.padded + c)] = x.chunk_facts(v)[c].sum;
      s.unscales[std::size_t(v * s.padded + c)] = x.chunk_facts(v)[c].unscale;
    }
  }
  return s;
}

// The rows [first, end) for the vectors [v0, v0 + tile), written to y.
using RowsKernel = void (*)(const QuantizedMatrixView& w, const Staged& x, std::int64_t v0, int tile,
                            std::int64_t first, std::int64_t end, std::span<std::byte> y);

// Null where the build has no such kernel (not x86-64).
RowsKernel avx2_rows(int bits);
RowsKernel avx512_rows(int bits);
Layout avx2_layout(int bits);
Layout avx512_layout(int bits);

// Runs the exact family on the chosen vector level: vectors in tiles of `tile` (qmv: 1, each
// vector re-reading the weights; qmv_streamed: its V). False where the level is scalar.
bool run_vectorised(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int tile,
                    int threads);

}  // namespace exactq::cpu::simd
