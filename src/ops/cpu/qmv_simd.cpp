// The exact family's dispatch to the vector level chosen at run time (cpu::qmv_isa()).
#include "ops/cpu/qmv_simd.h"

#include <algorithm>
#include <thread>

namespace exactq::cpu::simd {

// Handing rows to a parked worker costs about a microsecond (support/worker_pool.h); one core
// streams a small matrix's weights at about 4 GB/s. A worker is therefore asked for per this much
// packed weight times vectors, some 15 us of work. Rows are independent, so the thread count
// changes no byte.
inline constexpr std::int64_t kBytesPerWorker = std::int64_t(64) << 10;

static int workers_for(const QuantizedMatrixView& w, std::int64_t m, int threads) {
  const std::int64_t asked = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t useful = std::max<std::int64_t>(1, w.n * w.row_bytes() * m / kBytesPerWorker);
  return int(std::min(asked, useful));
}

bool run_vectorised(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int tile,
                    int threads) {
  const Isa isa = qmv_isa();
  if (isa == Isa::scalar) return false;
  const RowsKernel kernel = isa == Isa::avx512 ? avx512_rows(w.bits) : avx2_rows(w.bits);
  if (kernel == nullptr) return false;
  const Staged staged = stage(x, isa == Isa::avx512 ? avx512_layout(w.bits) : avx2_layout(w.bits));
  parallel_rows(w.n, workers_for(w, x.m, threads), [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t v0 = 0; v0 < x.m; v0 += tile)
      kernel(w, staged, v0, int(std::min<std::int64_t>(tile, x.m - v0)), first, end, y);
  });
  return true;
}

}  // namespace exactq::cpu::simd
