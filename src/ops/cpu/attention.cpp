// Attention on the CPU: order/attention.h's chunk loop, run for the query heads of a GQA group
// together (query head h reads kv head h / (heads / kv_heads)), so that each K and V row of a
// chunk is loaded once for all of them; the wide steps are attention_kernels' for the instruction
// set chosen (cpu::qmv_isa(): one choice for every CPU op). The scalar steps (the max, l_c, the
// fold factors, the division) are the order's functions, called in the order's sequence.
#include <algorithm>
#include <stdexcept>
#include <thread>

#include "ops/cpu/attention_kernels.h"
#include "ops/cpu/decoder_ops.h"
#include "order/attention.h"
#include "support/parallel.h"

namespace exactq::cpu {

const AttentionKernels& attention_kernels(Isa isa) {
  switch (isa) {
    case Isa::avx512: return attention_detail::avx512;
    case Isa::avx2: return attention_detail::avx2;
    default: return attention_detail::scalar;
  }
}

namespace {

constexpr int kChunk = order::kAttentionChunk;
constexpr std::size_t kDim = order::kMaxHeadDim;

// One query row's heads [h0, h0 + nh), all reading kv head `kv`.
void attend(const AttentionKernels& k, const std::byte* q, const std::byte* keys, const std::byte* values,
            std::int64_t row, std::int64_t position, std::int64_t kv, std::int64_t h0, int nh, const AttentionShape& s,
            DType t, std::byte* out) {
  const int d = int(s.head_dim);
  const std::size_t e = dtype_size(t), stride = std::size_t(s.kv_heads * d) * e;
  alignas(64) float q_scaled[kAttentionHeads * kDim], o[kAttentionHeads * kDim], o_c[kAttentionHeads * kDim];
  alignas(64) float w[kAttentionHeads * kChunk];
  float m[kAttentionHeads], l[kAttentionHeads], chunk_max[kAttentionHeads], chunk_sum[kAttentionHeads];
  const std::size_t q_first = std::size_t((row * s.heads + h0) * d);
  for (int h = 0; h < nh; ++h) {
    for (int i = 0; i < d; ++i) {
      q_scaled[h * kDim + i] = order::mul(load_f32(q, q_first + std::size_t(h * d + i), t), s.scale);
      o[h * kDim + i] = 0.0f;
    }
    m[h] = float_from_bits(0xff800000u);  // -inf
    l[h] = 0.0f;
  }
  const std::int64_t lo = order::attention_first_visible(position, s.window);
  for (std::int64_t c = lo / kChunk; c <= position / kChunk; ++c) {
    const std::int64_t first = c * kChunk > lo ? c * kChunk : lo;
    const std::int64_t last = (c + 1) * kChunk - 1 < position ? (c + 1) * kChunk - 1 : position;
    const int count = int(last - first + 1);
    const std::size_t at = std::size_t(first) * stride + std::size_t(kv * d) * e;
    k.scores(q_scaled, kDim, nh, keys + at, stride, count, d, t, w);
    // The heads' max scans and l_c chains side by side: each is its own sequence over j, and
    // several in flight hide the latency of each step.
    for (int h = 0; h < nh; ++h) chunk_max[h] = float_from_bits(0xff800000u);  // -inf
    for (int j = 0; j < count; ++j)
      for (int h = 0; h < nh; ++h) chunk_max[h] = order::attention_max_step(chunk_max[h], w[h * kChunk + j]);
    for (int h = 0; h < nh; ++h) {
      k.weights(w + h * kChunk, count, chunk_max[h]);
      chunk_sum[h] = 0.0f;
    }
    for (int j = 0; j < count; ++j)
      for (int h = 0; h < nh; ++h) chunk_sum[h] = order::add(chunk_sum[h], w[h * kChunk + j]);
    k.weighted_values(w, nh, values + at, stride, count, d, t, o_c, kDim);
    for (int h = 0; h < nh; ++h) {
      const order::FoldFactors f = order::attention_fold_factors(m[h], chunk_max[h]);
      l[h] = order::attention_fold_value(l[h], chunk_sum[h], f);
      k.fold(o + h * kDim, o_c + h * kDim, d, f.a, f.b);
      m[h] = f.max;
    }
  }
  for (int h = 0; h < nh; ++h)
    for (int i = 0; i < d; ++i) store_f32(out, q_first + std::size_t(h * d + i), t, order::div(o[h * kDim + i], l[h]));
}

// Handing tasks to a parked worker costs about a microsecond (support/worker_pool.h), while one
// core takes about 28 us for 6 heads of 64 dims over 512 keys. A worker is therefore asked for per
// this many (visible key, head, dim) products, some 10 us of work. Tasks are independent: the
// thread count changes no byte.
constexpr std::int64_t kProductsPerWorker = std::int64_t(1) << 16;

int workers_for(std::int64_t m, const std::int32_t* positions, const AttentionShape& s, int threads) {
  std::int64_t products = 0;
  for (std::int64_t r = 0; r < m; ++r)
    products += (positions[r] - order::attention_first_visible(positions[r], s.window) + 1) * s.heads * s.head_dim;
  const std::int64_t asked = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  return int(std::min(asked, std::max<std::int64_t>(1, products / kProductsPerWorker)));
}

}  // namespace

void attention(const std::byte* q, const std::byte* keys, const std::byte* values, std::int64_t m,
               const std::int32_t* positions, const std::int32_t* cache_rows, const AttentionShape& s, DType t,
               std::byte* out, int threads) {
  if (s.head_dim <= 0 || s.head_dim % order::kDotPartials != 0 || s.head_dim > order::kMaxHeadDim)
    throw std::invalid_argument("attention: head_dim must be a positive multiple of 8 up to 512");
  const std::int64_t group = s.heads / s.kv_heads, pieces = (group + kAttentionHeads - 1) / kAttentionHeads;
  const AttentionKernels& k = attention_kernels(qmv_isa());
  // A task per (row, kv head, up to kAttentionHeads of its query heads): at decode, M = 1, the
  // kv heads are what spreads over the threads.
  parallel_rows<1>(m * s.kv_heads * pieces, workers_for(m, positions, s, threads), [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t r = first; r < end; ++r) {
      const std::int64_t row = r / (s.kv_heads * pieces), kv = r / pieces % s.kv_heads, piece = r % pieces;
      const std::int64_t h0 = kv * group + piece * kAttentionHeads;
      const int nh = int(group - piece * kAttentionHeads < kAttentionHeads ? group - piece * kAttentionHeads
                                                                          : kAttentionHeads);
      // The row's sequence from its position 0 on.
      const std::size_t first =
          std::size_t(cache_rows[row] - positions[row]) * std::size_t(s.kv_heads * s.head_dim) * dtype_size(t);
      attend(k, q, keys + first, values + first, row, positions[row], kv, h0, nh, s, t, out);
    }
  });
}

}  // namespace exactq::cpu
