// The qmv-family kernel: qmv's order (docs/design.md §3) for V vectors per pass over the weights.
// qmv is V = 1 with one grid row per vector (every vector re-reads the weights: the narrow arm);
// qmv_streamed is V = 2..8 with one grid row per tile of V vectors. The arithmetic per row and
// vector is the same function of (x, W) for every V: each vector's bits are qmv's.
//
// Layout: 8 warps per block, ROWS output rows per warp (how rows are spread over warps does not
// enter any row's order). Lane l takes chunks l, l+32, ... of K in increasing order, exactly the
// CPU mirror's lane map. K is walked in tiles staged once per block in shared memory: the integers
// X of §3.1 and, per chunk, the facts every row shares (S and u).
//
// A warp's trip is one task of ROWS rows, in four steps:
//   1. load the task's first round (in flight while x is staged): load_round;
//   2. stage the activations: stage_tile (family_staging.cuh);
//   3. per round, load the next round and compute this one: chunk_step (family_dot.cuh);
//   4. finish the task: the split-K replay (add_parked_rounds), the butterfly and the store
//      (family_butterfly.cuh).
//
// Cost per weight and vector, which is what decides the speed at M = 1 (the H200 can issue
// about 4.6 instructions per weight at its read ceiling): at 4 bits, 8 codes take two ANDs and
// six dp4a, plus per 16 codes two 16-byte shared-memory reads split over ROWS rows, and per chunk
// a few integer adds, one conversion and qmv's fold. The f32 chain this replaced took two
// instructions per code and capped qmv near 66 % of the ceiling (docs/design.md §3.1).
#pragma once

#include "ops/cuda/common.cuh"
#include "ops/cuda/family_butterfly.cuh"
#include "ops/cuda/family_dot.cuh"
#include "ops/cuda/family_epilogue.cuh"
#include "ops/cuda/family_norm.cuh"
#include "ops/cuda/family_staging.cuh"
#include "ops/cuda/qmv_params.cuh"

namespace exactq::cuda_detail {

// ---- tuning: each value below moves loads and work, never a bit ----------------------------------
// Blocks per SM the registers are sized for: 2 (128 registers) up to V = 4, 1 from V = 5. V = 5
// at two blocks spilled 200 bytes; at one (211 registers, no spill) it is 1.05-1.5x faster. qmv's
// 2-row kernels (5, 6, 8 bits) at 3 blocks (80 registers) spilled 20-92 bytes, and 8-bit
// 28672x8192 took 79.8 us instead of 62.0. Blocks are kWarps = 8 warps: 4-bit qmv with 16
// (x staged once per SM instead of twice) measured within 5 %, faster on the down projections and
// slower on the gate/up ones.
template <int V>
inline constexpr int kFamilyBlocksPerSm = V >= 5 ? 1 : 2;

// qmv's L2 prefetch (prefetch_rows; on where the launcher sets p.l2_prefetch_rounds) is compiled
// in at 2 and 4 bits only: at 3, 5 and 6 bits it measured 1-2 % slower. Compiled in, even where it
// is off, it also fixes where ptxas puts the next round's loads: without it they sink below the
// current round's arithmetic, with nothing left to hide behind, and 4-bit qmv measured 8 % slower
// on 28672x8192 and 6 % on Gemma's LM head.
template <int BITS, int V>
inline constexpr bool kPrefetchCode = (BITS == 2 || BITS == 4) && V == 1;

// qmv with K in one tile: a trip's first round is loaded at the end of the trip before, ahead of
// the butterfly, the store and the next task's set-up, which otherwise run with nothing of the
// warp's in flight. At 4, 5 and 6 bits: 4-bit Llama head 73.0 -> 69.3 us and 28672x8192 35.1 ->
// 33.4 (H200), 5 and 6 bits 1-4 % faster with their spills gone. At 2 and 8 bits it measured
// 2-6 % slower, at 3 bits within the spread.
template <int BITS, int V>
inline constexpr bool kFamilyCarry = V == 1 && (BITS == 4 || BITS == 5 || BITS == 6);

// qmv's group-parameter loads ask L2 for the 128 bytes around each parameter
// (load_param_bits_fetch), where the next rounds' loads of the same row find them: Gemma's head
// 141.2 -> 140.3 us, Llama's head 73.8 -> 73.4, 28672x8192 34.6 -> 34.3, the 33-50 MB shapes
// unchanged. qmv_streamed (V > 1) keeps plain loads (0): it was not measured with the hint.
template <int V>
inline constexpr int kParamFetch = V == 1 ? 128 : 0;

// Rounds of a row: a chunk per lane per round.
EXACTQ_HD int family_rounds(std::int64_t k) { return int((k / kChunkValues + 31) / 32); }

// With a K split, the parked chunk values of one block of `warps` warps: per task, every round
// after the first part's, ROWS floats per lane.
inline std::size_t split_park_bytes(int split, int warps, int rows, std::int64_t k) {
  if (split <= 1) return 0;
  const std::int64_t rounds = family_rounds(k);
  const std::int64_t first_part = (rounds + split - 1) / split;
  return std::size_t(warps / split) * std::size_t(rounds - first_part) * rows * 32 * 4;
}

// ---- the steps of a task --------------------------------------------------------------------------
// Points a warp at task `task`'s ROWS rows: those from task * ROWS, or with NORM those task_row
// picks for the epilogue. Rows past N read row N-1 and are never written. Group parameters are
// indexed with 32 bits (the launcher checks N * K / group < 2^31); weights with a 64-bit row base.
template <int ROWS, bool NORM>
__device__ __forceinline__ void point_rows(const QmvParams& p, std::int64_t task, std::int64_t row_bytes,
                                           std::int64_t groups, const std::uint8_t* (&wrow)[ROWS], int (&prow)[ROWS]) {
  const std::int64_t row0 = task * ROWS;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    std::int64_t row = row0 + r;
    if constexpr (NORM) row = task_row<ROWS>(p, task, r);
    row = row < p.n ? row : p.n - 1;
    wrow[r] = p.packed + row * row_bytes;
    prow[r] = int(row * groups);
    // Opaque to the compiler, so it keeps the row bases in registers instead of recomputing the
    // clamp and the 64-bit product at every load: 705 instead of 774 instructions per two chunks
    // of 4 rows, 43.4 instead of 45.3 us on 28672x8192.
    asm("" : "+l"(wrow[r]), "+r"(prow[r]));
  }
}

// One round's loads into a register buffer: chunk chunk0 + c of K (counted from the row's start)
// of each row, and its group's parameters as raw bits. They are widened where they are used:
// widening right after the load would make the warp wait for it there.
template <int BITS, int V, int ROWS, int PARAM>
__device__ __forceinline__ void load_round(const QmvParams& p, const std::uint8_t* const (&wrow)[ROWS],
                                           const int (&prow)[ROWS], int group_shift, int chunk0, int c,
                                           std::uint32_t (&w)[ROWS][BITS], std::uint32_t (&sc)[ROWS],
                                           std::uint32_t (&bi)[ROWS]) {
  const int chunk = chunk0 + c;
  const int g = chunk >> group_shift;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    load_chunk<BITS>(wrow[r] + std::int64_t(chunk) * (4 * BITS), w[r]);
    sc[r] = load_param_bits_fetch<PARAM, kParamFetch<V>>(p.scales, prow[r] + g, p.dtype);
    bi[r] = load_param_bits_fetch<PARAM, kParamFetch<V>>(p.biases, prow[r] + g, p.dtype);
  }
}

// qmv's L2 prefetch: each row's bytes l2_prefetch_rounds rounds beyond the next round (the one in
// the register pipeline) are requested into L2, so that their load finds them nearer. Memory
// traffic only: no value depends on it.
template <int BITS, int ROWS>
__device__ __forceinline__ void prefetch_rows(const QmvParams& p, const std::uint8_t* const (&wrow)[ROWS], int chunk0,
                                              int c, int c_end) {
  const int ahead = c + 32 * (1 + p.l2_prefetch_rounds);
  if (p.l2_prefetch_rounds > 0 && ahead < c_end)
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(wrow[r] + std::int64_t(chunk0 + ahead) * (4 * BITS)));
}

// The split-K replay. Parts 1.. of a split task (consecutive warps of the block) have parked each
// chunk's folded value in shared memory; part 0 adds them into its lanes' chains in increasing
// round, exactly where it would have added them itself, so every chain, and so every bit, is the
// unsplit one. Called by every warp of the block (it synchronises the block where split > 1).
template <int V, int ROWS>
__device__ __forceinline__ void add_parked_rounds(float (&total)[ROWS][V], const float* park, const QmvParams& p,
                                                  int split, int part, bool active, int part_rounds,
                                                  int rounds_total, int lane) {
  if (split > 1) {  // the same for every warp of the block
    __syncthreads();  // the parked values are written
    if (part == 0 && active) {
      const int chunks = int(p.k / kChunkValues);
      for (int round = part_rounds; round < rounds_total && lane + 32 * round < chunks; ++round)
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
          total[r][0] = order::lane_add(total[r][0], park[((round - part_rounds) * ROWS + r) * 32 + lane]);
    }
    __syncthreads();  // read before the next trip parks again
  }
}

// ---- the kernel -------------------------------------------------------------------------------------
// NORM (V = 1): x is made from the residual by family_norm.cuh's norm_row, in shared memory ahead
// of the tile, and the rows go through p.epilogue (family_epilogue.cuh).
template <int BITS, int V, int ROWS, int PARAM, bool NORM = false>
__global__ void __launch_bounds__(kWarps * 32, kFamilyBlocksPerSm<V>) qmv_family_kernel(const QmvParams p) {
  static_assert(!NORM || (V == 1 && PARAM != kRuntimeDtype), "the norm is fused into qmv (V = 1) alone");
  extern __shared__ uint4 shared_raw[];
  const int tile_chunks = p.tile_values / kChunkValues, vector_stride = tile_chunks * kPieces<BITS>;
  std::byte* norm_rows = reinterpret_cast<std::byte*>(shared_raw);  // NORM: the row, then the weight row
  std::size_t norm_bytes = 0;
  if constexpr (NORM) norm_bytes = norm_shared_bytes<DType(PARAM)>(p.k);
  uint4* pieces = shared_raw + norm_bytes / 16;                                 // [V][vector_stride], interleaved
  float2* facts = reinterpret_cast<float2*>(pieces + V * vector_stride);       // [V][tile_chunks]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t row_bytes = p.k * BITS / 8;
  const std::int64_t groups = p.k / p.group;
  // Chunks per group is 1, 2 or 4: a shift, never a division in the inner loop.
  const int group_shift = p.group == 32 ? 0 : (p.group == 64 ? 1 : 2);
  const std::int64_t v0 = p.vector_offset + std::int64_t(blockIdx.y) * V;
  const int tiles = ceil_div(p.k, p.tile_values);
  // Work comes in tasks of ROWS rows. Task t goes to warp t % W, counting warps block-fastest
  // (warp w of block b is number w * gridDim.x + b), so the tasks left over after whole rounds
  // spread over all blocks and so over all SMs: an SM's share differs from the mean by at most
  // one task per warp. Every warp runs the same number of trips because staging synchronises
  // the block; a warp without a task in a trip only helps stage.
  //
  // With a K split (qmv, one K tile), the last trip is split: when it has at most W / split
  // tasks, `split` consecutive warps share each of its tasks, warp `part` computing the part-th
  // run of rounds, instead of a few warps taking whole tasks while the others wait (28672 rows
  // are 3.4 trips of 4-row tasks on 132 SMs; with fewer tasks than W / split that trip is the
  // only one). Part 0 adds its chunks into the lanes' chains as usual; the others park each
  // chunk's folded value in shared memory for add_parked_rounds.
  const std::int64_t tasks = (p.n + ROWS - 1) / ROWS;
  const std::int64_t slots = std::int64_t(gridDim.x) * kWarps;  // tasks per unsplit trip
  const int last_split = V == 1 ? p.split : 1;
  const std::int64_t whole_trips = last_split > 1 ? tasks / slots : (tasks + slots - 1) / slots;
  const std::int64_t trips = whole_trips + (tasks > whole_trips * slots ? 1 : 0);
  const int rounds_total = family_rounds(p.k);
  // The split trip's facts, computed once: a trip only selects them, so that its first loads
  // wait on no division (recomputed in every trip they cost 5 % on Gemma's head, 31 trips).
  const int last_part = warp % last_split, last_slot = warp / last_split;
  const int last_part_rounds = (rounds_total + last_split - 1) / last_split;
  const std::int64_t first_task = std::int64_t(warp) * gridDim.x + blockIdx.x;
  // The next launch on the stream may take the SM slots this grid frees; it waits for this grid
  // to finish before it touches x or y (wait_for_previous_grid below).
  let_next_grid_start();
  // The norm's weight row (K * sizeof(T), a multiple of 16), before the wait: no kernel of the step
  // writes weights.
  if constexpr (NORM) copy_row_async(norm_rows + norm_bytes / 2, p.norm_weight, std::int64_t(norm_bytes / 2));
  const std::uint8_t* wrow[ROWS];  // the task's rows (point_rows)
  int prow[ROWS];
  // The software pipeline's two register buffers, used alternately: the next round's loads are
  // issued before the current round is computed; chunks still go in increasing order. With
  // kFamilyCarry, a trip's first round may already be in wa, sa, ba, loaded by the trip before
// (`carried`).
  std::uint32_t wa[ROWS][BITS], wb[ROWS][BITS];
  std::uint32_t sa[ROWS], ba[ROWS], sb[ROWS], bb[ROWS];
  bool carried = false;

  for (std::int64_t trip = 0; trip < trips; ++trip) {
    const bool split_trip = trip == whole_trips;  // the same for every warp of the grid
    const int split = split_trip ? last_split : 1;
    const int part = split_trip ? last_part : 0;
    const int part_rounds = split_trip ? last_part_rounds : rounds_total;
    const std::int64_t task =
        split_trip ? whole_trips * slots + std::int64_t(last_slot) * gridDim.x + blockIdx.x : first_task + trip * slots;
    float* park = reinterpret_cast<float*>(facts + V * tile_chunks) +
                  std::size_t(last_slot) * std::size_t(rounds_total - last_part_rounds) * ROWS * 32;
    const bool active = task < tasks;
    const std::int64_t row0 = task * ROWS;
    if (!kFamilyCarry<BITS, V> || !carried) point_rows<ROWS, NORM>(p, task, row_bytes, groups, wrow, prow);
    float total[ROWS][V];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int v = 0; v < V; ++v) total[r][v] = 0.0f;

    for (int tile = 0; tile < tiles; ++tile) {
      const std::int64_t first = std::int64_t(tile) * p.tile_values;
      const int count = int(p.k - first < p.tile_values ? p.k - first : p.tile_values);
      const int chunks = count / kChunkValues;
      const int chunk0 = int(first / kChunkValues);
      // This warp's run of chunks: all of them without a split (one tile then, if split > 1).
      const int c_end = chunks < 32 * part_rounds * (part + 1) ? chunks : 32 * part_rounds * (part + 1);
      int c = active ? lane + 32 * part_rounds * part : c_end;
      // 1. The first round, in flight while the tile is staged.
      if (c < c_end && !(kFamilyCarry<BITS, V> && carried))
        load_round<BITS, V, ROWS, PARAM>(p, wrow, prow, group_shift, chunk0, c, wa, sa, ba);
      // 2. The activations.
      if (tiles > 1 || trip == 0) {
        if (trip == 0 && tile == 0) {
          wait_for_previous_grid();  // x may be the previous kernel's output
          if constexpr (NORM) norm_row<DType(PARAM)>(p, v0, norm_rows, norm_rows + norm_bytes / 2);
        }
        if constexpr (NORM)
          stage_tile<BITS, V, PARAM>(pieces, facts, p, norm_rows, 0, first, count);
        else
          stage_tile<BITS, V, PARAM>(pieces, facts, p, p.x, v0, first, count);
      }
      // 3. The rounds. compute_round: the chunk dot of round c for every row, added into the
      // lanes' chains, or parked for part 0 by the later parts of a split task.
      auto compute_round = [&](const std::uint32_t (&w)[ROWS][BITS], const std::uint32_t (&sc_bits)[ROWS],
                               const std::uint32_t (&bi_bits)[ROWS], int c) {
        float sc[ROWS], bi[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
          sc[r] = param_value<PARAM>(sc_bits[r], p.dtype), bi[r] = param_value<PARAM>(bi_bits[r], p.dtype);
        if (V > 1 || part == 0) {
          chunk_step<BITS, V, ROWS>(w, sc, bi, pieces, vector_stride, facts, tile_chunks, c, total);
        } else if constexpr (V == 1) {
          float folded[ROWS][V];
          chunk_step<BITS, V, ROWS, true>(w, sc, bi, pieces, vector_stride, facts, tile_chunks, c, folded);
#pragma unroll
          for (int r = 0; r < ROWS; ++r) park[((c / 32 - part_rounds) * ROWS + r) * 32 + lane] = folded[r][0];
        }
      };
      while (c < c_end) {
        if (c + 32 < c_end) load_round<BITS, V, ROWS, PARAM>(p, wrow, prow, group_shift, chunk0, c + 32, wb, sb, bb);
        if constexpr (kPrefetchCode<BITS, V>) prefetch_rows<BITS, ROWS>(p, wrow, chunk0, c, c_end);
        compute_round(wa, sa, ba, c);
        c += 32;
        if (c >= c_end) break;
        if (c + 32 < c_end) load_round<BITS, V, ROWS, PARAM>(p, wrow, prow, group_shift, chunk0, c + 32, wa, sa, ba);
        if constexpr (kPrefetchCode<BITS, V>) prefetch_rows<BITS, ROWS>(p, wrow, chunk0, c, c_end);
        compute_round(wb, sb, bb, c);
        c += 32;
      }
    }
    // 4. The end of the task: the split's parts in order, then the butterfly and the store. In
    // between, with kFamilyCarry, the next trip's first round is loaded: the buffers are free (the
    // last round is computed). Only for an unsplit next trip with K in one tile, whose lanes
    // start at chunk `lane`.
    add_parked_rounds<V, ROWS>(total, park, p, split, part, active, part_rounds, rounds_total, lane);
    if constexpr (kFamilyCarry<BITS, V>) {
      carried = tiles == 1 && trip + 1 < trips && trip + 1 != whole_trips;
      if (carried) {
        const std::int64_t next = task + slots;
        point_rows<ROWS, NORM>(p, next, row_bytes, groups, wrow, prow);
        if (next < tasks && lane < int(p.k / kChunkValues))
          load_round<BITS, V, ROWS, PARAM>(p, wrow, prow, group_shift, 0, lane, wa, sa, ba);
      }
    }
    if constexpr (kScatterShift<ROWS * V> >= 0) {
      // The (row, vector) totals gathered here, r * V + v, not in scatter_and_store: gathered
      // there, the kernel compiles to other machine code.
      float held[ROWS * V];
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int v = 0; v < V; ++v) held[r * V + v] = total[r][v];
      if constexpr (NORM) {
        if (p.epilogue != kStore) {
          epilogue_store<ROWS>(held, p, v0, task, lane, active, part);
          continue;
        }
      }
      scatter_and_store<V, ROWS>(held, p, v0, row0, lane, active, part);
    } else {
      reduce_and_store<V, ROWS>(total, p, v0, row0, lane, active, part);
    }
  }
}

}  // namespace exactq::cuda_detail
