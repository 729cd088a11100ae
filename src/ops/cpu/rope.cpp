// RoPE on the CPU: order/rope.h, one head vector at a time, in place.
#include "ops/cpu/decoder_ops.h"
#include "order/attention.h"
#include "order/rope.h"
#include "support/parallel.h"

namespace exactq::cpu {

void rope(std::byte* x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t,
          const std::int32_t* positions, const std::uint64_t* steps, bool interleaved, int threads) {
  parallel_rows(m * heads, threads, [&](std::int64_t first, std::int64_t end) {
    float in[order::kMaxHeadDim], out[order::kMaxHeadDim];
    for (std::int64_t r = first; r < end; ++r) {
      const std::size_t base = std::size_t(r * head_dim);
      const std::uint64_t position = std::uint64_t(positions[r / heads]);
      for (std::int64_t i = 0; i < head_dim; ++i) in[i] = load_f32(x, base + std::size_t(i), t);
      if (interleaved)
        order::rope_interleaved(in, int(head_dim), position, steps, out);
      else
        order::rope_half_split(in, int(head_dim), position, steps, out);
      for (std::int64_t i = 0; i < head_dim; ++i) store_f32(x, base + std::size_t(i), t, out[i]);
    }
  });
}

}  // namespace exactq::cpu
