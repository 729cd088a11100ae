// The qmv-family kernel: qmv's order (docs/design.md §3) for V vectors per pass over the weights.
// qmv is V = 1 with one grid row per vector (every vector re-reads the weights: the narrow arm);
// qmv_streamed is V = 2..8 with one grid row per tile of V vectors. The arithmetic per row and
// vector is the same function of (x, W) for every V: each vector's bits are qmv's.
//
// Layout: 8 warps per block, ROWS output rows per warp (how rows are spread over warps does not
// enter any row's order). Lane l takes chunks l, l+32, ... of K in increasing order, exactly the
// CPU mirror's lane map. K is walked in tiles staged in shared memory as f32 (with each chunk's
// activation sum S), so activations are read from L2 once per block, not once per warp.
#pragma once

#include "cuda/common.cuh"

namespace exactq::cuda_detail {

struct QmvParams {
  const std::uint8_t* packed;
  const void* scales;
  const void* biases;
  const void* x;
  void* y;
  std::int64_t n, k, m;
  std::int64_t vector_offset;  // first vector of this launch
  int group;
  int tile_values;  // K tile staged at a time (multiple of 1024)
  DType dtype;
};

// Tuning knobs for experiments (-D on the nvcc line). The defaults are the measured best of
// docs/benchmark_results/2026-12-02-h200-step1.md: occupancy (3-4 blocks of 8 warps per SM)
// beat deeper per-warp batches at 128 registers and 2 blocks; at qmv's 2 rows per warp, 3
// blocks (80 registers) avoid the spills that 4 blocks (64 registers) cause.
#ifndef EXACTQ_FAMILY_BATCH
#define EXACTQ_FAMILY_BATCH 1
#endif
#ifndef EXACTQ_FAMILY_MIN_BLOCKS
#define EXACTQ_FAMILY_MIN_BLOCKS 3
#endif

// Chunks per row in one batch of loads (two batches are in flight while one is computed):
// enough to cover HBM latency, few enough that the weights stay in registers.
template <int BITS, int V, int ROWS>
inline constexpr int kChunksInFlight = V == 1 ? EXACTQ_FAMILY_BATCH : 1;

// One chunk of ROWS rows against V vectors: the order of docs/design.md §3, per (row, vector).
template <int BITS, int V, int ROWS>
__device__ __forceinline__ void chunk_step(const std::uint32_t (&w)[ROWS][BITS], const float (&scale)[ROWS],
                                           const float (&bias)[ROWS], const float* xs, int tile_values,
                                           const float* sums, int tile_chunks, int c, float (&total)[ROWS][V]) {
  float acc[ROWS][V];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int v = 0; v < V; ++v) acc[r][v] = 0.0f;
  // Four codes at a time: the activations of a piece are read once for all rows.
  [&]<int... J>(std::integer_sequence<int, J...>) {
    (
        [&] {
          constexpr int j = J;
          float4 xv[V];
#pragma unroll
          for (int v = 0; v < V; ++v)
            xv[v] = *reinterpret_cast<const float4*>(xs + v * tile_values + c * kChunkValues +
                                                     (4 * j + 4 * (c & 7)) % kChunkValues);
#pragma unroll
          for (int r = 0; r < ROWS; ++r) {
            float q[4];
            decode_codes<BITS, 4 * j, 4>(w[r], q);
#pragma unroll
            for (int v = 0; v < V; ++v) {
              acc[r][v] = order::code_step(acc[r][v], xv[v].x, q[0]);
              acc[r][v] = order::code_step(acc[r][v], xv[v].y, q[1]);
              acc[r][v] = order::code_step(acc[r][v], xv[v].z, q[2]);
              acc[r][v] = order::code_step(acc[r][v], xv[v].w, q[3]);
            }
          }
        }(),
        ...);
  }(std::make_integer_sequence<int, kChunkValues / 4>{});
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int v = 0; v < V; ++v)
      total[r][v] = order::lane_add(total[r][v], order::chunk_fold(scale[r], bias[r], acc[r][v], sums[v * tile_chunks + c]));
}

template <int BITS, int V, int ROWS>
__global__ void __launch_bounds__(kThreads, V >= 6 ? 1 : (V == 1 ? EXACTQ_FAMILY_MIN_BLOCKS : 2)) qmv_family_kernel(const QmvParams p) {
  constexpr int U = kChunksInFlight<BITS, V, ROWS>;
  extern __shared__ float4 shared_raw[];
  float* xs = reinterpret_cast<float*>(shared_raw);  // [V][tile_values], chunk-swizzled
  float* sums = xs + V * p.tile_values;              // [V][tile_values / 32]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile_chunks = p.tile_values / kChunkValues;
  const std::int64_t row_bytes = p.k * BITS / 8;
  const std::int64_t groups = p.k / p.group;
  // Chunks per group is 1, 2 or 4: a shift, never a 64-bit division in the inner loop.
  const int group_shift = p.group == 32 ? 0 : (p.group == 64 ? 1 : 2);
  const std::int64_t v0 = p.vector_offset + std::int64_t(blockIdx.y) * V;
  const int tiles = ceil_div(p.k, p.tile_values);
  const std::int64_t row_blocks = (p.n + kWarps * ROWS - 1) / (kWarps * ROWS);

  auto stage = [&](int tile) {
    const std::int64_t first = std::int64_t(tile) * p.tile_values;
    const int count = int(p.k - first < p.tile_values ? p.k - first : p.tile_values);
    __syncthreads();  // everyone is done with the previous tile
    stage_activations<V>(xs, p.tile_values, p.x, p.dtype, p.k, v0, first, count, 5);  // chunks of 2^5
    __syncthreads();
    for (int t = threadIdx.x; t < V * (count / kChunkValues); t += blockDim.x) {
      const int v = t / (count / kChunkValues), c = t - v * (count / kChunkValues);
      const float* chunk = xs + v * p.tile_values + c * kChunkValues;
      float s = 0.0f;  // order::chunk_x_sum, read through the swizzle
      for (int i = 0; i < kChunkValues; ++i) s = order::sum_step(s, chunk[(i + 4 * (c & 7)) % kChunkValues]);
      sums[v * tile_chunks + c] = s;
    }
    __syncthreads();
  };
  if (tiles == 1) stage(0);

  for (std::int64_t rb = blockIdx.x; rb < row_blocks; rb += gridDim.x) {
    const std::int64_t row0 = (rb * kWarps + warp) * ROWS;
    const std::uint8_t* wrow[ROWS];
    std::int64_t prow[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const std::int64_t row = row0 + r < p.n ? row0 + r : p.n - 1;  // rows past N read row N-1, never written
      wrow[r] = p.packed + row * row_bytes;
      prow[r] = row * groups;
    }
    float total[ROWS][V];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int v = 0; v < V; ++v) total[r][v] = 0.0f;

    for (int tile = 0; tile < tiles; ++tile) {
      if (tiles > 1) stage(tile);
      const std::int64_t chunk0 = std::int64_t(tile) * tile_chunks;
      const int count = int((p.k / kChunkValues - chunk0) < tile_chunks ? (p.k / kChunkValues - chunk0) : tile_chunks);
      // Software pipeline: the loads of the next batch of U chunks (per row) are issued before
      // the current batch is computed, so every lane always has loads in flight. Two register
      // buffers, used alternately; the arithmetic order is untouched (chunks still go in
      // increasing order per lane).
      std::uint32_t wa[U][ROWS][BITS], wb[U][ROWS][BITS];
      float sa[U][ROWS], ba[U][ROWS], sb[U][ROWS], bb[U][ROWS];
      // Per-row pointers that walk with the lane's chunks (lane, lane+32, ...): one add per row
      // and batch instead of 64-bit index arithmetic per load.
      const int param_bytes = int(dtype_size(p.dtype));
      const int param_step = (32 >> group_shift) * param_bytes;  // 32 chunks further along K
      const std::uint8_t* wp[ROWS];
      const unsigned char* sp[ROWS];
      const unsigned char* bp[ROWS];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        const std::int64_t first = chunk0 + lane;
        wp[r] = wrow[r] + first * (4 * BITS);
        sp[r] = static_cast<const unsigned char*>(p.scales) + (prow[r] + (first >> group_shift)) * param_bytes;
        bp[r] = static_cast<const unsigned char*>(p.biases) + (prow[r] + (first >> group_shift)) * param_bytes;
      }
      auto load_batch = [&](int c0, std::uint32_t (&w)[U][ROWS][BITS], float (&sc)[U][ROWS], float (&bi)[U][ROWS]) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (c0 + 32 * u < count) {
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
              load_chunk<BITS>(wp[r] + u * (32 * 4 * BITS), w[u][r]);
              sc[u][r] = group_param_at(sp[r] + u * param_step, p.dtype);
              bi[u][r] = group_param_at(bp[r] + u * param_step, p.dtype);
            }
          }
        }
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
          wp[r] += U * (32 * 4 * BITS);
          sp[r] += U * param_step;
          bp[r] += U * param_step;
        }
      };
      auto compute_batch = [&](int c0, const std::uint32_t (&w)[U][ROWS][BITS], const float (&sc)[U][ROWS],
                               const float (&bi)[U][ROWS]) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int c = c0 + 32 * u;
          if (c < count) chunk_step<BITS, V, ROWS>(w[u], sc[u], bi[u], xs, p.tile_values, sums, tile_chunks, c, total);
        }
      };
      constexpr int kBatch = 32 * U;
      int c0 = lane;
      if (c0 < count) load_batch(c0, wa, sa, ba);
      while (c0 < count) {
        if (c0 + kBatch < count) load_batch(c0 + kBatch, wb, sb, bb);
        compute_batch(c0, wa, sa, ba);
        c0 += kBatch;
        if (c0 >= count) break;
        if (c0 + kBatch < count) load_batch(c0 + kBatch, wa, sa, ba);
        compute_batch(c0, wb, sb, bb);
        c0 += kBatch;
      }
    }

#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int v = 0; v < V; ++v) {
        float t = total[r][v];
#pragma unroll
        for (int step = 0; step < order::kButterflySteps; ++step)
          t = order::butterfly_step(t, __shfl_xor_sync(0xffffffffu, t, order::butterfly_mask(step)));
        total[r][v] = t;
      }
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
        if (row0 + r < p.n)
#pragma unroll
          for (int v = 0; v < V; ++v) store_f32(p.y, std::size_t((v0 + v) * p.n + row0 + r), p.dtype, total[r][v]);
    }
  }
}

}  // namespace exactq::cuda_detail
