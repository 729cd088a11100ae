// RMSNorm on the CPU: order/norm.h, one row at a time.
#include <vector>

#include "ops/cpu/decoder_ops.h"
#include "order/norm.h"
#include "support/parallel.h"

namespace exactq::cpu {

void rmsnorm(const std::byte* x, const std::byte* weight, std::int64_t rows, std::int64_t h, DType t, float eps,
             bool one_plus_weight, std::byte* y, int threads) {
  parallel_rows(rows, threads, [&](std::int64_t first, std::int64_t end) {
    std::vector<float> scratch(static_cast<std::size_t>(h));
    for (std::int64_t r = first; r < end; ++r)
      order::rmsnorm_row_stored(x + std::size_t(r * h) * dtype_size(t), t, weight, t, int(h), eps, one_plus_weight,
                                y + std::size_t(r * h) * dtype_size(t), t, scratch.data());
  });
}

}  // namespace exactq::cpu
