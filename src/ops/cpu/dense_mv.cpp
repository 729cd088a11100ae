// Dense mat-vec on the CPU: order/dense.h, one output at a time.
#include <vector>

#include "ops/cpu/decoder_ops.h"
#include "order/dense.h"
#include "support/parallel.h"

namespace exactq::cpu {

void dense_mv(const DenseWeights& w, const std::byte* x, std::int64_t m, std::byte* y, int threads) {
  std::vector<float> xf(std::size_t(m * w.k));
  for (std::size_t i = 0; i < xf.size(); ++i) xf[i] = load_f32(x, i, w.dtype);
  parallel_rows(w.n, threads, [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t v = 0; v < m; ++v)
      for (std::int64_t r = first; r < end; ++r)
        store_f32(y, std::size_t(v * w.n + r), w.dtype, order::dense_dot(w.bytes.data(), w.dtype, r, xf.data() + v * w.k, w.k));
  });
}

}  // namespace exactq::cpu
