// Attention on the CPU: order/attention.h, one (query row, head) at a time. Query head h reads kv
// head h / (heads / kv_heads) (grouped-query attention).
#include "ops/cpu/decoder_ops.h"
#include "order/attention.h"
#include "support/parallel.h"

namespace exactq::cpu {

void attention(const std::byte* q, const std::byte* keys, const std::byte* values, std::int64_t m,
               const std::int32_t* positions, const AttentionShape& s, DType t, std::byte* out, int threads) {
  const std::int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  const std::size_t row_stride = std::size_t(s.kv_heads * d), e = dtype_size(t);
  const order::AttentionParams params{int(d), s.scale, s.window};
  parallel_rows(m * s.heads, threads, [&](std::int64_t first, std::int64_t end) {
    float qf[order::kMaxHeadDim], of[order::kMaxHeadDim];
    for (std::int64_t r = first; r < end; ++r) {
      const std::int64_t row = r / s.heads, head = r % s.heads, kv = head / group;
      const std::size_t base = std::size_t(r * d);
      for (std::int64_t i = 0; i < d; ++i) qf[i] = load_f32(q, base + std::size_t(i), t);
      order::attention_row(qf, positions[row], keys + std::size_t(kv * d) * e, values + std::size_t(kv * d) * e, t,
                           row_stride, params, of);
      for (std::int64_t i = 0; i < d; ++i) store_f32(out, base + std::size_t(i), t, of[i]);
    }
  });
}

}  // namespace exactq::cpu
