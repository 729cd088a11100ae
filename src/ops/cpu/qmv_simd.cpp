// The exact family's dispatch to the vector level chosen at run time (cpu::qmv_isa()).
#include "ops/cpu/qmv_simd.h"

#include <algorithm>

namespace exactq::cpu::simd {

bool run_vectorised(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int tile,
                    int threads) {
  const Isa isa = qmv_isa();
  if (isa == Isa::scalar) return false;
  const RowsKernel kernel = isa == Isa::avx512 ? avx512_rows(w.bits) : avx2_rows(w.bits);
  if (kernel == nullptr) return false;
  const Staged staged = stage(x, isa == Isa::avx512 ? avx512_layout(w.bits) : avx2_layout(w.bits));
  parallel_rows(w.n, threads, [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t v0 = 0; v0 < x.m; v0 += tile)
      kernel(w, staged, v0, int(std::min<std::int64_t>(tile, x.m - v0)), first, end, y);
  });
  return true;
}

}  // namespace exactq::cpu::simd
