// Launch helper of the qmv-family kernel, shared by qmv.cu and qmv_streamed.cu.
#pragma once

#include <algorithm>

#include "support/dispatch.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/qmv_family.cuh"

namespace exactq::cuda_detail {

// Rows per warp: each piece of staged activations read from shared memory serves 4 rows.
// Numerically irrelevant: rows are independent.
inline constexpr int kFamilyRows = 4;

// qmv's (V = 1) budget for x's tile: K up to 16384 is staged in one tile (at most 4.25 bytes a
// value: 68 KB), and three blocks of it fit an H100's or H200's SM. A tuning value, not the
// device's size: the tile decides how often x is restaged, never an order.
inline constexpr double kFamilySharedBudget = 72 * 1024;
// qmv's cap on a block's dynamic shared memory (x's tile and the split's park), at most the
// device's per-block opt-in; qmv_streamed may take all of that.
inline constexpr int kQmvMaxShared = 100 * 1024;
// qmv's K split: a task of the last trip is shared by at most 4 warps (a divisor of the block's 8).
inline constexpr int kQmvSplitMax = 4;
// qmv at 4 bits with many trips per warp (at least kPrefetchMinTrips) requests each row's bytes
// one round beyond the register prefetch into L2 (p.l2_prefetch_rounds). Gemma's head (31 trips)
// 142.5 -> 140.3 us, Llama's head (15.2) 74.8 -> 74.1; with fewer trips it costs: 28672x8192
// (3.4 trips) 35.9 -> 37.0, the 33-50 MB shapes (about 2) 1-3 %. Two rounds ahead were slower than
// one everywhere. Between 3.4 and 15 trips the threshold is not measured.
inline constexpr std::int64_t kPrefetchMinTrips = 8;
inline constexpr int kPrefetchRounds = 1;

// The dynamic shared memory a family kernel may ask for: the device's per-block opt-in for
// qmv_streamed, at most kQmvMaxShared for qmv.
template <int V>
int family_max_shared() {
  const int per_block = shared_memory_limits().per_block;
  return V > 1 ? per_block : std::min(kQmvMaxShared, per_block);
}

// qmv_streamed (V > 1): x's tile takes the shared memory of the blocks per SM that the registers
// allow (two up to V = 4, one from V = 5), at the bytes each value stages at BITS. Where x needs
// several tiles, a block re-stages each of them on every trip: at V = 8, K = 8192 was four tiles
// of the 72 KB budget and is one of 208 KB (28672x8192 at M = 16 372 -> 281 us, 15360x3840
// 110 -> 87, the heads unchanged, 2-5 % slower at M = 2-4 on 3840x15360). qmv (V = 1) keeps
// kFamilySharedBudget. The SM's and the block's sizes are the device's.
template <int BITS, int V, int ROWS>
int family_tile(std::int64_t k) {
  if constexpr (V > 1) {
    const SharedMemoryLimits limits = shared_memory_limits();
    const int budget = std::min(limits.per_sm / kFamilyBlocksPerSm<V> - limits.reserved_per_block, limits.per_block);
    const double bytes_per_value = double(16 * kPieces<BITS> + 8) / kChunkValues;  // family_shared_bytes'
    return k_tile(k, V, bytes_per_value / 4 - 1, budget);
  }
  return k_tile(k, V, 1.0 / 16, kFamilySharedBudget);  // 4 bytes of X per value at most, + a float2 of facts per 32
}

template <int BITS, int V, int ROWS, int PARAM, bool NORM = false>
int family_blocks_per_sm(std::size_t smem) {
  return resident_blocks<qmv_family_kernel<BITS, V, ROWS, PARAM, NORM>>(kWarps * 32, smem, family_max_shared<V>());
}

// The norm's share of a block's shared memory (family_norm.cuh), 0 without it.
template <int PARAM, bool NORM>
std::size_t family_norm_bytes(std::int64_t k) {
  if constexpr (NORM) return norm_shared_bytes<DType(PARAM)>(k);
  return 0;
}

// Launches `tiles` tiles of V vectors starting at vector_offset. With NORM, `norm` holds the
// fused norm's and its epilogue's parameters (QmvParams' fields from norm_weight on) and x is the
// residual h.
template <int BITS, int V, int ROWS, int PARAM, bool NORM = false>
void launch_family(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t tiles,
                   void* y, const QmvOptions& options, cudaStream_t stream, const QmvParams* norm = nullptr) {
  if (w.n * (w.k / w.group) >= (std::int64_t(1) << 31))
    throw std::invalid_argument("[exactq] N * K / group = " + std::to_string(w.n * (w.k / w.group)) +
                                " group parameters: the CUDA qmv family indexes them with 32 bits (at most 2^31 - 1)");
  QmvParams p = norm ? *norm : QmvParams{};  // the fused norm's and epilogue's fields
  p.packed = w.packed.data(), p.scales = w.scales.data(), p.biases = w.biases.data(), p.x = x, p.y = y;
  p.n = w.n, p.k = w.k, p.vector_offset = 0, p.group = w.group, p.tile_values = family_tile<BITS, V, ROWS>(w.k);
  p.dtype = w.dtype, p.split = 1, p.l2_prefetch_rounds = 0;
  const std::size_t norm_bytes = family_norm_bytes<PARAM, NORM>(w.k);
  const std::int64_t tasks = (w.n + ROWS - 1) / ROWS;
  constexpr int warps = kWarps;  // per block
  // qmv with one K tile: the tasks of a partial last trip over the resident warps (with fewer
  // tasks than warps, the only trip) have their K split over 2 to 4 warps, as many as the trip
  // leaves room for (qmv_family_kernel replays the parts in order). A choice from N, K and the
  // device only.
  if constexpr (V == 1) {
    for (int s = kQmvSplitMax; s >= 2 && p.split == 1; --s) {
      // A split task's parts are consecutive warps of one block.
      if (warps % s != 0 || w.k > p.tile_values || family_rounds(w.k) < s) continue;
      const std::size_t with_park =
          norm_bytes + family_shared_bytes<BITS>(1, p.tile_values) + split_park_bytes(s, warps, ROWS, w.k);
      if (with_park > std::size_t(family_max_shared<V>())) continue;  // the park does not fit beside x
      const std::int64_t resident = std::int64_t(family_blocks_per_sm<BITS, V, ROWS, PARAM, NORM>(with_park)) * sm_count();
      const std::int64_t slots = (tasks < resident ? tasks : resident) * warps;  // the kernel's grid, as below
      const std::int64_t last_trip = tasks % slots;
      if (tasks * s <= slots || (last_trip > 0 && last_trip * s <= slots)) p.split = s;
    }
  }
  const std::size_t smem =
      norm_bytes + family_shared_bytes<BITS>(V, p.tile_values) + split_park_bytes(p.split, warps, ROWS, w.k);
  const std::int64_t resident = std::int64_t(family_blocks_per_sm<BITS, V, ROWS, PARAM, NORM>(smem)) * sm_count();
  // As many blocks as fit, each with at least one task: when there are fewer tasks than resident
  // warps, they spread over every SM (some warps of each block only stage) instead of filling
  // whole blocks on a subset of the SMs (qwen.down 26.0 -> 22.9 us).
  const unsigned grid_x = unsigned(tasks < resident ? tasks : resident);
  if constexpr (V == 1 && BITS == 4) {
    if (tasks >= kPrefetchMinTrips * std::int64_t(grid_x) * warps) p.l2_prefetch_rounds = kPrefetchRounds;
  }
  constexpr std::int64_t kMaxGridY = 65535;
  for (std::int64_t t0 = 0; t0 < tiles; t0 += kMaxGridY) {
    const std::int64_t count = tiles - t0 < kMaxGridY ? tiles - t0 : kMaxGridY;
    p.vector_offset = vector_offset + t0 * V;
    launch_overlapping(qmv_family_kernel<BITS, V, ROWS, PARAM, NORM>, dim3(grid_x, unsigned(count)), warps * 32, smem,
                       options.overlap_launch, stream, p);
  }
}

template <int BITS, int V, int ROWS, int PARAM>
KernelResources family_resources() {
  cudaFuncAttributes a{};
  EXACTQ_CUDA_CHECK(cudaFuncGetAttributes(&a, qmv_family_kernel<BITS, V, ROWS, PARAM>));
  const std::size_t smem = family_shared_bytes<BITS>(V, family_tile<BITS, V, ROWS>(4096));
  return {a.numRegs, int(a.localSizeBytes), a.maxThreadsPerBlock, family_blocks_per_sm<BITS, V, ROWS, PARAM>(smem)};
}

// The param dtype as a template argument (a branch per scale and bias load costs issue slots and
// splits the loop into basic blocks the scheduler cannot interleave): qmv, and qmv_streamed up
// to V = 4. Wider passes read it at run time (they are issue-bound on their V FFMAs anyway, and
// it keeps the build small).
template <typename F>
void dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: f.template operator()<int(DType::f32)>(); break;
    case DType::f16: f.template operator()<int(DType::f16)>(); break;
    default: f.template operator()<int(DType::bf16)>(); break;
  }
}

// Runtime bits to the template.
template <typename F>
void dispatch_bits(int bits, F&& f) {
  dispatch_value<2, 3, 4, 5, 6, 8>(bits, "bits", std::forward<F>(f));
}

}  // namespace exactq::cuda_detail
