// qmv_mma for a matrix in the fragment layout (exactq/mma_layout.h): the schedule, the arithmetic
// and so the bits of qmv_mma.cu, with the weights loaded straight into registers.
//
// Why a second kernel: qmv_mma.cu copies 16 rows x 128 bytes per warp and stage through a
// shared-memory ring, and every such ring measured stops near 80 % of a streaming read, with or
// without the arithmetic; register loads stream at 90-100 %. In the fragment layout lane (g, t)'s
// 16-byte load is exactly the words it feeds the mma (rows g and g + 8), and a warp's load
// instruction reads 512 contiguous bytes.
//
// Per warp and round (8 chunks, 32 * bits bytes per row, at 2-6 bits; 4 chunks, 128 bytes, at 8;
// whole groups at every format), a lane loads `bits` x 16 B of codes at 2-6 bits, 4 x 16 B at 8
// (rows g and g + 8), and 4 * groups-per-round bytes each of scales and biases, kDepth - 1 rounds
// ahead (a ring of register buffers), and widens the parameters where it folds them (a widen at
// the load would wait for the load). Everything after the load (conversion, mma k-steps,
// per-group fold in increasing group order) is qmv_mma.cu's, word for word, so the output bytes
// are identical (tests/ops/cuda/test_qmv_mma_cuda.cpp checks it).
//
// The kernel and its per-width launcher live in this header; each width is compiled in one
// translation unit (qmv_mma_fragments.cu: 4 and 8 bits and the entry points;
// qmv_mma_fragments_2_3.cu, qmv_mma_fragments_5_6.cu), so that they build in parallel.
#pragma once

#include "ops/cuda/launch.h"
#include "ops/cuda/mma_codes.cuh"
#include "ops/cuda/mma_common.cuh"
#include "ops/cuda/mma_staging.cuh"
#include "exactq/mma_layout.h"

namespace exactq::cuda_detail::fragments {

using namespace mma;

// Register buffers per lane: kDepth - 1 rounds (2 KB per warp each) are in flight while one is
// computed. 2: at 128 registers it spills 8-108 B in 7 of the 24 instantiations (group 32, or two
// n-tiles), 3 spills in most of them; with 64-byte rounds depth 2 was also the fastest.
inline constexpr int kDepth = 2;

// Few tasks (a down or q/kv/o projection: at most kFewTasksPerSm 16-row tasks per SM) leave most
// warps of a 16-warp block idle, and a lone warp with one 2 KB round in flight is latency-bound.
// Such matrices get blocks of 8 warps, so that up to 255 registers per lane hold a deeper ring
// of kFewTaskDepth rounds. The choice depends on N and the SM count only; the arithmetic per lane
// is the same, so the bits are too.
inline constexpr int kFewTaskDepth = 5;
inline constexpr int kFewTaskWarps = 8;
inline constexpr int kFewTasksPerSm = 4;
// A round's registers, codes and parameters: 4 * pieces + 2 * groups per round. The deep ring is
// cut where kFewTaskDepth rounds of them would pass 160 registers (5 and 6 bits, group 32: 36-40
// per round; at 5 deep ptxas spilled up to 236 bytes), which leaves 4 and 8 bits at kFewTaskDepth.
template <int BITS, int GROUP>
inline constexpr int few_task_depth() {
  constexpr int per_round = 4 * mma_layout::lane_pieces(BITS, GROUP) + 2 * mma_layout::groups_per_round(BITS, GROUP);
  return kFewTaskDepth * per_round <= 160 ? kFewTaskDepth : 160 / per_round;
}

template <int BITS, int GROUP>
struct FragmentRound {
  static constexpr int kRowBytes = mma_layout::round_row_bytes(BITS, GROUP);
  static constexpr int kPieces = mma_layout::lane_pieces(BITS, GROUP);  // 16-byte loads per lane (both halves)
  static constexpr int kChunks = kRowBytes / (4 * BITS);              // 32-code chunks per round
  static constexpr int kGroups = mma_layout::groups_per_round(BITS, GROUP);
  static constexpr int kChunksPerGroup = GROUP / 32;
  static constexpr int kUint4s = kMmaRows * kRowBytes / 16;           // a task's round, in uint4
  static_assert(kGroups >= 1 && kChunks == kGroups * kChunksPerGroup, "a round holds whole groups");
};

// A lane's registers for one round: its pieces of codes, rows g and g + 8 (exactq/mma_layout.h
// says which word holds which); per group of the round one word of scales and one of biases,
// each (row g, row g + 8) in the low and high halves, raw.
template <int BITS, int GROUP>
struct RoundRegisters {
  using R = FragmentRound<BITS, GROUP>;
  uint4 pieces[R::kPieces];
  std::uint32_t scales[R::kGroups], biases[R::kGroups];
};

template <int N>
__device__ __forceinline__ void load_words(const std::uint32_t* at, std::uint32_t (&w)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const uint4 v = __ldcs(reinterpret_cast<const uint4*>(at) + i / 4);
      w[i] = v.x, w[i + 1] = v.y, w[i + 2] = v.z, w[i + 3] = v.w;
    }
  } else if constexpr (N == 2) {
    const uint2 v = __ldcs(reinterpret_cast<const uint2*>(at));
    w[0] = v.x, w[1] = v.y;
  } else {
    static_assert(N == 1);
    w[0] = __ldcs(at);
  }
}

// SPLIT: the matrix's K is cut into p.k_parts > 1 segments (src/order/qmv_mma.h); without it the
// kernel is built for one segment, and none of the split's bookkeeping takes registers.
template <int BITS, bool BF16, int NT, int GROUP, int WARPS = kMmaWarps, int DEPTH = kDepth, bool SPLIT = false>
__global__ void __launch_bounds__(WARPS * 32, WARPS == kMmaWarps ? kMmaBlocksPerSm : 1)
    qmv_mma_fragments_kernel(const MmaParams p) {
  using R = FragmentRound<BITS, GROUP>;
  constexpr int kCpg = R::kChunksPerGroup;
  constexpr DType kType = BF16 ? DType::bf16 : DType::f16;
  extern __shared__ uint4 mma_shared[];
  EXACTQ_MMA_PASS_PROLOGUE(p, GROUP, mma_shared);
  const int rounds_total = int(p.k / (32 * R::kChunks));  // K is a multiple of the round (the launcher checks)
  const std::int64_t tasks = (p.n + kMmaRows - 1) / kMmaRows;
  const int parts = SPLIT ? p.k_parts : 1;
  const MmaWarpWork work(p, parts, warp, rounds_total, R::kChunks, tasks);
  float* part_totals = reinterpret_cast<float*>(reinterpret_cast<std::uint8_t*>(xs) + layout.bytes(count));
  const MmaLaneReads<NT> lane_reads(xs, sums, layout, count, g, t);
  const auto& b_lane = lane_reads.b;
  const auto& fold_lane = lane_reads.fold;

  for (std::int64_t trip = 0; trip < work.trips; ++trip) {
    const std::int64_t task = work.first_task + trip * work.task_stride;
    const bool active = warp < p.task_warps && task < tasks;
    // The segment's first round; the fragment layout pads N to whole tasks, so no row is clamped.
    // Rounds are loaded in increasing order, so a lane's next codes (in uint4s) and parameters (in
    // 32-bit words of two 16-bit values) are running 32-bit offsets from the arrays' bases (the
    // launcher checks they fit): two adds per round, where addresses recomputed from the task
    // cost about 35 integer instructions.
    const std::int64_t round0 = task * rounds_total + work.round_begin;
    std::uint32_t code_next = std::uint32_t(round0 * R::kUint4s) + lane;
    std::uint32_t param_next = std::uint32_t((round0 * 8 + g) * R::kGroups);
    auto load = [&](RoundRegisters<BITS, GROUP>& r) {
      const uint4* at = reinterpret_cast<const uint4*>(p.packed) + code_next;
      // 4 and 8 bits issue rows g's and g + 8's pieces alternately (the order they were measured
      // fastest with); the planes' pieces go in order.
#pragma unroll
      for (int i = 0; i < R::kPieces; ++i) {
        const int piece = BITS == 4 || BITS == 8 ? (i % 2) * (R::kPieces / 2) + i / 2 : i;
        r.pieces[piece] = __ldcs(at + piece * 32);
      }
      load_words<R::kGroups>(static_cast<const std::uint32_t*>(p.scales) + param_next, r.scales);
      load_words<R::kGroups>(static_cast<const std::uint32_t*>(p.biases) + param_next, r.biases);
      code_next += R::kUint4s;
      param_next += 8 * R::kGroups;
    };
    float total[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) total[j][i] = 0.0f;

    auto compute = [&](const RoundRegisters<BITS, GROUP>& r, int tile_chunk0) {
      std::uint32_t w[4 * R::kPieces];
#pragma unroll
      for (int piece = 0; piece < R::kPieces; ++piece) {
        w[4 * piece] = r.pieces[piece].x, w[4 * piece + 1] = r.pieces[piece].y;
        w[4 * piece + 2] = r.pieces[piece].z, w[4 * piece + 3] = r.pieces[piece].w;
      }
      const int group0 = tile_chunk0 / kCpg;  // the round's first group within the staged tile
      float acc[NT][4];
#pragma unroll
      for (int j = 0; j < R::kChunks; ++j) {
        std::uint32_t p_lo[4], p_hi[4];
        fragment_pairs<BITS, BF16>(w, 0, j, p_lo);
        fragment_pairs<BITS, BF16>(w, 1, j, p_hi);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if (j % kCpg == 0)  // a group starts
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
          const uint4 b = b_lane[nt][4 * (tile_chunk0 + j)];
          mma_step<BF16>(acc[nt], {p_lo[0], p_hi[0], p_lo[1], p_hi[1]}, b.x, b.y);
          mma_step<BF16>(acc[nt], {p_lo[2], p_hi[2], p_lo[3], p_hi[3]}, b.z, b.w);
        }
        if (j % kCpg == kCpg - 1) {  // the group ends: fold it, as qmv_mma.cu does
          const int i = j / kCpg;
          const float s_lo = widen_param<BF16>(r.scales[i] & 0xffffu), s_hi = widen_param<BF16>(r.scales[i] >> 16);
          const float b_lo = widen_param<BF16>(r.biases[i] & 0xffffu), b_hi = widen_param<BF16>(r.biases[i] >> 16);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const float2 sum = group_sums(fold_lane, group0 + i, nt);  // vectors 2t (x), 2t + 1 (y)
            total[nt][0] = order::mma_fold(total[nt][0], s_lo, acc[nt][0], b_lo, sum.x);
            total[nt][1] = order::mma_fold(total[nt][1], s_lo, acc[nt][1], b_lo, sum.y);
            total[nt][2] = order::mma_fold(total[nt][2], s_hi, acc[nt][2], b_hi, sum.x);
            total[nt][3] = order::mma_fold(total[nt][3], s_hi, acc[nt][3], b_hi, sum.y);
          }
        }
      }
    };

    // A ring of DEPTH register buffers: round j + DEPTH - 1 of the segment is loaded before
    // round j is computed. Rounds go in groups of DEPTH so that each buffer has a fixed name.
    // Every warp walks rounds_max steps (the barriers of restaging are reached by all); a warp
    // computes only its segment's rounds.
    const int rounds = active ? work.rounds : 0;
    RoundRegisters<BITS, GROUP> buffer[DEPTH];
#pragma unroll
    for (int d = 0; d < DEPTH - 1; ++d)
      if (d < rounds) load(buffer[d]);  // in flight while x is staged
    int tile_pos = 0;  // the step's first chunk within this part's sub-tile of x
    for (int j0 = 0; j0 < work.rounds_max; j0 += DEPTH) {
#pragma unroll
      for (int d = 0; d < DEPTH; ++d) {
        const int j = j0 + d;
        if (j < work.rounds_max) {  // the same for every warp: the barriers below are reached by all
          if (tile_pos == work.sub_chunks) tile_pos = 0;
          if (tile_pos == 0 && (work.restage || trip == 0)) {
            __syncthreads();  // everyone is done with the previous tile
            stage_mma_x(xs, sums, layout, p, v0, count, parts, rounds_total, 32 * R::kChunks, work.sub_rounds, j);
          }
          if (j < rounds) {
            if (j + DEPTH - 1 < rounds) load(buffer[(d + DEPTH - 1) % DEPTH]);  // round j + DEPTH - 1
            compute(buffer[d], work.part_chunk0 + tile_pos);
          }
          tile_pos += R::kChunks;
        }
      }
    }
    if constexpr (SPLIT) combine_parts<NT>(total, part_totals, parts, work.part, warp, lane, active);
    if (active && work.part == 0) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const std::int64_t row = task * kMmaRows + g + (i < 2 ? 0 : 8);
          const int v = nt * 8 + 2 * t + (i & 1);
          if (row < p.n && v < count) store_f32(p.y, std::size_t((v0 + v) * p.n + row), kType, total[nt][i]);
        }
    }
  }
}

template <int BITS, bool BF16, int NT, int GROUP>
int fragments_blocks_per_sm(std::size_t smem) {
  return resident_blocks<qmv_mma_fragments_kernel<BITS, BF16, NT, GROUP>>(kMmaThreads, smem, int(mma_block_smem()));
}

// The launches of one call for a matrix of BITS bits (launch_qmv_mma_fragments has checked it).
template <int kWidth>
void launch_width(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y, cudaStream_t stream) {
  for_each_mma_launch<kWidth>(w, x, m, y, [&]<int BITS, bool BF16, int NT, int GROUP>(MmaParams p, std::int64_t first, std::int64_t passes) {
    const std::int64_t vectors = p.m - first * kPassVectors;
    const int count = int(vectors < kPassVectors ? vectors : kPassVectors);  // passes > 1 are all full
    // Few (task, K part) pairs: blocks of fewer warps with a deeper ring (see kFewTaskDepth).
    const std::int64_t tasks = (p.n + kMmaRows - 1) / kMmaRows;
    const bool few = tasks * p.k_parts <= std::int64_t(kFewTasksPerSm) * sm_count();
    // The x tile: the most that fits in a block's shared memory next to the parts' totals (there
    // is no ring), whole rounds of every part's segment.
    constexpr int kRoundValues = mma_layout::round_values(BITS, GROUP);
    const std::size_t totals = combine_bytes(p.k_parts, few ? kFewTaskWarps : kMmaWarps, NT);
    p.tile_values = p.k_parts * kRoundValues * mma_sub_rounds<GROUP>(p.k, kRoundValues, p.k_parts, count, mma_block_smem() - totals);
    const std::size_t smem = MmaTileLayout(p.tile_values, GROUP).bytes(count) + totals;
    auto launch = [&]<bool SPLIT>() {
      if (few)
        launch_mma_passes<qmv_mma_fragments_kernel<BITS, BF16, NT, GROUP, kFewTaskWarps, few_task_depth<BITS, GROUP>(), SPLIT>,
                          kFewTaskWarps>(p, first, passes, smem, stream);
      else
        launch_mma_passes<qmv_mma_fragments_kernel<BITS, BF16, NT, GROUP, kMmaWarps, kDepth, SPLIT>>(p, first, passes, smem,
                                                                                                 stream);
    };
    if (p.k_parts > 1) launch.template operator()<true>();
    else launch.template operator()<false>();
  });
}

// Registers, spills and blocks per SM of the BITS-bit kernel at group 64 (the benchmark's default).
template <int kWidth>
KernelResources width_resources(int vectors) {
  cudaFuncAttributes a{};
  int blocks = 0;
  auto get = [&]<int BITS, int NT>() {
    // Group 64, the benchmark's default.
    EXACTQ_CUDA_CHECK(cudaFuncGetAttributes(&a, qmv_mma_fragments_kernel<BITS, true, NT, 64>));
    const int count = NT * 8;
    constexpr int kRoundValues = mma_layout::round_values(BITS, 64);
    const int tile = kRoundValues * mma_sub_rounds<64>(4096, kRoundValues, 1, count, mma_block_smem());
    blocks = fragments_blocks_per_sm<BITS, true, NT, 64>(MmaTileLayout(tile, 64).bytes(count));
  };
  if (vectors > 8) get.template operator()<kWidth, 2>();
  else get.template operator()<kWidth, 1>();
  return {a.numRegs, int(a.localSizeBytes), a.maxThreadsPerBlock, blocks};
}

// Each width is instantiated in exactly one translation unit.
#define EXACTQ_FRAGMENT_WIDTH(BITS, KIND)                                                                            \
  KIND template void launch_width<BITS>(const QuantizedMatrixView&, const void*, std::int64_t, void*, cudaStream_t); \
  KIND template KernelResources width_resources<BITS>(int);
#define EXACTQ_FRAGMENT_WIDTH_EXTERN(BITS) EXACTQ_FRAGMENT_WIDTH(BITS, extern)
EXACTQ_FRAGMENT_WIDTH_EXTERN(2)
EXACTQ_FRAGMENT_WIDTH_EXTERN(3)
EXACTQ_FRAGMENT_WIDTH_EXTERN(4)
EXACTQ_FRAGMENT_WIDTH_EXTERN(5)
EXACTQ_FRAGMENT_WIDTH_EXTERN(6)
EXACTQ_FRAGMENT_WIDTH_EXTERN(8)
#undef EXACTQ_FRAGMENT_WIDTH_EXTERN

}  // namespace exactq::cuda_detail::fragments
