// qmv_streamed on the CPU: qmv's order exactly, with each decoded chunk reused across a tile of
// up to V vectors (docs/design.md §4). Per vector, the sequence of operations is qmv's: the same
// chunk-to-lane map, the same exact chunk dot, the same fold and butterfly. Only the loop nest
// differs (weights outside, vectors inside), which is the whole point of the kernel.
#include <algorithm>

#include "ops/cpu/common.h"
#include "ops/cpu/qmv_simd.h"

namespace exactq::cpu {

void qmv_streamed(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int max_vectors,
                  int threads) {
  // The vector levels (qmv_simd.cpp) keep this loop nest: each block of a row decoded once per tile.
  if (simd::run_vectorised(w, x, y, max_vectors, threads)) return;
  const std::int64_t chunks = w.k / kChunkValues;
  const std::int64_t chunks_per_group = w.group / kChunkValues;
  parallel_rows(w.n, threads, [&](std::int64_t first, std::int64_t end) {
    std::vector<float> scales, biases;
    const std::int64_t widest = std::min<std::int64_t>(max_vectors, x.m);  // the widest tile there is
    std::vector<float> lanes(std::size_t(widest) * order::kLanes);
    for (std::int64_t n = first; n < end; ++n) {
      widen_group_params(w, n, scales, biases);
      const std::uint8_t* row = w.packed.data() + n * w.row_bytes();
      for (std::int64_t v0 = 0; v0 < x.m; v0 += max_vectors) {
        const int tile = int(std::min<std::int64_t>(max_vectors, x.m - v0));
        std::fill(lanes.begin(), lanes.end(), 0.0f);
        for (std::int64_t c = 0; c < chunks; ++c) {
          std::uint8_t codes[kChunkValues];
          unpack_chunk(row + c * chunk_bytes(w.bits), w.bits, codes);  // decoded once for the whole tile
          const std::int64_t g = c / chunks_per_group;
          const int lane = int(c % order::kLanes);
          for (int v = 0; v < tile; ++v) {
            const order::ChunkFacts f = x.chunk_facts(v0 + v)[c];
            const std::int64_t dot = chunk_code_dot(codes, x.integer_row(v0 + v) + c * kChunkValues);
            const float a = order::chunk_value(order::exact_float(dot), f.unscale);
            float& total = lanes[std::size_t(v) * order::kLanes + lane];
            total = order::lane_add(total, order::chunk_fold(scales[g], biases[g], a, f.sum));
          }
        }
        for (int v = 0; v < tile; ++v)
          store_f32(y.data(), std::size_t((v0 + v) * w.n + n), w.dtype,
                    order::butterfly(lanes.data() + std::size_t(v) * order::kLanes));
      }
    }
  });
}

}  // namespace exactq::cpu
