// The fold of attention.cu's chunks, by the block that the last arrival elects: a (row, kv head,
// head group)'s chunk statistics (m_c, l_c) and o_c in increasing c from (-inf, +0, +0), then
// out_i = div(o_i, l) (order/attention.h's sequential fold, docs/op-contract.md §4). Per tile of up
// to kFoldTile chunks: lane 0 of head h's warp runs the running max (the m before each chunk), lane
// k makes chunk k's fold factors with attention_fold_factors, and a thread per (head, pair of
// dims) folds o_i and its own copy of l chunk by chunk, a batch of chunks' loads ahead.
#pragma once

#include "ops/cuda/common.cuh"
#include "order/attention.h"

namespace exactq::cuda_detail {

inline constexpr int kFoldTile = 32;   // chunks whose fold factors are made at once
inline constexpr int kFoldBatch = 8;   // chunks' o_c loaded before their folds

EXACTQ_HD float negative_infinity() { return float_from_bits(0xff800000u); }

// The fold's shared memory for up to group_heads heads: maxima, sums, the max before each chunk
// and the fold factors of one tile.
__host__ __device__ constexpr std::size_t fold_shared_bytes(int group_heads) {
  return std::size_t(group_heads) * kFoldTile * (3 * sizeof(float) + sizeof(order::FoldFactors));
}

// Folds the `chunks` records from first_record (head h's at first_record + h * slots, o_c at
// record * d) for nh heads of head dimension d, with BLOCK threads (PAIRS pairs of dims each) and
// GROUP_HEADS warps at least; stores head h's out row at out0 + h * d. `shared` holds
// fold_shared_bytes(GROUP_HEADS).
template <DType T, int PAIRS, int BLOCK, int GROUP_HEADS>
__device__ __forceinline__ void fold_chunks(const float2* stats, const float* o_c, std::size_t first_record, int slots,
                                            int chunks, int nh, int d, std::byte* shared, std::byte* out,
                                            std::size_t out0) {
  static_assert(GROUP_HEADS <= BLOCK / 32, "head h's running max is kept in warp h");
  float* maxima = reinterpret_cast<float*>(shared);
  float* sums = maxima + GROUP_HEADS * kFoldTile;
  float* before = sums + GROUP_HEADS * kFoldTile;  // the running max before each chunk of the tile
  auto* factors = reinterpret_cast<order::FoldFactors*>(before + GROUP_HEADS * kFoldTile);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, pairs = d / 2;
  float o[PAIRS][2], l[PAIRS];
#pragma unroll
  for (int u = 0; u < PAIRS; ++u) o[u][0] = o[u][1] = l[u] = 0.0f;
  float running = negative_infinity();  // head `warp`'s running max, in its lane 0
  for (int base = 0; base < chunks; base += kFoldTile) {
    const int n = chunks - base < kFoldTile ? chunks - base : kFoldTile;
    for (int x = tid; x < nh * kFoldTile; x += BLOCK) {
      const int h = x / kFoldTile, k = x % kFoldTile;
      if (k < n) {
        const float2 s = __ldcg(stats + first_record + std::size_t(h) * slots + base + k);
        maxima[h * kFoldTile + k] = s.x;
        sums[h * kFoldTile + k] = s.y;
      }
    }
    __syncthreads();
    if (warp < nh) {
      const int h = warp;
      if (lane == 0)
        for (int k = 0; k < n; ++k) {
          before[h * kFoldTile + k] = running;
          running = order::attention_max_step(running, maxima[h * kFoldTile + k]);
        }
      __syncwarp();
      if (lane < n) factors[h * kFoldTile + lane] = order::attention_fold_factors(before[h * kFoldTile + lane], maxima[h * kFoldTile + lane]);
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < PAIRS; ++u) {
      const int x = tid + u * BLOCK, h = x / pairs, p = x % pairs;
      if (x >= nh * pairs) break;
      const float2* oc = reinterpret_cast<const float2*>(o_c + (first_record + std::size_t(h) * slots + base) * std::size_t(d)) + p;
      for (int k0 = 0; k0 < n; k0 += kFoldBatch) {  // the batch's loads first, then its folds in c order
        float2 chunk[kFoldBatch];
#pragma unroll
        for (int b = 0; b < kFoldBatch; ++b)
          if (k0 + b < n) chunk[b] = __ldcg(oc + std::size_t(k0 + b) * std::size_t(pairs));
#pragma unroll
        for (int b = 0; b < kFoldBatch; ++b) {
          if (k0 + b >= n) break;
          const order::FoldFactors f = factors[h * kFoldTile + k0 + b];
          l[u] = order::attention_fold_value(l[u], sums[h * kFoldTile + k0 + b], f);
          o[u][0] = order::attention_fold_value(o[u][0], chunk[b].x, f);
          o[u][1] = order::attention_fold_value(o[u][1], chunk[b].y, f);
        }
      }
    }
    __syncthreads();  // the tile's factors are read: the next tile may overwrite them
  }
#pragma unroll
  for (int u = 0; u < PAIRS; ++u) {
    const int x = tid + u * BLOCK, h = x / pairs, p = x % pairs;
    if (x >= nh * pairs) break;
    const std::size_t at = out0 + std::size_t(h) * std::size_t(d) + 2 * std::size_t(p);
    store_f32(out, at, T, order::div(o[u][0], l[u]));
    store_f32(out, at + 1, T, order::div(o[u][1], l[u]));
  }
}

}  // namespace exactq::cuda_detail
