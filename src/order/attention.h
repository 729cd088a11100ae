// Attention's order for one query row of one head: the keys it sees are cut into chunks of a
// fixed size over absolute positions; each chunk gives a max, a sum and a weighted V sum; chunks
// are folded in increasing position. docs/op-contract.md §4 is the prose.
//
// Query at position p, head dim d (a multiple of 8, at most 512), window W (0: none):
//   visible keys: positions j with lo <= j <= p, lo = max(0, p - W + 1) (j > p - W) or 0
//   q'_i = mul(q_i, scale)                       scale = f32(1/sqrt(scalar)), attention_scale
//   s_j  = dot(q', k_j): 8 partials, partial t takes dims t, t+8, t+16, ... (increasing) by
//          fma(q'_i, k_j,i, acc) from +0; then xor butterfly 4, 2, 1 (value of partial 0):
//          ((P0+P4)+(P2+P6)) + ((P1+P5)+(P3+P7))
//   chunk c = absolute positions [64c, 64c + 63] intersected with [lo, p], c increasing; in it
//     m_c   = the largest s_j (strict >, from -inf: NaN never enters; max has no order)
//     e_j   = exp(add(s_j, -m_c))                math.h exp
//     l_c   = sum of e_j, j increasing, add from +0
//     o_c,i = sum of e_j v_j,i, j increasing, fma(e_j, v_j,i, acc) from +0
//   fold, from (m, l, o) = (-inf, +0, +0), chunk by chunk:
//     m'  = m_c > m ? m_c : m
//     a   = exp(add(m, -m')),  b = exp(add(m_c, -m'))      (one of them is exp(0) = 1 exactly)
//     l   = fma(l, a, mul(l_c, b));   o_i = fma(o_i, a, mul(o_c,i, b));   m = m'
//   out_i = div(o_i, l)
//
// Nothing here depends on how many rows are computed together, on the cache's length or on any
// key past p: a verify row at position p + j equals the decode step at p + j byte for byte.
// K and V are the stored cache values widened exactly (load_f32). A NaN or +inf score makes the
// row's outputs NaN (stored canonically); a -inf score gets weight 0 unless its whole chunk is
// -inf (then NaN). On the GPU: a thread (or 8 lanes with 3 shuffles) per key for
// the score, with 8 independent fma chains fed by one 16-byte load of 8 bf16 dims; a thread per
// output dim for o_c; chunks may be computed in parallel (split-KV over absolute chunks) and
// their (m_c, l_c, o_c) folded afterwards in increasing c. ops/cuda/attention.cu does so: a block
// per (row, kv head, chunk) writes each chunk's statistics, and the last of a row's blocks to
// finish folds them.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "order/math.h"

namespace exactq::order {

inline constexpr int kAttentionChunk = 64;  // positions per chunk: a constant of the order
inline constexpr int kDotPartials = 8;
inline constexpr int kDotButterflySteps = 3;
inline constexpr int kMaxHeadDim = 512;
EXACTQ_HD constexpr int dot_butterfly_mask(int step) { return 4 >> step; }  // 4, 2, 1

// The scale as an f32 constant, computed once on the host: 1/sqrt(scalar) in double, rounded
// once. scalar = head_dim, or Gemma 3's query_pre_attn_scalar (Gemma 3 has no attention
// softcapping).
inline float attention_scale(double scalar) { return static_cast<float>(1.0 / std::sqrt(scalar)); }

EXACTQ_HD std::int64_t attention_first_visible(std::int64_t position, std::int64_t window) {
  return window > 0 && position - window + 1 > 0 ? position - window + 1 : 0;
}

// One step of partial u's chain (dims u, u + 8, ...), and one step of the butterfly. On the GPU,
// lane u of an 8-lane group runs partial u, and the butterfly is __shfl_xor_sync with the masks.
EXACTQ_HD float attention_dot_step(float partial, float q, float k) { return fma(q, k, partial); }
EXACTQ_HD float attention_dot_butterfly_step(float own, float partner) { return add(own, partner); }

// s_j for one key row (k_offset: the row's first element in `keys`, of type t).
EXACTQ_HD float attention_score(const float* q_scaled, const void* keys, std::size_t k_offset, DType t, int d) {
  float part[kDotPartials];
  for (int u = 0; u < kDotPartials; ++u) part[u] = 0.0f;
  for (int i = 0; i < d; i += kDotPartials)
    for (int u = 0; u < kDotPartials; ++u)
      part[u] = attention_dot_step(part[u], q_scaled[i + u], load_f32(keys, k_offset + std::size_t(i + u), t));
  for (int step = 0; step < kDotButterflySteps; ++step) {
    const int mask = dot_butterfly_mask(step);
    float next[kDotPartials];
    for (int u = 0; u < kDotPartials; ++u) next[u] = attention_dot_butterfly_step(part[u], part[u ^ mask]);
    for (int u = 0; u < kDotPartials; ++u) part[u] = next[u];
  }
  return part[0];
}

EXACTQ_HD float attention_max_step(float m, float s) { return s > m ? s : m; }
EXACTQ_HD float attention_weight(float s, float chunk_max) { return exp(add(s, negate(chunk_max))); }

// One chunk's (m_c, l_c, o_c) over positions [first, last] (all visible). `scores` holds
// last - first + 1 floats; o_c holds d.
struct ChunkStats {
  float max, sum;
};
EXACTQ_HD ChunkStats attention_chunk(const float* q_scaled, const void* keys, const void* values, DType t,
                                     std::size_t row_stride, int d, std::int64_t first, std::int64_t last,
                                     float* scores, float* o_c) {
  float m = float_from_bits(0xff800000u);  // -inf
  for (std::int64_t j = first; j <= last; ++j) {
    scores[j - first] = attention_score(q_scaled, keys, std::size_t(j) * row_stride, t, d);
    m = attention_max_step(m, scores[j - first]);
  }
  for (int i = 0; i < d; ++i) o_c[i] = 0.0f;
  float l = 0.0f;
  for (std::int64_t j = first; j <= last; ++j) {
    const float e = attention_weight(scores[j - first], m);
    l = add(l, e);
    for (int i = 0; i < d; ++i) o_c[i] = fma(e, load_f32(values, std::size_t(j) * row_stride + std::size_t(i), t), o_c[i]);
  }
  return {m, l};
}

// The fold's factors: the new running max, a for the running values and b for the chunk's.
struct FoldFactors {
  float max, a, b;
};
EXACTQ_HD FoldFactors attention_fold_factors(float m, float chunk_max) {
  const float m_new = attention_max_step(m, chunk_max);
  return {m_new, exp(add(m, negate(m_new))), exp(add(chunk_max, negate(m_new)))};
}
// One running value (l, or o_i) folded with the chunk's (l_c, or o_c,i).
EXACTQ_HD float attention_fold_value(float running, float chunk, FoldFactors f) {
  return fma(running, f.a, mul(chunk, f.b));
}

// Folds chunk c's statistics into the running (m, l, o).
EXACTQ_HD void attention_fold(float& m, float& l, float* o, ChunkStats c, const float* o_c, int d) {
  const FoldFactors f = attention_fold_factors(m, c.max);
  l = attention_fold_value(l, c.sum, f);
  for (int i = 0; i < d; ++i) o[i] = attention_fold_value(o[i], o_c[i], f);
  m = f.max;
}

struct AttentionParams {
  int head_dim = 0;
  float scale = 1.0f;       // attention_scale(...)
  std::int64_t window = 0;  // sliding window (keys j > p - window), 0: none
};

// The order with the chunk size as a parameter. The contract is chunk = kAttentionChunk
// (attention_row); other sizes exist for tests' negative controls.
inline void attention_row_chunked(const float* q, std::int64_t position, const void* keys, const void* values, DType t,
                                  std::size_t row_stride, const AttentionParams& a, int chunk, float* out) {
  const int d = a.head_dim;
  if (d <= 0 || d % kDotPartials != 0 || d > kMaxHeadDim || chunk <= 0 || position < 0)
    throw std::invalid_argument("attention: head_dim must be a positive multiple of 8 up to 512");
  float q_scaled[kMaxHeadDim], o[kMaxHeadDim], o_c[kMaxHeadDim];
  std::vector<float> scores(static_cast<std::size_t>(chunk));
  for (int i = 0; i < d; ++i) {
    q_scaled[i] = mul(q[i], a.scale);
    o[i] = 0.0f;
  }
  float m = float_from_bits(0xff800000u), l = 0.0f;
  const std::int64_t lo = attention_first_visible(position, a.window);
  for (std::int64_t c = lo / chunk; c <= position / chunk; ++c) {
    const std::int64_t first = c * chunk > lo ? c * chunk : lo;
    const std::int64_t last = (c + 1) * chunk - 1 < position ? (c + 1) * chunk - 1 : position;
    const ChunkStats s = attention_chunk(q_scaled, keys, values, t, row_stride, d, first, last, scores.data(), o_c);
    attention_fold(m, l, o, s, o_c, d);
  }
  for (int i = 0; i < d; ++i) out[i] = div(o[i], l);
}

// The CPU reference: q (d f32 values) at absolute `position`; keys and values of type t, the row
// of position j at element j * row_stride (rows past `position` are never read); out: d f32.
inline void attention_row(const float* q, std::int64_t position, const void* keys, const void* values, DType t,
                          std::size_t row_stride, const AttentionParams& a, float* out) {
  attention_row_chunked(q, position, keys, values, t, row_stride, a, kAttentionChunk, out);
}

}  // namespace exactq::order
