// The cache write on the CPU: row i of `rows` to row positions[i] of the cache (write_rows.cu's twin).
#include <cstring>

#include "ops/cpu/decoder_ops.h"

namespace exactq::cpu {

void write_rows(const std::byte* rows, const std::int32_t* positions, std::int64_t m, std::size_t row_bytes,
                std::byte* cache) {
  for (std::int64_t i = 0; i < m; ++i)
    std::memcpy(cache + std::size_t(positions[i]) * row_bytes, rows + std::size_t(i) * row_bytes, row_bytes);
}

}  // namespace exactq::cpu
