// qmv on the CPU: the M=1 reference order (docs/design.md §3), lanes simulated.
// At M > 1 each vector runs on its own and re-decodes every weight, like the GPU's narrow arm.
#include "ops/cpu/common.h"
#include "ops/cpu/qmv_simd.h"

namespace exactq::cpu {

// One row against one vector: each chunk's contribution goes to lane c % 32, in increasing c,
// which is exactly the order in which lane l walks its chunks l, l+32, l+64, ...
static float qmv_row(const std::uint8_t* row, const float* scales, const float* biases, int group, int bits,
                     const Activations& x, std::int64_t v, std::int64_t chunks) {
  float lanes[order::kLanes] = {};
  const std::int64_t chunks_per_group = group / kChunkValues;
  const std::int32_t* integers = x.integer_row(v);
  const order::ChunkFacts* facts = x.chunk_facts(v);
  for (std::int64_t c = 0; c < chunks; ++c) {
    std::uint8_t codes[kChunkValues];
    unpack_chunk(row + c * chunk_bytes(bits), bits, codes);
    const float a = order::chunk_value(order::exact_float(chunk_code_dot(codes, integers + c * kChunkValues)),
                                       facts[c].unscale);
    const std::int64_t g = c / chunks_per_group;
    const int lane = int(c % order::kLanes);
    lanes[lane] = order::lane_add(lanes[lane], order::chunk_fold(scales[g], biases[g], a, facts[c].sum));
  }
  return order::butterfly(lanes);
}

// The scalar kernel below is the portable one; where the CPU has AVX2 or AVX-512 (qmv_isa()),
// qmv_simd.cpp runs the same order with vector instructions, one vector at a time.
void qmv_narrow(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int threads) {
  if (simd::run_vectorised(w, x, y, 1, threads)) return;
  const std::int64_t chunks = w.k / kChunkValues;
  parallel_rows(w.n, threads, [&](std::int64_t first, std::int64_t end) {
    std::vector<float> scales, biases;
    for (std::int64_t n = first; n < end; ++n) {
      widen_group_params(w, n, scales, biases);
      const std::uint8_t* row = w.packed.data() + n * w.row_bytes();
      for (std::int64_t v = 0; v < x.m; ++v) {
        const float r = qmv_row(row, scales.data(), biases.data(), w.group, w.bits, x, v, chunks);
        store_f32(y.data(), std::size_t(v * w.n + n), w.dtype, r);
      }
    }
  });
}

}  // namespace exactq::cpu
