// qmv_wide on the CPU: MLX qmv_wide's order (docs/design.md §5), the deliberately different arm.
// 8 lanes per row take whole groups strided by 8; each 8-code sub-chunk is dequantized as
// s*q+b and then dotted with x; the lanes are combined by the shuffle-down ladder 4, 2, 1.
// Vectors go in MLX's tiles of at most 5, each tile re-reading the weights; the tiling does not
// change any vector's bits (each vector's sequence is independent of its neighbours).
#include <algorithm>

#include "ops/cpu/common.h"
#include "order/qmv_wide.h"

namespace exactq::cpu {

void qmv_wide(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int threads) {
  const std::int64_t groups = w.groups_per_row();
  const int chunks_per_group = w.group / kChunkValues;
  const int per_tile = order::wide_vectors_per_tile(x.m);
  parallel_rows(w.n, threads, [&](std::int64_t first, std::int64_t end) {
    std::vector<float> scales, biases;
    std::vector<float> codes(std::size_t(w.group));
    std::vector<float> dequantized(std::size_t(w.group));
    for (std::int64_t n = first; n < end; ++n) {
      widen_group_params(w, n, scales, biases);
      const std::uint8_t* row = w.packed.data() + n * w.row_bytes();
      for (std::int64_t v0 = 0; v0 < x.m; v0 += per_tile) {
        const int tile = int(std::min<std::int64_t>(per_tile, x.m - v0));
        float lanes[order::kWideMaxVectors][order::kWideLanes] = {};
        for (std::int64_t g = 0; g < groups; ++g) {
          for (int c = 0; c < chunks_per_group; ++c)
            chunk_codes(row, g * chunks_per_group + c, w.bits, codes.data() + c * kChunkValues);
          for (int i = 0; i < w.group; ++i)
            dequantized[std::size_t(i)] = order::wide_dequant(scales[g], codes[std::size_t(i)], biases[g]);
          const int lane = int(g % order::kWideLanes);
          for (int v = 0; v < tile; ++v) {
            const float* xg = x.row(v0 + v) + g * w.group;
            for (int sub = 0; sub < w.group; sub += order::kWideSubChunk) {
              float a = 0.0f;
              for (int i = sub; i < sub + order::kWideSubChunk; ++i)
                a = order::wide_step(a, xg[i], dequantized[std::size_t(i)]);
              lanes[v][lane] = order::add(lanes[v][lane], a);
            }
          }
        }
        for (int v = 0; v < tile; ++v)
          store_f32(y.data(), std::size_t((v0 + v) * w.n + n), w.dtype, order::wide_ladder(lanes[v]));
      }
    }
  });
}

}  // namespace exactq::cpu
