// Greedy argmax on the CPU: order/argmax.h, one row at a time.
#include <vector>

#include "ops/cpu/decoder_ops.h"
#include "order/argmax.h"

namespace exactq::cpu {

void argmax(const std::byte* logits, std::int64_t m, std::int64_t n, DType t, std::int32_t* indices) {
  std::vector<float> row(static_cast<std::size_t>(n));
  for (std::int64_t v = 0; v < m; ++v) {
    for (std::int64_t j = 0; j < n; ++j) row[std::size_t(j)] = load_f32(logits, std::size_t(v * n + j), t);
    indices[v] = std::int32_t(order::argmax(row.data(), n));
  }
}

}  // namespace exactq::cpu
