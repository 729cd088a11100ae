// Conversion between MLX's layout and qmv_mma's fragment layout (exactq/mma_layout.h). Both
// directions walk the same index functions, so they are each other's inverse by construction;
// tests/format/test_mma_layout.cpp checks it, and that every code and parameter lands where the
// kernel's lane reads it. 4 and 8 bits move whole 32-bit words (at 4 bits the planes' rule puts
// MLX's words in place unchanged: the test checks that too); 2, 3, 5 and 6 bits move codes.
#include <cstring>
#include <stdexcept>
#include <string>

#include "support/parallel.h"
#include "exactq/mma_layout.h"

namespace exactq {

namespace mma_layout {

void check_shape(std::int64_t n, std::int64_t k, int bits, int group) {
  validate_shape(n, k, bits, group);
  if (k % round_values(bits, group) != 0)
    throw std::invalid_argument("[exactq] the mma fragment layout needs K a multiple of " +
                                std::to_string(round_values(bits, group)) + " at " + std::to_string(bits) +
                                " bits, group " + std::to_string(group) + "; got K = " + std::to_string(k));
}

}  // namespace mma_layout

namespace {

// 4 and 8 bits move whole 32-bit words; the other widths move codes, plane by plane.
constexpr bool moves_whole_words(int bits) { return bits == 4 || bits == 8; }

// Calls words(mlx_row, mlx_byte, fragment_byte) for every 4-byte word of codes (4 and 8 bits:
// whole words move), and params(mlx_element, fragment_element) for every group parameter, of the
// N real rows. Rows in [first, end).
template <typename Words, typename Params>
void for_each_place(std::int64_t first, std::int64_t end, std::int64_t k, int bits, int group, Words&& words,
                    Params&& params) {
  using namespace mma_layout;
  const std::int64_t rounds = k / round_values(bits, group);
  const int words_per_half = round_row_bytes(bits, group) / 16, gpr = groups_per_round(bits, group);
  const std::int64_t groups = k / group;
  for (std::int64_t row = first; row < end; ++row) {
    const std::int64_t task = row / kTaskRows;
    const int g = int(row % kTaskRows) % 8, h = int(row % kTaskRows) / 8;
    for (std::int64_t j = 0; j < rounds; ++j) {
      for (int t = 0; t < 4; ++t)
        if (moves_whole_words(bits))
          for (int i = 0; i < words_per_half; ++i)
            words(row, mlx_word_byte(j, t, i, bits, group),
                  fragment_word_byte(task, rounds, j, h, 4 * g + t, i, bits, group));
      for (int i = 0; i < gpr; ++i)
        params(row * groups + j * gpr + i, fragment_param_index(task, rounds, j, g, i, h, bits, group));
    }
  }
}

// 2, 3, 5 and 6 bits: the planes of every code of rows [first, end) written into (forward) or
// read back from the fragment layout's words.
void move_planar_codes(const QuantizedMatrixView& w, QuantizedMatrix& out, bool forward, std::int64_t first,
                       std::int64_t end) {
  using namespace mma_layout;
  const int bits = w.bits, group = w.group, planes = plane_count(bits);
  const std::int64_t rounds = w.k / round_values(bits, group), row_bytes = w.row_bytes();
  const std::uint8_t* src = w.packed.data();
  std::uint8_t* dst = out.packed.data();
  std::uint8_t codes[kChunkValues];
  for (std::int64_t row = first; row < end; ++row) {
    const std::int64_t task = row / kTaskRows;
    const int g = int(row % kTaskRows) % 8, h = int(row % kTaskRows) / 8;
    const std::uint8_t* mlx_in = forward ? src + row * row_bytes : nullptr;
    std::uint8_t* mlx_out = forward ? nullptr : dst + row * row_bytes;
    for (std::int64_t j = 0; j < rounds; ++j)
      for (int c = 0; c < round_values(bits, group) / kChunkValues; ++c) {
        const std::int64_t chunk = j * (round_values(bits, group) / kChunkValues) + c;
        if (forward) unpack_chunk(mlx_in + chunk * chunk_bytes(bits), bits, codes);
        for (int t = 0; t < 4; ++t)
          for (int m = 0; m < 8; ++m) {  // code 8t + m of the chunk: pair i = m % 4, element e = m / 4
            const int i = m % 4, e = m / 4;
            std::uint32_t code = 0;
            for (int p = 0; p < planes; ++p) {
              const std::int64_t at = lane_word_byte(task, rounds, j, 4 * g + t, plane_word(bits, p, h, c), bits, group);
              const int bit = plane_bit(bits, p, c, i, e), width = plane_width(bits, p);
              std::uint32_t word;
              if (forward) {
                std::memcpy(&word, dst + at, 4);
                word |= ((std::uint32_t(codes[8 * t + m]) >> plane_offset(bits, p)) & ((1u << width) - 1u)) << bit;
                std::memcpy(dst + at, &word, 4);
              } else {
                std::memcpy(&word, src + at, 4);
                code |= ((word >> bit) & ((1u << width) - 1u)) << plane_offset(bits, p);
              }
            }
            if (!forward) pack_code(mlx_out, chunk * kChunkValues + 8 * t + m, bits, code);
          }
      }
  }
}

QuantizedMatrix empty_like(const QuantizedMatrixView& w, WeightLayout layout) {
  QuantizedMatrix out;
  out.n = w.n, out.k = w.k, out.bits = w.bits, out.group = w.group, out.dtype = w.dtype, out.layout = layout;
  const std::int64_t rows = layout == WeightLayout::mma_fragments ? mma_layout::padded_rows(w.n) : w.n;
  out.packed.assign(std::size_t(rows * w.row_bytes()), 0);
  out.scales.assign(std::size_t(rows * w.groups_per_row()) * dtype_size(w.dtype), std::byte{0});
  out.biases.assign(out.scales.size(), std::byte{0});
  return out;
}

QuantizedMatrix convert(const QuantizedMatrixView& w, WeightLayout from, WeightLayout to) {
  // validate() first, so that a layout that is no WeightLayout is named as such rather than
  // reported as the other layout.
  w.validate();
  if (w.layout != from)
    throw std::invalid_argument(std::string("[exactq] expected a matrix in the ") +
                                (from == WeightLayout::mlx ? "MLX" : "mma fragment") + " layout");
  mma_layout::check_shape(w.n, w.k, w.bits, w.group);
  QuantizedMatrix out = empty_like(w, to);
  const bool forward = to == WeightLayout::mma_fragments;
  const std::int64_t row_bytes = w.row_bytes();
  const std::size_t elem = dtype_size(w.dtype);
  // Rows are independent, and each row's words and parameters are its own.
  parallel_rows(w.n, 0, [&](std::int64_t first, std::int64_t end) {
    if (!moves_whole_words(w.bits)) move_planar_codes(w, out, forward, first, end);
    for_each_place(
        first, end, w.k, w.bits, w.group,
        [&](std::int64_t row, std::int64_t mlx_byte, std::int64_t fragment_byte) {
          const std::int64_t mlx_at = row * row_bytes + mlx_byte;
          if (forward) std::memcpy(out.packed.data() + fragment_byte, w.packed.data() + mlx_at, 4);
          else std::memcpy(out.packed.data() + mlx_at, w.packed.data() + fragment_byte, 4);
        },
        [&](std::int64_t mlx_element, std::int64_t fragment_element) {
          const std::int64_t src = forward ? mlx_element : fragment_element, dst = forward ? fragment_element : mlx_element;
          std::memcpy(out.scales.data() + dst * elem, w.scales.data() + src * elem, elem);
          std::memcpy(out.biases.data() + dst * elem, w.biases.data() + src * elem, elem);
        });
  });
  return out;
}

}  // namespace

QuantizedMatrix to_mma_fragments(const QuantizedMatrixView& w) {
  return convert(w, WeightLayout::mlx, WeightLayout::mma_fragments);
}
QuantizedMatrix to_mlx_layout(const QuantizedMatrixView& w) {
  return convert(w, WeightLayout::mma_fragments, WeightLayout::mlx);
}

}  // namespace exactq
