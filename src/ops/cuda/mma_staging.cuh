// qmv_mma's x staging, shared by both kernels: the pass's activations as the mma's B fragments
// and the group sums S_g, in shared memory (MmaTileLayout), and where a lane reads them.
#pragma once

#include "ops/cuda/mma_common.cuh"

namespace exactq::cuda_detail::mma {

// Stages x for vectors [v0, v0 + count) of this pass, step `step` of every K segment: per part q,
// rounds [begin_q + step, min(begin_q + step + sub_rounds, end_q)) of K go to the part's sub-tile
// (its chunks start at q * sub_rounds rounds into the tile). In MmaTileLayout's order: per vector,
// chunk and lane t the 8 values 8t..8t+7 as the pairs (0,4), (1,5), (2,6), (3,7) (raw 16-bit
// patterns, no arithmetic), then per vector and group the f32 sum S_g in increasing k, read back
// from shared memory. With one part (`parts` a compile-time 1 where the kernel has no split) this
// is K values [step * round_values, ...) into the tile. Ends with the block synchronised.
__device__ __forceinline__ void stage_mma_x(uint4* xs, float* sums, const MmaTileLayout& layout, const MmaParams& p,
                                            std::int64_t v0, int count, int parts, int rounds_total, int round_values,
                                            int sub_rounds, int step) {
  const int sub_values = sub_rounds * round_values;
  // The K values part q stages: [first, first + values) of x, placed from q * sub_values on.
  auto segment = [&](int q, std::int64_t& first, int& values) {
    const int begin = order::mma_segment_begin(q, parts, rounds_total) + step;
    const int end = order::mma_segment_begin(q + 1, parts, rounds_total);
    first = std::int64_t(begin) * round_values;
    values = (end - begin < sub_rounds ? end - begin : sub_rounds) * round_values;  // <= 0: nothing left
  };
  // A thread takes a 16-byte piece (chunk c, lane t) and reads it for up to 4 vectors before
  // it writes any, so several L2 reads are in flight (one at a time, restaging at M = 16 waited
  // a full latency per piece: 19 % of the kernel's stall samples).
  const int sub_pieces = sub_values / 8;  // 16-byte pieces of one vector's sub-tile
  for (int e = threadIdx.x; e < parts * sub_pieces; e += blockDim.x) {
    const int q = e / sub_pieces, piece = e - q * sub_pieces;
    std::int64_t first;
    int values;
    segment(q, first, values);
    if (8 * piece >= values) continue;
    const int c = (q * sub_values + 8 * piece) >> 5, t = piece & 3;
    for (int vb = 0; vb < count; vb += 4) {
      uint4 raw[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (vb + u < count)
          raw[u] = *reinterpret_cast<const uint4*>(static_cast<const std::uint16_t*>(p.x) +
                                                   ((v0 + vb + u) * p.k + first + 8 * piece));
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (vb + u < count) {
          // raw.x = (x0, x1), raw.y = (x2, x3), raw.z = (x4, x5), raw.w = (x6, x7)
          uint4 out;
          out.x = __byte_perm(raw[u].x, raw[u].z, 0x5410);  // (x0, x4)
          out.y = __byte_perm(raw[u].x, raw[u].z, 0x7632);  // (x1, x5)
          out.z = __byte_perm(raw[u].y, raw[u].w, 0x5410);  // (x2, x6)
          out.w = __byte_perm(raw[u].y, raw[u].w, 0x7632);  // (x3, x7)
          xs[(vb + u) * layout.x_stride + 4 * c + t] = out;
        }
    }
  }
  __syncthreads();
  const int sub_groups = sub_values / p.group, chunks_per_group = p.group / 32;
  // Sums for the pass's n-tiles' columns: vectors past `count` get 0 (their columns are never
  // stored, and an mma column depends only on its own column of B).
  const int columns = count > 8 ? 16 : 8;
  for (int e = threadIdx.x; e < columns * parts * sub_groups; e += blockDim.x) {
    const int v = e / (parts * sub_groups), qg = e - v * (parts * sub_groups);
    const int q = qg / sub_groups, gi = qg - q * sub_groups;
    std::int64_t first;
    int values;
    segment(q, first, values);
    if (gi * p.group >= values) continue;
    const int g = q * sub_groups + gi;  // the group's place in the tile
    float s = 0.0f;
    if (v < count)
      for (int cc = 0; cc < chunks_per_group; ++cc)
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const uint4 u = xs[v * layout.x_stride + 4 * (g * chunks_per_group + cc) + t];
          const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
          for (int j = 0; j < 8; ++j) s = __fadd_rn(s, widen_half(j < 4 ? (w[j] & 0xffffu) : (w[j - 4] >> 16), p.dtype));
        }
    sums[g * MmaTileLayout::kSumVectors + v] = s;
  }
  __syncthreads();
}

// The x tile for `count` vectors: per part, sub_rounds rounds of K (the most that fit in `budget`
// bytes, at most the longest segment), so tile_values = k_parts * sub_rounds * round_values.
template <int GROUP>
int mma_sub_rounds(std::int64_t k, int round_values, int k_parts, int count, std::size_t budget) {
  const int rounds_total = int(k / round_values), rounds_max = (rounds_total + k_parts - 1) / k_parts;
  int sub = 1;
  while (sub < rounds_max && MmaTileLayout(k_parts * (sub + 1) * round_values, GROUP).bytes(count) <= budget) ++sub;
  return sub;
}

// Where lane (g, t) reads B (its vector g of each n-tile, clamped to the pass's last vector so
// that the loops have no bounds guards: a column past `count` repeats a real vector and is never
// stored, and an mma column depends only on its own column of B, so every other column keeps
// its bits), and the group sums of its output columns (vectors 2t, 2t + 1 of n-tile nt: the
// 8-byte word at fold + group * kSumVectors + 8 nt; `group_sums`).
template <int NT>
struct MmaLaneReads {
  const uint4* b[NT];
  const float* fold;
  __device__ __forceinline__ MmaLaneReads(const uint4* xs, const float* sums, const MmaTileLayout& layout, int count,
                                          int g, int t)
      : fold(sums + 2 * t) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) b[nt] = xs + min(nt * 8 + g, count - 1) * layout.x_stride + t;
  }
};

// The sums S_g of a lane's two output columns of n-tile nt, for the tile's group `group`.
__device__ __forceinline__ float2 group_sums(const float* fold, int group, int nt) {
  return *reinterpret_cast<const float2*>(fold + group * MmaTileLayout::kSumVectors + 8 * nt);
}

}  // namespace exactq::cuda_detail::mma
