// Conversion between MLX's layout and qmv_mma's fragment layout (exactq/mma_layout.h). Both
// directions walk the same index functions, so they are each other's inverse by construction;
// tests/cpu/test_mma_layout.cpp checks it, and that every code and parameter lands where the
// kernel's lane reads it.
#include <cstring>
#include <stdexcept>
#include <string>

#include "exactq/mma_layout.h"

namespace exactq {

namespace mma_layout {

void check_shape(std::int64_t n, std::int64_t k, int bits, int group) {
  validate_shape(n, k, bits, group);
  if (!serves(bits))
    throw std::invalid_argument("[exactq] the mma fragment layout serves 4 and 8 bits, not bits = " + std::to_string(bits));
  if (k % round_values(bits, group) != 0)
    throw std::invalid_argument("[exactq] the mma fragment layout needs K a multiple of " +
                                std::to_string(round_values(bits, group)) + " at " + std::to_string(bits) +
                                " bits, group " + std::to_string(group) + "; got K = " + std::to_string(k));
}

}  // namespace mma_layout

namespace {

// Calls f(mlx_row, mlx_byte, fragment_byte) for every 4-byte word of codes, and
// p(mlx_element, fragment_element) for every group parameter, of the N real rows.
template <typename Words, typename Params>
void for_each_place(std::int64_t n, std::int64_t k, int bits, int group, Words&& words, Params&& params) {
  using namespace mma_layout;
  const std::int64_t rounds = k / round_values(bits, group), tasks = padded_rows(n) / kTaskRows;
  const int words_per_half = round_row_bytes(bits, group) / 16, gpr = groups_per_round(bits, group);
  const std::int64_t groups = k / group;
  for (std::int64_t task = 0; task < tasks; ++task)
    for (std::int64_t j = 0; j < rounds; ++j)
      for (int lane = 0; lane < kLanes; ++lane)
        for (int h = 0; h < 2; ++h) {
          const int g = lane / 4, t = lane % 4;
          const std::int64_t row = task * kTaskRows + g + 8 * h;
          if (row >= n) continue;  // padding rows stay zero
          for (int i = 0; i < words_per_half; ++i)
            words(row, mlx_word_byte(j, t, i, bits, group), fragment_word_byte(task, rounds, j, h, lane, i, bits, group));
          if (t == 0)
            for (int i = 0; i < gpr; ++i)
              params(row * groups + j * gpr + i, fragment_param_index(task, rounds, j, g, i, h, bits, group));
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
  if (w.layout != from)
    throw std::invalid_argument(std::string("[exactq] expected a matrix in the ") +
                                (from == WeightLayout::mlx ? "MLX" : "mma fragment") + " layout");
  w.validate();
  mma_layout::check_shape(w.n, w.k, w.bits, w.group);
  QuantizedMatrix out = empty_like(w, to);
  const bool forward = to == WeightLayout::mma_fragments;
  const std::int64_t row_bytes = w.row_bytes();
  const std::size_t elem = dtype_size(w.dtype);
  for_each_place(
      w.n, w.k, w.bits, w.group,
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
