// Attention on CUDA, split over the key chunks (split-KV; order/attention.h, docs/op-contract.md
// §4). Each call runs two kernels on its stream, with a workspace of f32 chunk statistics between
// them:
//
//   attention_chunks  a block of 256 threads per (query row, kv head, group of up to 8 of the query
//                     heads that read it, chunk slot). Slot k of a row is absolute chunk lo/64 + k
//                     (lo: the row's first visible key), clipped to [lo, p]; a block whose slot is
//                     past the row's last chunk exits at once. The heads share the chunk's K and V
//                     rows, so a chunk is read once per group. The block writes each head's
//                     (m_c, l_c) and o_c[d] into the workspace:
//     scores   a thread per (head, key), a warp on consecutive keys of one head: the eight partials
//              in registers, each 16-byte load of the key row (8 dims) one step of all eight,
//              then the xor butterfly 4, 2, 1 of lane 0 written out;
//     max      a warp per head: lane l scans keys 2l, 2l + 1, then the lanes in order (the
//              earliest of equal values kept, as the sequential scan keeps it); e_j a thread
//              per (head, key); l_c thread h for head h, over j increasing;
//     o_c      the chunk's V rows staged into shared memory by cp.async (issued before the
//              scores, so they land meanwhile; in 16 KB tiles), then a thread per (dim, head
//              share): an fma chain per head over j increasing (one load of v_j,i feeds its heads).
//   attention_fold    a block of 256 threads per (query row, head), folding the row's chunks in
//                     increasing c from (-inf, +0, +0), then storing out_i = div(o_i, l). Per tile
//                     of up to 256 chunks: thread 0 runs the running max over the tile (the m
//                     before each chunk), a thread per chunk computes that chunk's fold factors
//                     with attention_fold_factors (the values a sequential fold computes), and a
//                     thread per dim folds o_i, and its own copy of l, chunk by chunk (8 chunks'
//                     o_c loaded before their folds, so their latencies overlap).
//
// Workspace: for each (row, head) a fixed number of slots per call (the visible chunk count of a
// row at max_position, an upper bound for every row: rows of a verify block see different numbers
// of chunks; the grid depends on max_position alone, so a captured step serves every position up
// to it), each slot holding
// (m_c, l_c) and o_c[d]. The caller owns it (the backend's scratch, grown on demand); a call whose
// workspace cannot hold all its rows runs them in slices of rows, one kernel pair per slice. Rows
// are independent, so no byte depends on M, on a row's place in the block or on the slicing.
// No reduction uses atomics.
#include <limits>
#include <stdexcept>
#include <string>

#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "order/attention.h"
#include "support/dispatch.h"

namespace exactq::cuda_detail {

namespace {

constexpr int kChunk = order::kAttentionChunk;
constexpr int kBlock = 256;
constexpr int kDimsPerThread = (order::kMaxHeadDim + kBlock - 1) / kBlock;
constexpr int kGroupHeads = 8;                          // query heads per chunk block, at most
constexpr int kQStride = order::kMaxHeadDim + 8;        // q' rows in shared memory, padded
constexpr int kWeightStride = kChunk + 1;               // score rows in shared memory, padded
constexpr int kFoldBatch = 8;                           // chunks' o_c loaded before their folds
constexpr int kFoldTile = kBlock;                       // chunks whose fold factors are made at once
constexpr std::int64_t kMaxGrid = std::numeric_limits<int>::max();  // blocks in a 1-D grid

EXACTQ_HD float negative_infinity() { return float_from_bits(0xff800000u); }

// A row's position, clamped into [0, max_position] (the caller checked it on the host; a value out
// of range must still read no memory outside the cache).
__device__ __forceinline__ std::int64_t clamped(std::int32_t position, std::int64_t max_position) {
  return position < 0 ? 0 : position > max_position ? max_position : position;
}

// The slots of a call whose last row is at `last_position`: at most last/64 + 1 chunks without a
// window; with one, W visible positions span at most ceil((W - 1)/64) + 1 chunks.
std::int64_t slots_for(std::int64_t last_position, std::int64_t window) {
  const std::int64_t all = last_position / kChunk + 1;
  if (window <= 0) return all;
  const std::int64_t windowed = (window + kChunk - 2) / kChunk + 1;
  return windowed < all ? windowed : all;
}

std::int64_t head_groups(const AttentionShape& s) {
  return (s.heads / s.kv_heads + kGroupHeads - 1) / kGroupHeads;
}

// Workspace bytes per row: (m_c, l_c) and o_c[d] as f32 for every (head, slot).
std::size_t row_bytes(const AttentionShape& s, std::int64_t slots) {
  return std::size_t(s.heads) * std::size_t(slots) * (sizeof(float2) + std::size_t(s.head_dim) * sizeof(float));
}

// Eight consecutive stored values (16 bytes of bf16 or f16, 32 of f32) widened: one step of the
// score's eight partials.
template <DType T>
__device__ __forceinline__ void load8(const std::byte* p, float (&x)[8]) {
  const uint4 a = *reinterpret_cast<const uint4*>(p);
  if constexpr (T == DType::f32) {
    const uint4 b = *reinterpret_cast<const uint4*>(p + 16);
    const unsigned w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int u = 0; u < 8; ++u) x[u] = __uint_as_float(w[u]);
  } else {
#pragma unroll
    for (int u = 0; u < 8; ++u) x[u] = load_f32(&a, std::size_t(u), T);
  }
}

// s_j for key row `key` and the scaled query row `q`: partial u takes dims u, u + 8, ... (one
// 16-byte step feeds all eight), then the xor butterfly 4, 2, 1 of lane 0, written out.
template <DType T>
__device__ __forceinline__ float score(const float* q, const std::byte* key, int d) {
  float part[order::kDotPartials];
#pragma unroll
  for (int u = 0; u < order::kDotPartials; ++u) part[u] = 0.0f;
#pragma unroll 4
  for (int i = 0; i < d; i += order::kDotPartials) {
    float k[8];
    load8<T>(key + std::size_t(i) * dtype_size(T), k);
#pragma unroll
    for (int u = 0; u < order::kDotPartials; ++u) part[u] = order::attention_dot_step(part[u], q[i + u], k[u]);
  }
#pragma unroll
  for (int step = 0; step < order::kDotButterflySteps; ++step) {
    const int mask = order::dot_butterfly_mask(step);
    float next[order::kDotPartials];
#pragma unroll
    for (int u = 0; u < order::kDotPartials; ++u) next[u] = order::attention_dot_butterfly_step(part[u], part[u ^ mask]);
#pragma unroll
    for (int u = 0; u < order::kDotPartials; ++u) part[u] = next[u];
  }
  return part[0];
}

// The largest of a warp's values, the earliest of equal ones as a scan in lane order keeps it:
// each step keeps the upper half's value only where it is strictly larger.
__device__ __forceinline__ float warp_max_in_order(float m) {
  const int lane = threadIdx.x % 32;
  for (int mask = 1; mask < 32; mask *= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, m, mask);
    const bool upper = lane & mask;
    m = order::attention_max_step(upper ? other : m, upper ? m : other);
  }
  return m;
}

// V rows of the chunk, staged into shared memory a tile of kTileBytes at a time (16-byte cp.async).
constexpr int kTileBytes = 16 * 1024;
__device__ __forceinline__ void stage_values(std::byte* tile, const std::byte* v, std::size_t stride, int rows,
                                             int row_bytes) {
  const int pieces = row_bytes / 16;
  for (int x = threadIdx.x; x < rows * pieces; x += kBlock)
    copy_async_if<16>(true, tile + (x / pieces) * row_bytes + (x % pieces) * 16,
                      v + std::size_t(x / pieces) * stride + std::size_t(x % pieces) * 16);
  commit_async_copies();
}

template <DType T>
__global__ void __launch_bounds__(kBlock) attention_chunks(const std::byte* q, const std::byte* keys,
                                                           const std::byte* values, const std::int32_t* positions,
                                                           std::int64_t max_position, std::int64_t heads, std::int64_t kv_heads, int d,
                                                           float scale, std::int64_t window, std::int64_t slots,
                                                           float2* stats, float* o_c) {
  __shared__ __align__(16) float q_scaled[kGroupHeads * kQStride];
  __shared__ float weights[kGroupHeads * kWeightStride];  // s_j, then e_j, of head h at [h][j]
  __shared__ float chunk_max[kGroupHeads];
  __shared__ __align__(16) std::byte tile[kTileBytes];
  step_prologue();
  constexpr std::size_t e = dtype_size(T);
  const std::int64_t group = heads / kv_heads, groups = (group + kGroupHeads - 1) / kGroupHeads;
  std::int64_t index = blockIdx.x;
  const std::int64_t slot = index % slots;
  index /= slots;
  const std::int64_t head_group = index % groups;
  index /= groups;
  const std::int64_t kv = index % kv_heads, row = index / kv_heads, position = clamped(positions[row], max_position);
  const std::int64_t lo = order::attention_first_visible(position, window), c = lo / kChunk + slot;
  if (c > position / kChunk) return;  // past the row's last chunk: the whole block leaves
  const std::int64_t first = c * kChunk > lo ? c * kChunk : lo;
  const std::int64_t last = (c + 1) * kChunk - 1 < position ? (c + 1) * kChunk - 1 : position;
  const int count = int(last - first + 1), tid = threadIdx.x;
  const std::int64_t head0 = kv * group + head_group * kGroupHeads;
  const int nh = int(group - head_group * kGroupHeads < kGroupHeads ? group - head_group * kGroupHeads : kGroupHeads);
  const std::size_t stride = std::size_t(kv_heads * d) * e;  // bytes between positions
  const int row_bytes = d * int(e), tile_rows = kTileBytes / row_bytes;
  const std::byte* k_rows = keys + std::size_t(kv * d) * e + std::size_t(first) * stride;
  const std::byte* v_rows = values + std::size_t(kv * d) * e + std::size_t(first) * stride;
  stage_values(tile, v_rows, stride, count < tile_rows ? count : tile_rows, row_bytes);  // lands during the scores
  for (int x = tid; x < nh * d; x += kBlock)
    q_scaled[(x / d) * kQStride + x % d] = order::mul(load_f32(q, std::size_t((row * heads + head0) * d + x), T), scale);
  __syncthreads();

  // Scores: a thread per (head, key), a warp's threads on consecutive keys of one head.
  for (int p = tid; p < nh * count; p += kBlock) {
    const int h = p / count, j = p % count;
    weights[h * kWeightStride + j] = score<T>(q_scaled + h * kQStride, k_rows + std::size_t(j) * stride, d);
  }
  __syncthreads();
  const int warp = tid / 32, lane = tid % 32;
  if (warp < nh) {  // m_c: lane l scans keys 2l, 2l + 1, then the warp in lane order
    float m = negative_infinity();
    for (int j = 2 * lane; j < 2 * lane + 2; ++j)
      if (j < count) m = order::attention_max_step(m, weights[warp * kWeightStride + j]);
    m = warp_max_in_order(m);
    if (lane == 0) chunk_max[warp] = m;
  }
  __syncthreads();
  for (int p = tid; p < nh * count; p += kBlock) {
    const int h = p / count, j = p % count;
    weights[h * kWeightStride + j] = order::attention_weight(weights[h * kWeightStride + j], chunk_max[h]);
  }
  __syncthreads();

  // Head h's record: (row, head0 + h, slot); its o_c starts at record * d.
  const std::size_t record0 = std::size_t((row * heads + head0) * slots + slot);
  if (tid < nh) {
    float l = 0.0f;
    for (int j = 0; j < count; ++j) l = order::add(l, weights[tid * kWeightStride + j]);
    stats[record0 + std::size_t(tid) * std::size_t(slots)] = make_float2(chunk_max[tid], l);
  }
  // o_c: thread x takes dim x % d for the heads h = x / d, x / d + spread, ... (spread = kBlock / d
  // thread groups share the heads where d < kBlock), the keys in increasing j across the tiles.
  const int spread = d < kBlock ? kBlock / d : 1;
  float acc[kDimsPerThread][kGroupHeads];
#pragma unroll
  for (int u = 0; u < kDimsPerThread; ++u)
#pragma unroll
    for (int h = 0; h < kGroupHeads; ++h) acc[u][h] = 0.0f;
  for (int j0 = 0; j0 < count; j0 += tile_rows) {
    const int rows = count - j0 < tile_rows ? count - j0 : tile_rows;
    wait_async_copies<0>();
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kDimsPerThread; ++u) {
      const int x = tid + u * kBlock, i = x % d, g = x / d;
      if (x >= d * spread) break;
      for (int j = 0; j < rows; ++j) {
        const float v = load_f32(tile + std::size_t(j) * std::size_t(row_bytes), std::size_t(i), T);
#pragma unroll
        for (int h = 0; h < kGroupHeads; ++h)
          if (h % spread == g && h < nh) acc[u][h] = order::fma(weights[h * kWeightStride + j0 + j], v, acc[u][h]);
      }
    }
    __syncthreads();  // the tile is read: the next one may land in it
    if (j0 + tile_rows < count) {
      const int next = count - j0 - tile_rows;
      stage_values(tile, v_rows + std::size_t(j0 + tile_rows) * stride, stride, next < tile_rows ? next : tile_rows,
                   row_bytes);
    }
  }
#pragma unroll
  for (int u = 0; u < kDimsPerThread; ++u) {
    const int x = tid + u * kBlock, i = x % d, g = x / d;
    if (x >= d * spread) break;
#pragma unroll
    for (int h = 0; h < kGroupHeads; ++h)
      if (h % spread == g && h < nh)
        o_c[(record0 + std::size_t(h) * std::size_t(slots)) * std::size_t(d) + std::size_t(i)] = acc[u][h];
  }
}

template <DType T>
__global__ void __launch_bounds__(kBlock) attention_fold(const float2* stats, const float* o_c, std::int64_t slots,
                                                         const std::int32_t* positions, std::int64_t max_position,
                                                         std::int64_t heads, int d,
                                                         std::int64_t window, std::byte* out) {
  __shared__ order::FoldFactors factors[kFoldTile];
  __shared__ float maxima[kFoldTile], sums[kFoldTile];  // the tile's (m_c, l_c)
  __shared__ float before[kFoldTile];                   // the running max before each chunk of the tile
  __shared__ float running_max;
  step_prologue();
  const int tid = threadIdx.x;
  const std::int64_t r = blockIdx.x, position = clamped(positions[r / heads], max_position);
  const std::int64_t count = position / kChunk - order::attention_first_visible(position, window) / kChunk + 1;
  const float2* s = stats + std::size_t(r * slots);
  const float* oc = o_c + std::size_t(r * slots) * std::size_t(d);
  float o[kDimsPerThread], l = 0.0f;
  for (int u = 0; u < kDimsPerThread; ++u) o[u] = 0.0f;
  if (tid == 0) running_max = negative_infinity();
  for (std::int64_t base = 0; base < count; base += kFoldTile) {
    const int n = int(count - base < kFoldTile ? count - base : kFoldTile);
    __syncthreads();  // running_max is set, and the last tile's factors are read by every thread
    if (tid < n) {
      const float2 chunk = s[base + tid];
      maxima[tid] = chunk.x;
      sums[tid] = chunk.y;
    }
    __syncthreads();
    if (tid == 0) {
      float m = running_max;
      for (int k = 0; k < n; ++k) {
        before[k] = m;
        m = order::attention_max_step(m, maxima[k]);
      }
      running_max = m;
    }
    __syncthreads();
    if (tid < n) factors[tid] = order::attention_fold_factors(before[tid], maxima[tid]);
    __syncthreads();
    for (int k0 = 0; k0 < n; k0 += kFoldBatch) {  // the batch's loads first, then its folds in c order
      float chunk[kFoldBatch][kDimsPerThread];
#pragma unroll
      for (int b = 0; b < kFoldBatch; ++b)
#pragma unroll
        for (int u = 0; u < kDimsPerThread; ++u) {
          const int i = tid + u * kBlock;
          chunk[b][u] = k0 + b < n && i < d ? oc[std::size_t(base + k0 + b) * std::size_t(d) + std::size_t(i)] : 0.0f;
        }
#pragma unroll
      for (int b = 0; b < kFoldBatch; ++b) {
        if (k0 + b >= n) break;
        const order::FoldFactors f = factors[k0 + b];
        l = order::attention_fold_value(l, sums[k0 + b], f);
#pragma unroll
        for (int u = 0; u < kDimsPerThread; ++u)
          if (tid + u * kBlock < d) o[u] = order::attention_fold_value(o[u], chunk[b][u], f);
      }
    }
  }
  for (int u = 0; u < kDimsPerThread; ++u) {
    const int i = tid + u * kBlock;
    if (i < d) store_f32(out, std::size_t(r * d + i), T, order::div(o[u], l));
  }
}

}  // namespace

std::size_t attention_workspace_bytes(std::int64_t m, std::int64_t max_position, const AttentionShape& s) {
  const std::size_t per_row = row_bytes(s, slots_for(max_position, s.window));
  const std::size_t rows = kAttentionWorkspaceCap / per_row;
  return per_row * (rows < 1 ? 1 : rows < std::size_t(m) ? rows : std::size_t(m));
}

void launch_attention(const void* q, const void* keys, const void* values, std::int64_t m,
                      const std::int32_t* positions, std::int64_t max_position, const AttentionShape& s, DType t,
                      void* out, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  const std::int64_t slots = slots_for(max_position, s.window), groups = head_groups(s);
  const std::size_t per_row = row_bytes(s, slots), e = dtype_size(t), row_elements = std::size_t(s.heads * s.head_dim);
  std::int64_t rows = std::int64_t(workspace_bytes / per_row);  // rows per slice
  if (rows > m) rows = m;
  if (rows > kMaxGrid / (s.kv_heads * groups * slots)) rows = kMaxGrid / (s.kv_heads * groups * slots);
  if (rows > kMaxGrid / s.heads) rows = kMaxGrid / s.heads;
  if (rows < 1)
    throw std::invalid_argument("[exactq] attention: a workspace of " + std::to_string(workspace_bytes) +
                                " bytes cannot hold one row's " + std::to_string(per_row) +
                                " bytes, or one row needs more blocks than a grid holds");
  if (reinterpret_cast<std::uintptr_t>(keys) % 16 != 0 || reinterpret_cast<std::uintptr_t>(values) % 16 != 0)
    throw std::invalid_argument("[exactq] attention: the key and value caches must be 16-byte aligned");
  const auto* q_bytes = static_cast<const std::byte*>(q);
  auto* out_bytes = static_cast<std::byte*>(out);
  for (std::int64_t r0 = 0; r0 < m; r0 += rows) {
    const std::int64_t n = m - r0 < rows ? m - r0 : rows;
    auto* stats = static_cast<float2*>(workspace);
    auto* o_c = reinterpret_cast<float*>(stats + std::size_t(n * s.heads * slots));
    dispatch_value<int(DType::f32), int(DType::f16), int(DType::bf16)>(int(t), "dtype", [&]<int D>() {
      launch_step(attention_chunks<DType(D)>, dim3(unsigned(n * s.kv_heads * groups * slots)), kBlock, 0, stream,
          q_bytes + std::size_t(r0) * row_elements * e, static_cast<const std::byte*>(keys),
          static_cast<const std::byte*>(values), positions + r0, max_position, s.heads, s.kv_heads, int(s.head_dim), s.scale,
          s.window, slots, stats, o_c);
      EXACTQ_CUDA_CHECK(cudaGetLastError());
      launch_step(attention_fold<DType(D)>, dim3(unsigned(n * s.heads)), kBlock, 0, stream,
          stats, o_c, slots, positions + r0, max_position, s.heads, int(s.head_dim), s.window,
          out_bytes + std::size_t(r0) * row_elements * e);
    });
    EXACTQ_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace exactq::cuda_detail
