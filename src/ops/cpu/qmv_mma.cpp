// qmv_mma on the CPU: a reference, not a mirror. The GPU kernel's per-group sums acc_g come from
// the tensor cores, whose internal summation order and rounding are the hardware's and are not
// reproduced here. This computes acc_g exactly (in double, rounded once to f32) and then runs the
// kernel's f32 fold in its order (docs/design.md §5b, order.h):
//   total = fma(scale_g, acc_g, fma(bias_g, S_g, total)),  g increasing within each K segment,
// with S_g the f32 sum of the group's activations in increasing k, and the segment totals added
// in increasing segment. So CUDA and CPU agree to within a few roundings, and tests compare them
// with a tolerance, never bitwise.
#include "ops/cpu/common.h"
#include "order/qmv_mma.h"

namespace exactq::cpu {

void qmv_mma_reference(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int threads) {
  const std::int64_t groups = w.groups_per_row();
  // K segments as the kernels cut them (whole 128-byte rounds). A K that is not a whole number of
  // rounds is not served by the kernels; here it runs as one segment.
  const bool whole_rounds = mma_layout::fits(w.bits, w.group, w.k);
  const int round_values = whole_rounds ? mma_layout::round_values(w.bits, w.group) : 1;
  const int parts = whole_rounds ? order::mma_k_parts(w.n, w.k, w.bits, w.group) : 1;
  const int rounds = whole_rounds ? int(w.k / round_values) : 1;
  const std::int64_t groups_per_round = whole_rounds ? round_values / w.group : groups;
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
        float y_total = 0.0f;
        for (int part = 0; part < parts; ++part) {
          float total = 0.0f;
          for (std::int64_t g = order::mma_segment_begin(part, parts, rounds) * groups_per_round;
               g < order::mma_segment_begin(part + 1, parts, rounds) * groups_per_round; ++g) {
            double acc = 0.0;
            float sum = 0.0f;
            for (std::int64_t i = g * w.group; i < (g + 1) * w.group; ++i) {
              acc += double(xv[i]) * double(codes[std::size_t(i)]);
              sum = order::add(sum, xv[i]);
            }
            total = order::mma_fold(total, scales[std::size_t(g)], float(acc), biases[std::size_t(g)], sum);
          }
          y_total = part == 0 ? total : order::mma_segment_add(y_total, total);
        }
        store_f32(y.data(), std::size_t(v * w.n + n), w.dtype, y_total);
      }
    }
  });
}

}  // namespace exactq::cpu
