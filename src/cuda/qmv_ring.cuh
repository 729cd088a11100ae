// qmv at M = 1 with a deep load pipeline: the same order as qmv_family_kernel at V = 1 (each lane
// takes chunks l, l+32, ... in increasing order, docs/design.md §3), with the weights and group
// parameters of the next kRingStages - 1 rounds in flight through a per-warp cp.async ring in
// shared memory instead of one round in registers.
//
// Why: with one round in flight a warp waits a full memory latency per round, so a short task
// (K = 3840 is 4 rounds) costs about rounds x latency, and at 16 warps per SM the bytes in flight
// (~32 KB) fall short of what the H200 needs to reach its read ceiling. Bytes in a shared-memory
// ring cost no registers. The ring also runs across a warp's tasks: the first rounds of its next
// task are loaded while it finishes the current one.
//
// Served: 4-bit codes (chunks of 16 bytes, copied whole; 8-bit would need 1.8x the ring, and
// already runs at ~88 % of the ceiling), f16/bf16 parameters, 4-byte aligned, with an even number
// of groups per row (so their 4-byte copies never straddle rows). Other formats take
// qmv_family_kernel.
#pragma once

#include "cuda/qmv_family.cuh"

namespace exactq::cuda_detail {

#ifndef EXACTQ_QMV_RING_STAGES  // a -D knob for tuning
#define EXACTQ_QMV_RING_STAGES 4
#endif
inline constexpr int kRingStages = EXACTQ_QMV_RING_STAGES;
inline constexpr int kRingRows = 4;
inline constexpr int kRingMaxGroupsPerRound = 32;  // group 32: one group per chunk

// Bytes of one stage of one warp: the rows' chunks, lane-major, then per row the round's scales
// and biases (2 bytes each, padded to the group-32 count).
template <int BITS>
inline constexpr int kRingStageBytes = kRingRows * 32 * 4 * BITS + kRingRows * 2 * kRingMaxGroupsPerRound * 2;

inline bool ring_serves(const QuantizedMatrixView& w) {
  const auto aligned4 = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 4 == 0; };
  return w.bits == 4 && w.dtype != DType::f32 && (w.k / w.group) % 2 == 0 && aligned4(w.scales.data()) &&
         aligned4(w.biases.data());
}

// The x tile: what shared memory leaves beside the rings at 2 blocks per SM.
inline int ring_tile(std::int64_t k) { return k_tile(k, 1, 1.0 / 8, 32 * 1024); }

template <int BITS>
inline std::size_t ring_shared_bytes(int tile_values) {
  return family_shared_bytes(1, tile_values) + std::size_t(kWarps) * kRingStages * kRingStageBytes<BITS>;
}

// The loads of one warp, a round at a time, in the order the warp will consume them: round R of
// its task in trip T, then round R + 1, ..., then round 0 of trip T + 1.
template <int BITS>
struct RingLoader {
  const std::uint8_t* packed;
  const unsigned short* scales;
  const unsigned short* biases;
  std::int64_t n, k, row_bytes, groups, tasks, warps_total, first_task;
  int rounds, trips, group_shift;
  int trip = 0, round = 0;
  bool active = false;
  const std::uint8_t* wrow[kRingRows];
  int prow[kRingRows];

  __device__ __forceinline__ void set_trip(int t) {
    trip = t;
    round = 0;
    const std::int64_t task = first_task + std::int64_t(t) * warps_total;
    active = t < trips && task < tasks;
#pragma unroll
    for (int r = 0; r < kRingRows; ++r) {
      const std::int64_t row0 = task * kRingRows + r;
      const std::int64_t row = row0 < n ? row0 : n - 1;
      wrow[r] = packed + row * row_bytes;
      prow[r] = int(row * groups);
    }
  }

  // Issues the copies of the current round into `stage` (always one commit group, maybe empty),
  // then moves to the next round.
  __device__ __forceinline__ void issue(unsigned char* stage, int lane) {
    if (active) {
      const int chunk = round * 32 + lane;
      if (std::int64_t(chunk) * 32 < k) {
#pragma unroll
        for (int r = 0; r < kRingRows; ++r)
#pragma unroll
          for (int h = 0; h < BITS / 4; ++h)
            copy16_async(stage + (r * 32 + lane) * (4 * BITS) + 16 * h, wrow[r] + std::int64_t(chunk) * (4 * BITS) + 16 * h);
      }
      // Parameters: per row, the round's groups of scales, then of biases, as 4-byte words
      // (pairs of groups; the first group of a round is even, and so is every row's count).
      // Word w of a round: row w >> (5 - shift), then the row's scales words, then its biases
      // words (16 >> shift each).
      const int g0 = (round * 32) >> group_shift;
      const int row_shift = 5 - group_shift, array_shift = 4 - group_shift;
      unsigned char* params = stage + kRingRows * 32 * 4 * BITS;
      for (int w = lane; w < kRingRows << row_shift; w += 32) {
        const int r = w >> row_shift, j = w & ((1 << row_shift) - 1);
        const bool is_bias = (j >> array_shift) != 0;
        const int g = g0 + 2 * (j & ((1 << array_shift) - 1));
        if (g < groups) {
          int row_first = prow[0];  // prow[r] by selects: an indexed register array would go to local memory
#pragma unroll
          for (int i = 1; i < kRingRows; ++i) row_first = r == i ? prow[i] : row_first;
          const unsigned short* base = is_bias ? biases : scales;
          copy4_async(params + (r * 2 * kRingMaxGroupsPerRound + (is_bias ? kRingMaxGroupsPerRound : 0) + (g - g0)) * 2,
                      base + row_first + g);
        }
      }
    }
    commit_async_copies();
    if (++round == rounds) set_trip(trip + 1);
  }
};

template <int BITS, int PARAM>
__global__ void __launch_bounds__(kThreads, 2) qmv_ring_kernel(const QmvParams p) {
  extern __shared__ float4 shared_raw[];
  float4* lifted = shared_raw;
  float4* facts = lifted + p.tile_values / 4;
  const int tile_chunks = p.tile_values / kChunkValues;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned char* ring = reinterpret_cast<unsigned char*>(facts + tile_chunks) +
                        std::size_t(warp) * kRingStages * kRingStageBytes<BITS>;
  const std::int64_t chunks = p.k / kChunkValues;
  const int rounds = int((chunks + 31) / 32);
  const int rounds_per_tile = p.tile_values / (32 * kChunkValues);
  const bool restage = p.k > p.tile_values;  // more than one tile: x is staged again per tile
  const int group_shift = p.group == 32 ? 0 : (p.group == 64 ? 1 : 2);
  const std::int64_t v0 = p.vector_offset + blockIdx.y;  // qmv at M > 1: a grid row per vector

  // Tasks of 4 rows, spread block-fastest over the warps as in qmv_family_kernel.
  const std::int64_t tasks = (p.n + kRingRows - 1) / kRingRows;
  const std::int64_t warps_total = std::int64_t(gridDim.x) * kWarps;
  const int trips = int((tasks + warps_total - 1) / warps_total);
  const std::int64_t my_first_task = std::int64_t(warp) * gridDim.x + blockIdx.x;
  let_next_grid_start();

  RingLoader<BITS> loader{p.packed, static_cast<const unsigned short*>(p.scales),
                          static_cast<const unsigned short*>(p.biases), p.n, p.k, p.k * BITS / 8, p.k / p.group,
                          tasks, warps_total, my_first_task, rounds, trips, group_shift};
  loader.set_trip(0);
  // The prologue: weights only, so it may run before the previous kernel has finished.
#pragma unroll
  for (int s = 0; s < kRingStages - 1; ++s) loader.issue(ring + s * kRingStageBytes<BITS>, lane);

  int stage = 0;
  for (int trip = 0; trip < trips; ++trip) {
    const std::int64_t task = my_first_task + std::int64_t(trip) * warps_total;
    const bool active = task < tasks;
    const std::int64_t row0 = task * kRingRows;
    float total[kRingRows][1];
#pragma unroll
    for (int r = 0; r < kRingRows; ++r) total[r][0] = 0.0f;

    for (int round = 0; round < rounds; ++round) {
      if (round % rounds_per_tile == 0 && (restage || trip == 0)) {
        if (trip == 0 && round == 0) wait_for_previous_grid();  // x may be the previous kernel's output
        __syncthreads();  // everyone is done with the previous tile
        const std::int64_t first = std::int64_t(round) * 32 * kChunkValues;
        const int count = int(p.k - first < p.tile_values ? p.k - first : p.tile_values);
        stage_lifted<BITS, 1>(lifted, facts, p.tile_values, p, v0, first, count);
        __syncthreads();
      }
      wait_async_copies<kRingStages - 2>();
      __syncwarp();  // the parameters were copied by other lanes
      const unsigned char* s = ring + stage * kRingStageBytes<BITS>;
      const int chunk = round * 32 + lane;
      if (active && chunk < chunks) {
        std::uint32_t w[kRingRows][BITS];
        float scale[kRingRows], bias[kRingRows];
        const int gi = lane >> group_shift;  // this lane's group within the round
        const auto* params = reinterpret_cast<const unsigned short*>(s + kRingRows * 32 * 4 * BITS);
#pragma unroll
        for (int r = 0; r < kRingRows; ++r) {
#pragma unroll
          for (int h = 0; h < BITS / 4; ++h) {
            const uint4 v = *reinterpret_cast<const uint4*>(s + (r * 32 + lane) * (4 * BITS) + 16 * h);
            w[r][4 * h] = v.x, w[r][4 * h + 1] = v.y, w[r][4 * h + 2] = v.z, w[r][4 * h + 3] = v.w;
          }
          const DType t = DType(PARAM);
          scale[r] = widen_half(params[r * 2 * kRingMaxGroupsPerRound + gi], t);
          bias[r] = widen_half(params[r * 2 * kRingMaxGroupsPerRound + kRingMaxGroupsPerRound + gi], t);
        }
        const int c = chunk - (round / rounds_per_tile) * rounds_per_tile * 32;  // chunk within the tile
        chunk_step<BITS, 1, kRingRows>(w, scale, bias, lifted, 0, facts, 0, c, total);
      }
      // The stage consumed in the previous round is free (every lane passed the __syncwarp).
      loader.issue(ring + ((stage + kRingStages - 1) % kRingStages) * kRingStageBytes<BITS>, lane);
      stage = stage + 1 == kRingStages ? 0 : stage + 1;
    }

#pragma unroll
    for (int r = 0; r < kRingRows; ++r) {
      float t = total[r][0];
#pragma unroll
      for (int step = 0; step < order::kButterflySteps; ++step)
        t = order::butterfly_step(t, __shfl_xor_sync(0xffffffffu, t, order::butterfly_mask(step)));
      total[r][0] = t;
    }
    if (active && lane == 0) {
#pragma unroll
      for (int r = 0; r < kRingRows; ++r)
        if (row0 + r < p.n) store_f32(p.y, std::size_t(v0 * p.n + row0 + r), p.dtype, total[r][0]);
    }
  }
  wait_async_copies<0>();  // nothing left in flight into shared memory at exit
}

}  // namespace exactq::cuda_detail
