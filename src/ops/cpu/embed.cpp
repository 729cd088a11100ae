// Embedding lookup on the CPU: a quantized row is dequantized (order/elementwise.h), a dense row
// copied. The backend has checked every token against the table.
#include <cstring>

#include "ops/cpu/decoder_ops.h"
#include "order/elementwise.h"
#include "support/parallel.h"

namespace exactq::cpu {

void embed_quantized(const QuantizedMatrixView& table, const std::int32_t* tokens, std::int64_t m, std::byte* out,
                     int threads) {
  const std::int64_t k = table.k, groups = table.groups_per_row();
  const std::int64_t row_bytes = packed_row_bytes(k, table.bits);
  parallel_rows(m, threads, [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t v = first; v < end; ++v) {
      const std::int64_t row = tokens[v];
      const std::uint8_t* codes = table.packed.data() + row * row_bytes;
      for (std::int64_t i = 0; i < k; ++i) {
        const std::size_t g = std::size_t(row * groups + i / table.group);
        const float s = load_f32(table.scales.data(), g, table.dtype);
        const float b = load_f32(table.biases.data(), g, table.dtype);
        store_f32(out, std::size_t(v * k + i), table.dtype, order::dequantize(s, unpack_code(codes, i, table.bits), b));
      }
    }
  });
}

void embed_dense(const DenseWeights& table, const std::int32_t* tokens, std::int64_t m, std::byte* out) {
  const std::size_t row = std::size_t(table.k) * dtype_size(table.dtype);
  for (std::int64_t v = 0; v < m; ++v)
    std::memcpy(out + std::size_t(v) * row, table.bytes.data() + std::size_t(tokens[v]) * row, row);
}

}  // namespace exactq::cpu
