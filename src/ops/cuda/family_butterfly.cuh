// The end of a qmv-family task: the butterfly that sums each (row, vector)'s 32 lane chains in the
// order of docs/design.md §3, and the store of the totals.
#pragma once

#include "ops/cuda/qmv_params.cuh"
#include "ops/cuda/common.cuh"

namespace exactq::cuda_detail {

// qmv's butterfly for a lane's COUNT (row, vector) totals at once, with the same adds: the first
// log2(COUNT) steps send half of the totals a lane still holds to its partner and keep the other
// half, so each shuffle and add does work that the plain butterfly (COUNT shuffles and adds per
// step) would have done in the partner lane anyway: COUNT - 1 + 5 - log2(COUNT) shuffles
// instead of 5 * COUNT (4 rows: 6 instead of 20). Lane l's add for total i at mask m is
// add(R[l], R[l ^ m]), as in order::butterfly_step; add commutes, so every value is the one the
// plain butterfly computes at that lane, and so are the bits. Measured against the plain
// butterfly at 4 bits: qmv up to 3 % faster and nowhere slower; qmv_streamed at M = 2, 4, 8 2-3 %
// faster on 28672x8192 and 5-12 % on Gemma's head and gate/up projections.
template <int COUNT, int STEP = 0>
__device__ __forceinline__ float butterfly_scatter(const float (&held)[COUNT], int lane) {
  if constexpr (COUNT == 1) {
    float t = held[0];
#pragma unroll
    for (int step = STEP; step < order::kButterflySteps; ++step)
      t = order::butterfly_step(t, __shfl_xor_sync(0xffffffffu, t, order::butterfly_mask(step)));
    return t;
  } else {
    constexpr int mask = order::butterfly_mask(STEP), half = COUNT / 2;
    static_assert(COUNT % 2 == 0 && STEP < order::kButterflySteps, "a power of two, at most 32 rows");
    const bool upper = (lane & mask) != 0;
    float kept[half];
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float send = upper ? held[i] : held[half + i];
      const float keep = upper ? held[half + i] : held[i];
      kept[i] = order::butterfly_step(keep, __shfl_xor_sync(0xffffffffu, send, mask));
    }
    return butterfly_scatter<half, STEP + 1>(kept, lane);
  }
}
// The lanes that hold total i after butterfly_scatter<COUNT>: lane >> kScatterShift<COUNT> == i;
// -1 where COUNT is not a power of two (qmv_streamed at V = 3, 5, 6, 7: the plain butterfly).
template <int COUNT>
inline constexpr int kScatterShift = COUNT == 2 ? 4 : COUNT == 4 ? 3 : COUNT == 8 ? 2 : COUNT == 16 ? 1 : COUNT == 32 ? 0 : -1;

// The butterfly over a task's ROWS x V totals, held[r * V + v] for row r and vector v, where
// ROWS * V is a power of two (butterfly_scatter), then the store of those of rows below N by the
// lanes that hold them, where the warp has a task (`active`) and owns its chains (part 0).
template <int V, int ROWS>
__device__ __forceinline__ void scatter_and_store(const float (&held)[ROWS * V], const QmvParams& p, std::int64_t v0,
                                                  std::int64_t row0, int lane, bool active, int part) {
  constexpr int kHeld = ROWS * V;
  const float mine = butterfly_scatter<kHeld>(held, lane);  // total lane >> kScatterShift
  const int i = lane >> kScatterShift<kHeld>, r = i / V, v = i % V;
  if (active && part == 0 && (lane & ((1 << kScatterShift<kHeld>) - 1)) == 0 && row0 + r < p.n)
    store_f32(p.y, std::size_t((v0 + v) * p.n + row0 + r), p.dtype, mine);
}

// The same with the plain butterfly per total, for the other ROWS * V (qmv_streamed at V = 3, 5,
// 6, 7); lane 0 stores.
template <int V, int ROWS>
__device__ __forceinline__ void reduce_and_store(float (&total)[ROWS][V], const QmvParams& p, std::int64_t v0,
                                                 std::int64_t row0, int lane, bool active, int part) {
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const float own[1] = {total[r][v]};
      total[r][v] = butterfly_scatter<1>(own, lane);  // the plain butterfly
    }
  if (active && part == 0 && lane == 0) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
      if (row0 + r < p.n)
#pragma unroll
        for (int v = 0; v < V; ++v) store_f32(p.y, std::size_t((v0 + v) * p.n + row0 + r), p.dtype, total[r][v]);
  }
}

}  // namespace exactq::cuda_detail
