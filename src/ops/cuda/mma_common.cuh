// What qmv_mma's two kernels share (qmv_mma.cu reads MLX's layout through a shared-memory ring,
// qmv_mma_fragments.cuh the fragment layout straight into registers): the block shape, the launch
// parameters, a warp's work and a block's pass, the K split's combine and the store, and the host
// side of the launches. The staged activations are mma_staging.cuh's, the exact conversions and
// the mma step mma_codes.cuh's. The order is docs/design.md §5b; both kernels produce the same bits.
#pragma once

#include <algorithm>

#include "support/dispatch.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/launch.h"
#include "exactq/mma_layout.h"

namespace exactq::cuda_detail::mma {

// ---- the block shape ---------------------------------------------------------------------------
// 16 warps per block, one block per SM: the staged x tile is shared by twice the rows of two
// blocks of 8, and at M = 4 a whole K of x fits next to qmv_mma.cu's rings. Where N has too few
// 16-row tasks to give every block a full set of task warps (a down projection has 240 tasks),
// only the first `task_warps` warps of a block take tasks and the others just help stage x, so
// the blocks spread over all SMs. The launcher picks task_warps from N and the SM count; it never
// enters any row's arithmetic.
inline constexpr int kMmaWarps = 16;
static_assert(8 % order::kMmaMaxParts == 0, "a task's K parts fill whole blocks of 8 or 16 warps");
inline constexpr int kMmaThreads = kMmaWarps * 32;
inline constexpr int kMmaBlocksPerSm = 16 / kMmaWarps;  // 16 warps per SM at 128 registers
inline constexpr int kMmaRows = 16;      // rows per warp task: the mma's M
inline constexpr int kPassVectors = 16;  // vectors per pass: two n-tiles of 8

// A block's shared memory, at most: an SM's over kMmaBlocksPerSm blocks, less what the system
// reserves per block, within the device's per-block opt-in (227 KB on an H100 or H200).
inline std::size_t mma_block_smem() {
  const SharedMemoryLimits limits = shared_memory_limits();
  return std::size_t(std::min(limits.per_sm / kMmaBlocksPerSm - limits.reserved_per_block, limits.per_block));
}

struct MmaParams {
  const std::uint8_t* packed;
  const void* scales;
  const void* biases;
  const void* x;
  void* y;
  std::int64_t n, k, m;
  int group;
  int tile_values;  // K values of x staged at a time (a multiple of 256, or all of K)
  DType dtype;
  int task_warps;   // warps of a block that take tasks: a multiple of k_parts, at most the block's
  int k_parts;      // K segments per task (order::mma_k_parts); consecutive warps are a task's parts
};

// The staged activations of a block: per vector, the K tile's B fragments, [count][x_stride] x
// 16 B (a lane's fragment of chunk c is at + 4c + t, so the chunk offsets of a stage are
// constants; x_stride is padded so that the 8 rows of lanes of a fragment read, vectors 64 B
// apart, are conflict-free), then the group sums group-major, [groups][kSumVectors] f32: lane
// (g, t) reads the sums of its output columns (vectors 2t, 2t + 1) of one group as one 8-byte
// word, group by group, so a round's sums need not sit in registers.
struct MmaTileLayout {
  static constexpr int kSumVectors = 16;  // a pass; columns past the pass's vectors read 0
  int x_stride;                           // uint4s per vector
  int sum_groups;                         // groups of the tile
  EXACTQ_HD MmaTileLayout(int tile_values, int group)
      : x_stride(tile_values / 32 * 4 + 4), sum_groups(tile_values / group) {}
  EXACTQ_HD std::size_t x_bytes(int count) const { return std::size_t(count) * x_stride * 16; }
  EXACTQ_HD std::size_t bytes(int count) const { return x_bytes(count) + std::size_t(sum_groups) * kSumVectors * 4; }
};

// The work of one warp: which part of a task it computes and which tasks it takes, trip by trip.
// K is cut into p.k_parts segments of whole rounds (src/order/qmv_mma.h); the k_parts
// consecutive warps w = slot * k_parts + part of a block compute the segments of one task, and
// the block adds their totals in increasing part (combine_parts). With k_parts = 1 a warp walks
// all of K.
struct MmaWarpWork {
  int part, round_begin, rounds;  // this warp's segment: rounds [round_begin, round_begin + rounds)
  int rounds_max;                 // the longest segment: every warp walks as many steps (barriers)
  std::int64_t first_task, task_stride, trips;
  // The x tile (p.tile_values) holds sub_rounds rounds of every part's segment, restaged every
  // sub_chunks chunks if it does not hold them all; this warp's sub-tile starts at part_chunk0.
  int sub_rounds, sub_chunks, part_chunk0;
  bool restage;
  // parts: p.k_parts, or a compile-time 1 in the kernels built without the split.
  __device__ __forceinline__ MmaWarpWork(const MmaParams& p, int parts, int warp, int rounds_total, int round_chunks,
                                         std::int64_t tasks) {
    part = warp % parts;
    round_begin = order::mma_segment_begin(part, parts, rounds_total);
    rounds = order::mma_segment_begin(part + 1, parts, rounds_total) - round_begin;
    rounds_max = (rounds_total + parts - 1) / parts;
    task_stride = std::int64_t(gridDim.x) * (p.task_warps / parts);
    trips = (tasks + task_stride - 1) / task_stride;
    first_task = std::int64_t(warp / parts) * gridDim.x + blockIdx.x;
    sub_rounds = p.tile_values / (parts * 32 * round_chunks);
    sub_chunks = sub_rounds * round_chunks;
    part_chunk0 = part * sub_chunks;
    restage = rounds_max > sub_rounds;
  }
};

// The first statements of both kernels: the block's pass (its first vector v0 and its vector
// count, up to kPassVectors), x's tile in shared memory (B fragments at xs, group sums at sums,
// in `layout`), and lane (g, t) = (lane / 4, lane % 4) of warp `warp`. A macro, not a struct or
// a function: the compiler simplifies a callee and its caller each on its own before it inlines,
// so through a struct the kernels' arithmetic on these values folds differently, and both
// kernels compile to other (untimed) machine code.
#define EXACTQ_MMA_PASS_PROLOGUE(P, GROUP, SHARED)                                                        \
  uint4* xs = SHARED;                                                                                     \
  const std::int64_t v0 = std::int64_t(blockIdx.y) * kPassVectors;                                        \
  const int count = int(P.m - v0 < kPassVectors ? P.m - v0 : kPassVectors);                               \
  const MmaTileLayout layout(P.tile_values, GROUP);                                                       \
  float* sums = reinterpret_cast<float*>(reinterpret_cast<std::uint8_t*>(xs) + layout.x_bytes(count));    \
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4

// Shared memory for the parts' totals of one block (combine_parts), none without a K split.
inline std::size_t combine_bytes(int k_parts, int warps, int nt) {
  return k_parts > 1 ? std::size_t(warps) * 32 * nt * 4 * sizeof(float) : 0;
}

// The K split's combine (src/order/qmv_mma.h): part 0 of each task adds the other parts' totals
// in increasing part, with one rounding each. Called by every warp of the block (it synchronises
// the block), only when p.k_parts > 1.
template <int NT>
__device__ __forceinline__ void combine_parts(float (&total)[NT][4], float* scratch, int parts, int part, int warp,
                                              int lane, bool active) {
  if (active && part > 0)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) scratch[(warp * NT * 4 + nt * 4 + i) * 32 + lane] = total[nt][i];
  __syncthreads();
  if (active && part == 0)
    for (int q = 1; q < parts; ++q)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          total[nt][i] = order::mma_segment_add(total[nt][i], scratch[((warp + q) * NT * 4 + nt * 4 + i) * 32 + lane]);
  __syncthreads();  // read before the next trip writes
}

// ---- host side, shared by both kernels' launchers ------------------------------------------
// What every qmv_mma launch checks, whatever the layout (whose own bits and K rules its launcher
// checks).
inline void check_mma_arguments(const QuantizedMatrixView& w) {
  if (w.dtype == DType::f32)
    throw std::invalid_argument("[exactq] qmv_mma: dtype f32 has no exact tensor-core path (use bf16 or f16; qmv serves f32)");
  if (w.n * (w.k / w.group) >= (std::int64_t(1) << 31))
    throw std::invalid_argument("[exactq] N * K / group = " + std::to_string(w.n * (w.k / w.group)) +
                                " group parameters: qmv_mma indexes them with 32 bits");
  for (const void* params : {w.scales.data(), w.biases.data()})
    if (reinterpret_cast<std::uintptr_t>(params) % 16 != 0)
      throw std::invalid_argument("[exactq] qmv_mma: scales and biases must be 16-byte aligned (they are read in "
                                  "pieces of up to 16 bytes); got address " +
                                  std::to_string(reinterpret_cast<std::uintptr_t>(params)));
}

// The launches of one call: passes of 16 vectors run two n-tiles, a last pass of at most 8 one.
// `pass` is called as pass.template operator()<BITS, BF16, NT, GROUP>(params, first_pass,
// passes). The group is a template parameter, so the folds' places in a round are constants.
// kBits: the widths the calling kernel is built for (the caller has checked w.bits is one).
template <int... kBits, typename Pass>
void for_each_mma_launch(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y, Pass&& pass) {
  // The K split is part of the order: order::mma_k_parts depends on N, K, bits and group only
  // (its constants, such as order::kMmaTargetTasks, stay constants, never the device's sizes).
  const MmaParams p{w.packed.data(), w.scales.data(), w.biases.data(), x, y, w.n, w.k, m, w.group, 0, w.dtype, kMmaWarps,
                    order::mma_k_parts(w.n, w.k, w.bits, w.group)};
  const std::int64_t full = m / kPassVectors;
  const int rest = int(m - full * kPassVectors);
  auto with = [&]<int BITS, int GROUP>() {
    auto go = [&]<int NT>(std::int64_t first, std::int64_t passes) {
      if (w.dtype == DType::bf16) pass.template operator()<BITS, true, NT, GROUP>(p, first, passes);
      else pass.template operator()<BITS, false, NT, GROUP>(p, first, passes);
    };
    if (full > 0) go.template operator()<2>(0, full);
    if (rest > 8) go.template operator()<2>(full, 1);
    else if (rest > 0) go.template operator()<1>(full, 1);
  };
  auto with_group = [&]<int BITS>() {
    if (w.group == 32) with.template operator()<BITS, 32>();
    else if (w.group == 64) with.template operator()<BITS, 64>();
    else with.template operator()<BITS, 128>();
  };
  dispatch_value<kBits...>(w.bits, "qmv_mma bits", with_group);
}

// Launches KERNEL (blocks of WARPS warps) over passes [first_pass, first_pass + passes), with
// p.tile_values already chosen and `smem` bytes of shared memory. The (task, K part) pairs are
// spread over the SMs: task_warps = ceil(pairs / SMs) warps per block, rounded up to whole tasks,
// take them (the rest only help stage x), from N, K and the SM count only. Each launch sees its
// first pass's vectors as 0.. .
template <auto KERNEL, int WARPS = kMmaWarps>
void launch_mma_passes(MmaParams p, std::int64_t first_pass, std::int64_t passes, std::size_t smem, cudaStream_t stream) {
  const std::int64_t tasks = (p.n + kMmaRows - 1) / kMmaRows;
  const std::int64_t per_sm = (tasks * p.k_parts + sm_count() - 1) / sm_count();
  const int warps = int(per_sm < WARPS ? per_sm : WARPS);
  p.task_warps = (warps + p.k_parts - 1) / p.k_parts * p.k_parts;  // k_parts divides WARPS
  const std::int64_t task_slots = p.task_warps / p.k_parts;
  const std::int64_t blocks_needed = (tasks + task_slots - 1) / task_slots;
  const std::int64_t resident = std::int64_t(resident_blocks<KERNEL>(WARPS * 32, smem, int(mma_block_smem()))) * sm_count();
  const unsigned grid_x = unsigned(blocks_needed < resident ? blocks_needed : resident);
  p.x = static_cast<const std::uint16_t*>(p.x) + first_pass * kPassVectors * p.k;
  p.y = static_cast<std::uint16_t*>(p.y) + first_pass * kPassVectors * p.n;
  p.m -= first_pass * kPassVectors;
  constexpr std::int64_t kMaxGridY = 65535;
  for (std::int64_t done = 0; done < passes; done += kMaxGridY) {
    const std::int64_t now = passes - done < kMaxGridY ? passes - done : kMaxGridY;
    KERNEL<<<dim3(grid_x, unsigned(now)), WARPS * 32, smem, stream>>>(p);
    EXACTQ_CUDA_CHECK(cudaGetLastError());
    p.x = static_cast<const std::uint16_t*>(p.x) + now * kPassVectors * p.k;
    p.y = static_cast<std::uint16_t*>(p.y) + now * kPassVectors * p.n;
    p.m -= now * kPassVectors;
  }
}

}  // namespace exactq::cuda_detail::mma
