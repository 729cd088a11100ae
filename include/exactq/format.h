// MLX's affine quantized format: the one definition of the packing rule and of a matrix's shape.
//
//   w[n, k] ~= scale[n, k / group] * q[n, k] + bias[n, k / group],   q in [0, 2^bits - 1]
//
// Each row's K*bits/8 bytes are one little-endian bit stream: code k occupies stream bits
// [k*bits, (k+1)*bits), and stream bit j is bit j%8 of byte j/8. This covers 3, 5 and 6 bits,
// whose codes cross byte (and 32-bit word) boundaries. Scales and biases are [N, K/group] in the
// matrix's dtype. The bytes are exactly MLX's uint32 `wq` array read as bytes on a
// little-endian machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "exactq/dtype.h"

namespace exactq {

inline constexpr int kSupportedBits[] = {2, 3, 4, 5, 6, 8};
inline constexpr int kSupportedGroups[] = {32, 64, 128};

// The kernels' unit of work along K: 32 consecutive codes. Because every group size is a
// multiple of 32 and chunks start at multiples of 32, a chunk never straddles two groups.
// A chunk is 4*bits bytes (16 B at 4 bits: one 128-bit load on the GPU).
inline constexpr int kChunkValues = 32;
constexpr int chunk_bytes(int bits) { return kChunkValues * bits / 8; }

constexpr bool is_supported_bits(int bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
}
constexpr bool is_supported_group(int group) { return group == 32 || group == 64 || group == 128; }
constexpr std::int64_t packed_row_bytes(std::int64_t k, int bits) { return k * bits / 8; }

// Code k of a packed row (the packing rule, read side). Codes span at most two bytes.
EXACTQ_HD std::uint32_t unpack_code(const std::uint8_t* row, std::int64_t k, int bits) {
  const std::int64_t bit = k * bits;
  const std::int64_t byte = bit >> 3;
  const int shift = int(bit & 7);
  std::uint32_t v = row[byte];
  if (shift + bits > 8) v |= std::uint32_t(row[byte + 1]) << 8;
  return (v >> shift) & ((1u << bits) - 1u);
}

// The 32 codes of one chunk (chunk_bytes(bits) bytes starting at `chunk`), in order.
EXACTQ_HD void unpack_chunk(const std::uint8_t* chunk, int bits, std::uint8_t codes[kChunkValues]) {
  std::uint64_t buffer = 0;
  int have = 0;
  const std::uint32_t mask = (1u << bits) - 1u;
  for (int i = 0; i < kChunkValues; ++i) {
    while (have < bits) {
      buffer |= std::uint64_t(*chunk++) << have;
      have += 8;
    }
    codes[i] = std::uint8_t(buffer & mask);
    buffer >>= bits;
    have -= bits;
  }
}

// Code k written into a packed row (the packing rule, write side). The row must start zeroed.
inline void pack_code(std::uint8_t* row, std::int64_t k, int bits, std::uint32_t code) {
  const std::int64_t bit = k * bits;
  const std::uint32_t v = code << (bit & 7);
  row[bit >> 3] |= std::uint8_t(v);
  if ((bit & 7) + bits > 8) row[(bit >> 3) + 1] |= std::uint8_t(v >> 8);
}

// Where the bytes of a matrix sit. MLX's layout is the format above; qmv_mma's fragment layout
// (exactq/mma_layout.h) holds the same bytes re-laid for its tensor-core loads, and only qmv_mma
// reads it.
enum class WeightLayout { mlx, mma_fragments };
// Throws std::invalid_argument naming the value when `layout` is none of the enumerators.
void validate_layout(WeightLayout layout);

// A non-owning view of one quantized [N, K] matrix. The spans may point to host or device
// memory; validate() checks only what can be checked without reading them.
struct QuantizedMatrixView {
  std::span<const std::uint8_t> packed;  // N * K*bits/8 bytes
  std::span<const std::byte> scales;     // N * K/group elements of dtype
  std::span<const std::byte> biases;     // same shape and dtype as scales
  std::int64_t n = 0;
  std::int64_t k = 0;
  int bits = 4;
  int group = 64;
  DType dtype = DType::bf16;
  WeightLayout layout = WeightLayout::mlx;

  std::int64_t groups_per_row() const { return k / group; }
  std::int64_t row_bytes() const { return packed_row_bytes(k, bits); }
  // Bytes a kernel must read for the weights: packed codes plus scales plus biases (of the N
  // rows; the fragment layout's padding rows are not counted). Throws std::invalid_argument on a
  // dtype that is not a DType.
  std::int64_t weight_bytes() const;
  // Throws std::invalid_argument naming the offending value (the dtype and layout included: a
  // number cast to either enum is refused here, the boundary that the kernels' unchecked dtype
  // reads rely on).
  void validate() const;
};

// An owning quantized matrix on the host.
struct QuantizedMatrix {
  std::vector<std::uint8_t> packed;
  std::vector<std::byte> scales;
  std::vector<std::byte> biases;
  std::int64_t n = 0;
  std::int64_t k = 0;
  int bits = 4;
  int group = 64;
  DType dtype = DType::bf16;
  WeightLayout layout = WeightLayout::mlx;

  QuantizedMatrixView view() const { return {packed, scales, biases, n, k, bits, group, dtype, layout}; }
  // A matrix of this shape with every byte zero. Throws std::invalid_argument on a bad shape or
  // dtype.
  static QuantizedMatrix zeros(std::int64_t n, std::int64_t k, int bits, int group, DType dtype);
};

// Throws std::invalid_argument unless bits, group, n and k form a valid shape.
void validate_shape(std::int64_t n, std::int64_t k, int bits, int group);

}  // namespace exactq
