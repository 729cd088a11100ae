// qmv_mma on CUDA: one tensor-core schedule for every M (docs/design.md §5b).
//
// A warp owns 16 output rows and walks K for them (its segment of K where K is split,
// src/order/qmv_mma.h). Per 32-code chunk and row, lane
// (g, t) = (lane / 4, lane % 4) holds word t of the chunk (codes 8t .. 8t+7) of rows g and g+8,
// converts the codes exactly to bf16/f16 pairs and feeds two m16n8k16 mma steps with them:
//   k-step 0: A columns (2t, 2t+1) <- codes (8t, 8t+4), (2t+8, 2t+9) <- codes (8t+1, 8t+5)
//   k-step 1: A columns (2t, 2t+1) <- codes (8t+2, 8t+6), (2t+8, 2t+9) <- codes (8t+3, 8t+7)
// B holds the activations in the same permuted order, staged once per block per K tile, so a
// lane's B fragment for a chunk is one 16-byte shared-memory read. A k-step never leaves its
// chunk, so never its group: the mma accumulators hold acc_g = sum over group g of x * q, with
// the raw integer codes (exact in bf16 and f16), in f32. Each group is then folded in f32,
//   total = fma(scale_g, acc_g, fma(bias_g, S_g, total)),
// with S_g the f32 sum of the group's activations, in increasing group order.
//
// Width invariance: vector v is column v % 8 of n-tile v / 8. An mma output column depends only
// on its own column of B (checked on the H200 for bf16 and f16: tests/ops/cuda/test_mma_probe.cpp),
// and the instruction sequence per (row, vector) is fixed by N, K, bits, group and dtype. M only
// decides how many n-tiles a pass runs (1 or 2) and how many passes of 16 vectors there are.
//
// This file's kernel reads MLX's layout: weights stream HBM -> shared memory through a per-warp
// cp.async ring (several stages in flight without spending registers), read once per pass. Such
// rings measured stopping near 80 % of a streaming read, so a matrix converted to the fragment
// layout (exactq/mma_layout.h) goes to qmv_mma_fragments.cu instead, which loads the same words
// straight into registers; the two produce the same bits.
#include "ops/cuda/launch.h"
#include "ops/cuda/mma_codes.cuh"
#include "ops/cuda/mma_common.cuh"
#include "ops/cuda/mma_ring.cuh"
#include "ops/cuda/mma_staging.cuh"

namespace exactq::cuda_detail {

namespace {

using namespace mma;

template <int BITS, int GROUP>
std::size_t mma_smem(int tile_values, int count) {
  return MmaTileLayout(tile_values, GROUP).bytes(count) + mma_ring_bytes<BITS, GROUP>();
}

// SPLIT: K is cut into p.k_parts > 1 segments (src/order/qmv_mma.h); without it the kernel is
// built for one.
template <int BITS, bool BF16, int NT, int GROUP, bool SPLIT = false>
__global__ void __launch_bounds__(kMmaThreads, kMmaBlocksPerSm) qmv_mma_kernel(const MmaParams p) {
  using Stage = MmaStage<BITS, GROUP>;
  constexpr int kCps = Stage::kChunks, kGps = Stage::kGroups, kCpg = Stage::kChunksPerGroup;
  constexpr DType kType = BF16 ? DType::bf16 : DType::f16;
  extern __shared__ uint4 mma_shared[];
  EXACTQ_MMA_PASS_PROLOGUE(p, GROUP, mma_shared);
  std::uint8_t* ring = reinterpret_cast<std::uint8_t*>(mma_shared) + layout.bytes(count) +
                       std::size_t(warp) * kMmaStages * Stage::kBytes;
  const std::int64_t row_bytes = p.k * BITS / 8, groups = p.k / GROUP;
  const int stages_total = int(p.k / (32 * kCps));  // K is a multiple of the stage (the launcher checks)
  const std::int64_t tasks = (p.n + kMmaRows - 1) / kMmaRows;
  const int parts = SPLIT ? p.k_parts : 1;
  const MmaWarpWork work(p, parts, warp, stages_total, kCps, tasks);  // a stage is a round of the K split
  float* part_totals = reinterpret_cast<float*>(reinterpret_cast<std::uint8_t*>(mma_shared) + layout.bytes(count) +
                                                mma_ring_bytes<BITS, GROUP>());
  // The vectors this lane reads for B and for the folds, clamped as MmaLaneReads explains (inline
  // here: through MmaLaneReads this kernel compiles to other machine code).
  const uint4* b_lane[NT];
  const float* const fold_lane = sums + 2 * t;  // group_sums()
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) b_lane[nt] = xs + min(nt * 8 + g, count - 1) * layout.x_stride + t;
  // Where this lane reads in a stage: its words of rows g and g + 8, and those rows' parameters.
  const int words_lo = g * Stage::kRowStride + t * BITS, words_hi = words_lo + 8 * Stage::kRowStride;
  const int params_lo = Stage::kCodeBytes + g * Stage::kParamBytes, params_hi = params_lo + 8 * Stage::kParamBytes;
  constexpr int kBiasesAt = kMmaRows * Stage::kParamBytes;

  for (std::int64_t trip = 0; trip < work.trips; ++trip) {
    const std::int64_t task = work.first_task + trip * work.task_stride;
    const bool active = warp < p.task_warps && task < tasks;
    const int stages = active ? work.rounds : 0;  // this warp's segment
    const std::int64_t row_lo = task * kMmaRows + g, row_hi = row_lo + 8;
    const std::int64_t rl = row_lo < p.n ? row_lo : p.n - 1, rh = row_hi < p.n ? row_hi : p.n - 1;
    // Lane (g, t) copies the 16-byte pieces t, t + 4, ... of rows g and g+8 of each stage, and
    // lane l the parameters of row l / 2 (scales for l even, biases for l odd). The sources
    // advance by one stage per issue (stages are issued in order): loop-carried pointers, not
    // addresses recomputed from the row clamps at every stage.
    const std::int64_t segment_byte = std::int64_t(work.round_begin) * kStageRowBytes;
    const std::uint8_t* next_lo = p.packed + rl * row_bytes + segment_byte + 16 * t;
    const std::uint8_t* next_hi = p.packed + rh * row_bytes + segment_byte + 16 * t;
    const std::int64_t param_row_unclamped = task * kMmaRows + lane / 2;
    const std::int64_t param_first =
        (param_row_unclamped < p.n ? param_row_unclamped : p.n - 1) * groups + std::int64_t(work.round_begin) * kGps;
    const std::uint16_t* param_base = static_cast<const std::uint16_t*>(lane % 2 ? p.biases : p.scales);
    const std::uint16_t* next_param = param_base + param_first;
    const std::uint16_t* const param_end = param_base + p.n * groups;
    bool next_param_odd = (param_first & 1) != 0;  // one group per stage: the element's place in its word
    const int param_to = Stage::kCodeBytes + (lane % 2) * kBiasesAt + (lane / 2) * Stage::kParamBytes;
    const int copy_lo = g * Stage::kRowStride + 16 * t, copy_hi = copy_lo + 8 * Stage::kRowStride;
    // One group per stage: which half of the copied word holds rows g's and g+8's parameter at
    // the segment's stage 0 (it alternates with the stage).
    const bool odd_lo0 = ((rl * groups + work.round_begin) & 1) != 0, odd_hi0 = ((rh * groups + work.round_begin) & 1) != 0;
    int issued = 0;
    // The next stage goes to ring slot `ring_slot` (stage st to st % kMmaStages: the callers count).
    auto issue = [&](int ring_slot) {
      const bool copy = issued < stages;
      std::uint8_t* slot = ring + ring_slot * Stage::kBytes;
#pragma unroll
      for (int piece = 0; piece < kStageRowBytes / 64; ++piece) {  // pieces t, t + 4, ... of the row
        copy_async_if<16>(copy, slot + copy_lo + 64 * piece, next_lo + 64 * piece);
        copy_async_if<16>(copy, slot + copy_hi + 64 * piece, next_hi + 64 * piece);
      }
      if constexpr (kGps == 1) {
        // The aligned word holding the group. The array's last element, where it starts a word,
        // has no word of its own: that lane loads it directly (a 4-byte copy, even one told to
        // read only 2 bytes, is an out-of-bounds read to compute-sanitizer).
        const bool array_end = !next_param_odd && next_param == param_end - 1;
        copy_async_if<4>(copy && !array_end, slot + param_to, next_param - (next_param_odd ? 1 : 0));
        if (copy && array_end) *reinterpret_cast<std::uint32_t*>(slot + param_to) = *next_param;
        next_param_odd = !next_param_odd;
      } else {
        copy_async_if<Stage::kParamBytes>(copy, slot + param_to, next_param);
      }
      next_lo += kStageRowBytes, next_hi += kStageRowBytes, next_param += kGps, ++issued;
      commit_async_copies();
    };
    float total[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) total[j][i] = 0.0f;
#pragma unroll
    for (int st = 0; st < kMmaStages - 1; ++st) issue(st);

    // Counters instead of run-time divisions in the loop: the stage's ring slot and its first
    // chunk within this part's sub-tile of x. Every warp walks rounds_max steps (the barriers of
    // restaging are reached by all); a warp computes only its segment's stages.
    int read_slot = 0, tile_pos = 0;
    for (int st = 0; st < work.rounds_max; ++st, tile_pos += kCps) {
      if (tile_pos == work.sub_chunks) tile_pos = 0;
      if (tile_pos == 0 && (work.restage || trip == 0)) {
        __syncthreads();
        stage_mma_x(xs, sums, layout, p, v0, count, parts, stages_total, 32 * kCps, work.sub_rounds, st);
      }
      const int tile_chunk0 = work.part_chunk0 + tile_pos;
      // A warp without a task (beyond task_warps, or past the last task) only helps stage x: it
      // skips the stage's work, which it would otherwise spend issue slots on next to the warps
      // that have tasks (a down projection runs 2 task warps per SM); so does a part whose
      // segment is done.
      if (st >= stages) continue;
      issue(read_slot == 0 ? kMmaStages - 1 : read_slot - 1);  // stage st + kMmaStages - 1
      wait_async_copies<kMmaStages - 1>();
      __syncwarp();  // the stage was copied by all lanes of the warp
      const std::uint8_t* slot = ring + read_slot * Stage::kBytes;
      read_slot = read_slot == kMmaStages - 1 ? 0 : read_slot + 1;
      // The stage's parameters and group sums, read up front so no fold waits for them.
      float s_lo[kGps], b_lo[kGps], s_hi[kGps], b_hi[kGps];
      const bool odd_lo = odd_lo0 != ((st & 1) != 0), odd_hi = odd_hi0 != ((st & 1) != 0);
      read_params<BITS, GROUP, BF16>(slot + params_lo, odd_lo, s_lo);
      read_params<BITS, GROUP, BF16>(slot + params_lo + kBiasesAt, odd_lo, b_lo);
      read_params<BITS, GROUP, BF16>(slot + params_hi, odd_hi, s_hi);
      read_params<BITS, GROUP, BF16>(slot + params_hi + kBiasesAt, odd_hi, b_hi);
      const int group0 = tile_chunk0 / kCpg;  // the stage's first group within the staged tile
      float acc[NT][4];
#pragma unroll
      for (int j = 0; j < kCps; ++j) {
        std::uint32_t w_lo[BITS / 4], w_hi[BITS / 4];
        read_chunk_words<BITS>(slot + words_lo + j * Stage::kChunkBytes, w_lo);
        read_chunk_words<BITS>(slot + words_hi + j * Stage::kChunkBytes, w_hi);
        std::uint32_t p_lo[4], p_hi[4];
        codes_to_pairs<BITS, BF16>(w_lo, p_lo);
        codes_to_pairs<BITS, BF16>(w_hi, p_hi);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if (j % kCpg == 0)  // a group starts
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
          const uint4 b = b_lane[nt][4 * (tile_chunk0 + j)];
          mma_step<BF16>(acc[nt], {p_lo[0], p_hi[0], p_lo[1], p_hi[1]}, b.x, b.y);
          mma_step<BF16>(acc[nt], {p_lo[2], p_hi[2], p_lo[3], p_hi[3]}, b.z, b.w);
        }
        if (j % kCpg == kCpg - 1) {  // the group ends: fold it
          const int i = j / kCpg;  // a constant once the loop is unrolled
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            // acc: [0] (row g, vector 2t), [1] (g, 2t+1), [2] (g+8, 2t), [3] (g+8, 2t+1)
            const float2 sum = group_sums(fold_lane, group0 + i, nt);
            total[nt][0] = order::mma_fold(total[nt][0], s_lo[i], acc[nt][0], b_lo[i], sum.x);
            total[nt][1] = order::mma_fold(total[nt][1], s_lo[i], acc[nt][1], b_lo[i], sum.y);
            total[nt][2] = order::mma_fold(total[nt][2], s_hi[i], acc[nt][2], b_hi[i], sum.x);
            total[nt][3] = order::mma_fold(total[nt][3], s_hi[i], acc[nt][3], b_hi[i], sum.y);
          }
        }
      }
      __syncwarp();  // every lane is done with the stage before it is copied over
    }
    wait_async_copies<0>();
    if constexpr (SPLIT) combine_parts<NT>(total, part_totals, parts, work.part, warp, lane, active);
    if (active && work.part == 0) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const std::int64_t row = i < 2 ? row_lo : row_hi;
          const int v = nt * 8 + 2 * t + (i & 1);
          if (row < p.n && v < count) store_f32(p.y, std::size_t((v0 + v) * p.n + row), kType, total[nt][i]);
        }
    }
  }
}

template <int BITS, bool BF16, int NT, int GROUP>
int mma_blocks_per_sm(std::size_t smem) {
  return resident_blocks<qmv_mma_kernel<BITS, BF16, NT, GROUP>>(kMmaThreads, smem, int(mma_block_smem()));
}

// K values of x staged per block at a time for `count` vectors: the most that fits next to the
// rings and the parts' totals in mma_block_smem(), whole stages of every part's segment.
template <int BITS, int GROUP>
int mma_tile(std::int64_t k, int k_parts, int nt, int count) {
  constexpr int kStageValues = 32 * MmaStage<BITS, GROUP>::kChunks;
  const std::size_t budget = mma_block_smem() - mma_ring_bytes<BITS, GROUP>() - combine_bytes(k_parts, kMmaWarps, nt);
  return k_parts * kStageValues * mma_sub_rounds<GROUP>(k, kStageValues, k_parts, count, budget);
}

}  // namespace

void launch_qmv_mma(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y, cudaStream_t stream) {
  if (w.layout == WeightLayout::mma_fragments) return launch_qmv_mma_fragments(w, x, m, y, stream);
  check_mma_arguments(w);
  if (w.bits != 4 && w.bits != 8)
    throw std::invalid_argument("[exactq] qmv_mma: bits = " + std::to_string(w.bits) +
                                " is read in the fragment layout only (exactq::to_mma_fragments); in MLX's layout "
                                "qmv_mma serves 4 and 8 bits");
  const int stage_values = 32 * (kStageRowBytes / (4 * w.bits));
  if (w.k % stage_values != 0)
    throw std::invalid_argument("[exactq] qmv_mma: K = " + std::to_string(w.k) + " must be a multiple of " +
                                std::to_string(stage_values) + " at " + std::to_string(w.bits) + " bits");
  for_each_mma_launch<4, 8>(w, x, m, y, [&]<int BITS, bool BF16, int NT, int GROUP>(MmaParams p, std::int64_t first, std::int64_t passes) {
    const std::int64_t vectors = p.m - first * kPassVectors;
    const int count = int(vectors < kPassVectors ? vectors : kPassVectors);  // passes > 1 are all full
    p.tile_values = mma_tile<BITS, GROUP>(p.k, p.k_parts, NT, count);
    const std::size_t smem = mma_smem<BITS, GROUP>(p.tile_values, count) + combine_bytes(p.k_parts, kMmaWarps, NT);
    if (p.k_parts > 1) launch_mma_passes<qmv_mma_kernel<BITS, BF16, NT, GROUP, true>>(p, first, passes, smem, stream);
    else launch_mma_passes<qmv_mma_kernel<BITS, BF16, NT, GROUP, false>>(p, first, passes, smem, stream);
  });
}

KernelResources qmv_mma_resources(int bits, int vectors) {
  cudaFuncAttributes a{};
  int blocks = 0;
  auto get = [&]<int BITS, int NT>() {
    // Group 64, the benchmark's default.
    EXACTQ_CUDA_CHECK(cudaFuncGetAttributes(&a, qmv_mma_kernel<BITS, true, NT, 64>));
    const int count = NT * 8;
    blocks = mma_blocks_per_sm<BITS, true, NT, 64>(mma_smem<BITS, 64>(mma_tile<BITS, 64>(4096, 1, NT, count), count));
  };
  const bool wide = vectors > 8;
  if (bits == 8) wide ? get.template operator()<8, 2>() : get.template operator()<8, 1>();
  else wide ? get.template operator()<4, 2>() : get.template operator()<4, 1>();
  return {a.numRegs, int(a.localSizeBytes), a.maxThreadsPerBlock, blocks};
}

}  // namespace exactq::cuda_detail
