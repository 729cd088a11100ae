// qmv_mma on the CPU: a reference, not a mirror. The GPU kernel's per-group sums acc_g come from
// the tensor cores, whose internal summation order and rounding are the hardware's and are not
// reproduced here. This computes acc_g exactly (in double, rounded once to f32) and then runs the
// kernel's f32 fold in its order (docs/design.md §6):
//   total = fma(scale_g, acc_g, fma(bias_g, S_g, total)),  g increasing,
// with S_g the f32 sum of the group's activations in increasing k. So CUDA and CPU agree to
// within a few roundings, and tests compare them with a tolerance, never bitwise.
#include "cpu/common.h"

namespace exactq::cpu {

void qmv_mma_reference(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int threads) {
  const std::int64_t groups = w.groups_per_row();
  parallel_rows(w.n, threads, [&](std::int64_t first, std::int64_t end) {
    std::vector<float> scales, biases;
    std::vector<std::uint8_t> codes(std::size_t(w.k));
    for (std::int64_t n = first; n < end; ++n) {
      widen_group_params(w, n, scales, biases);
      const std::uint8_t* row = w.packed.data() + n * w.row_bytes();
      for (std::int64_t c = 0; c < w.k / kChunkValues; ++c)
        unpack_chunk(row + c * chunk_bytes(w.bits), w.bits, codes.data() + c * kChunkValues);
      for (std::int64_t v = 0; v < x.m; ++v) {
        const float* xv = x.row(v);
        float total = 0.0f;
        for (std::int64_t g = 0; g < groups; ++g) {
          double acc = 0.0;
          float sum = 0.0f;
          for (std::int64_t i = g * w.group; i < (g + 1) * w.group; ++i) {
            acc += double(xv[i]) * double(codes[std::size_t(i)]);
            sum = order::add(sum, xv[i]);
          }
          total = order::fma(scales[std::size_t(g)], float(acc), order::fma(biases[std::size_t(g)], sum, total));
        }
        store_f32(y.data(), std::size_t(v * w.n + n), w.dtype, total);
      }
    }
  });
}

}  // namespace exactq::cpu
