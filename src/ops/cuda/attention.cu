// Attention on CUDA, split over the key chunks (split-KV; order/attention.h, docs/op-contract.md
// §4), in one kernel. A block of 256 threads per (query row, kv head, group of up to 8 of the
// query heads that read it, chunk slot). Slot k of a row is absolute chunk lo/64 + k (lo: the
// row's first visible key), clipped to [lo, p]; a block whose slot is past the row's last chunk
// exits at once. The heads of a group share the chunk's K and V rows, so a chunk is read once per
// group. Each block:
//
//   loads    the chunk's K and V rows into shared memory by cp.async (consecutive threads on
//            consecutive 16-byte pieces of a row: whole sectors), K's rows padded by 16 bytes so
//            that a warp's reads of 32 rows are conflict-free, and the scaled queries: the chunk's
//            bytes travel in one round trip;
//   scores   a thread per (head, key): the eight partials, one 16-byte step of the key row feeding
//            all eight, then the xor butterfly 4, 2, 1 of lane 0;
//   m_c, l_c a warp per head: lane l scans keys 2l, 2l + 1, then the lanes in order (the earliest
//            of equal values kept, as the sequential scan keeps it); lane l makes e_j of its keys;
//            lane 0 sums them over j increasing;
//   o_c      a thread per (head, pair of dims): two fma chains over j increasing;
//
// and writes (m_c, l_c) and o_c[d] into the workspace. The last block of a (row, kv head, group)
// to finish then folds the group's chunks in increasing c and stores the output rows
// (attention_fold.cuh). Which block is last is decided by an arrival counter per (row, kv head,
// group): the counter elects a block and carries no value, so no byte depends on the order of
// arrival, and the elected block leaves it at zero for the next call.
//
// Workspace: for each (row, head) a fixed number of slots per call (the visible chunk count of a
// row at max_position, an upper bound for every row: rows of a verify block see different numbers
// of chunks; the grid depends on max_position alone, so a captured step serves every position up
// to it), each slot holding (m_c, l_c) and o_c[d]. The caller owns it and the counters; a call
// whose workspace cannot hold all its rows runs them in slices of rows. Rows are independent, so
// no byte depends on M, on a row's place in the block or on the slicing.
#include <limits>
#include <stdexcept>
#include <string>

#include "ops/cuda/attention_fold.cuh"
#include "ops/cuda/attention_tile.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "order/attention.h"
#include "support/dispatch.h"

namespace exactq::cuda_detail {

namespace {

constexpr int kChunk = order::kAttentionChunk;
constexpr int kBlock = 256, kBlockWarps = kBlock / 32;
constexpr int kGroupHeads = 8;                 // query heads per block, at most (one warp each)
constexpr int kWeightStride = kChunk + 4;      // e_j rows in shared memory (16-byte aligned)
constexpr int kMaxPairs = (kGroupHeads * order::kMaxHeadDim / 2 + kBlock - 1) / kBlock;  // per thread
constexpr int kFewPairs = 2;  // pairs per thread of the common shapes (a group's heads times d/2 <= 512)
constexpr std::size_t kTileCap = 64 * 1024;    // V bytes staged at once
constexpr std::size_t kKeyTileCap = 72 * 1024;  // K bytes staged at once (a chunk of 512 bf16 dims)
constexpr int kKeyPad = 16;                     // bytes after each staged key row: conflict-free 16-byte reads
constexpr std::int64_t kMaxGrid = std::numeric_limits<int>::max();  // blocks in a 1-D grid
static_assert(kGroupHeads <= kBlockWarps, "the fold keeps head h's running max in warp h");

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

std::int64_t head_groups(const AttentionShape& s) { return (s.heads / s.kv_heads + kGroupHeads - 1) / kGroupHeads; }

// Workspace bytes per row: (m_c, l_c) and o_c[d] as f32 for every (head, slot).
std::size_t row_bytes(const AttentionShape& s, std::int64_t slots) {
  return std::size_t(s.heads) * std::size_t(slots) * (sizeof(float2) + std::size_t(s.head_dim) * sizeof(float));
}

// Shared memory of a block: the V tile, the scaled queries, e_j, and the fold's tile of factors.
struct Layout {
  std::size_t tile_rows, key_rows, tile, keys, q, weights, fold, total;
};
__host__ __device__ inline Layout layout(int group_heads, int d, std::size_t e) {
  Layout l{};
  const std::size_t row = std::size_t(d) * e, key_row = row + kKeyPad;
  l.tile_rows = kTileCap / row < std::size_t(kChunk) ? kTileCap / row : std::size_t(kChunk);
  l.key_rows = kKeyTileCap / key_row < std::size_t(kChunk) ? kKeyTileCap / key_row : std::size_t(kChunk);
  l.tile = 0;
  l.keys = l.tile + l.tile_rows * row;
  l.q = l.keys + l.key_rows * key_row;
  l.weights = l.q + std::size_t(group_heads) * std::size_t(d) * sizeof(float);
  l.fold = l.weights + std::size_t(group_heads) * kWeightStride * sizeof(float);
  l.total = l.fold + fold_shared_bytes(kGroupHeads);
  return l;
}

template <DType T, int PAIRS>
__global__ void __launch_bounds__(kBlock) attention_kernel(const std::byte* q, const std::byte* keys, const std::byte* values,
                                                           const std::int32_t* positions, const std::int32_t* cache_at,
                                                           std::int64_t cache_rows, std::int64_t max_position, int heads,
                                                           int kv_heads, int d, float scale, std::int64_t window,
                                                           int slots, float2* stats, float* o_c, unsigned* counters,
                                                           std::byte* out) {
  extern __shared__ __align__(16) std::byte shared[];
  __shared__ bool last_block;
  step_prologue();
  constexpr std::size_t e = dtype_size(T);
  const int group = heads / kv_heads, groups = (group + kGroupHeads - 1) / kGroupHeads;
  const unsigned index = blockIdx.x, slot = index % unsigned(slots), rest = index / unsigned(slots);
  const int head_group = int(rest % unsigned(groups)), kv = int(rest / unsigned(groups) % unsigned(kv_heads));
  const std::int64_t row = rest / unsigned(groups) / unsigned(kv_heads), position = clamped(positions[row], max_position);
  const std::int64_t lo = order::attention_first_visible(position, window), c = lo / kChunk + slot;
  const int chunks = int(position / kChunk - lo / kChunk + 1);
  if (int(slot) >= chunks) return;  // past the row's last chunk: the whole block leaves
  const std::int64_t first = c * kChunk > lo ? c * kChunk : lo;
  const std::int64_t last = (c + 1) * kChunk - 1 < position ? (c + 1) * kChunk - 1 : position;
  const int count = int(last - first + 1), tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int head0 = kv * group + head_group * kGroupHeads;
  const int nh = group - head_group * kGroupHeads < kGroupHeads ? group - head_group * kGroupHeads : kGroupHeads;
  const Layout L = layout(nh, d, e);
  std::byte* tile = shared + L.tile;
  float* q_scaled = reinterpret_cast<float*>(shared + L.q);
  float* weights = reinterpret_cast<float*>(shared + L.weights);
  const std::size_t stride = std::size_t(kv_heads) * std::size_t(d) * e;  // bytes between positions
  const int row_bytes = d * int(e), tile_rows = int(L.tile_rows), pairs = d / 2;
  // The row's sequence starts at cache row cache_at[row] - position, kept inside the cache.
  std::int64_t base = cache_at[row] - position;
  base = base < cache_rows - 1 - position ? base : cache_rows - 1 - position;
  base = base > 0 ? base : 0;
  const std::byte* k_rows = keys + std::size_t(kv) * std::size_t(d) * e + std::size_t(base + first) * stride;
  const std::byte* v_rows = values + std::size_t(kv) * std::size_t(d) * e + std::size_t(base + first) * stride;
  // The chunk's K and V rows travel together, in one round trip: K first (its own commit group),
  // then V, which lands during the scores.
  std::byte* key_tile = shared + L.keys;
  const int key_rows = int(L.key_rows), key_pitch = row_bytes + kKeyPad;
  stage_rows<kBlock>(key_tile, key_pitch, k_rows, stride, count < key_rows ? count : key_rows, row_bytes);
  stage_rows<kBlock>(tile, row_bytes, v_rows, stride, count < tile_rows ? count : tile_rows, row_bytes);
  for (int x = tid; x < nh * d; x += kBlock)
    q_scaled[x] = order::mul(load_f32(q, std::size_t((row * heads + head0) * d + x), T), scale);
  for (int j0 = 0; j0 < count; j0 += key_rows) {  // one tile of keys but at d = 512 in f32
    const int rows = count - j0 < key_rows ? count - j0 : key_rows;
    if (j0 == 0) {
      wait_async_copies<1>();  // the keys (the values may still be on their way)
    } else {
      __syncthreads();  // the last tile's keys are read
      stage_rows<kBlock>(key_tile, key_pitch, k_rows + std::size_t(j0) * stride, stride, rows, row_bytes);
      wait_async_copies<0>();
    }
    __syncthreads();
    for (int p = tid; p < nh * rows; p += kBlock) {  // a warp's threads on consecutive keys of one head
      const int h = p / rows, j = p % rows;
      weights[h * kWeightStride + j0 + j] = score<T>(q_scaled + h * d, key_tile + std::size_t(j) * key_pitch, d);
    }
  }
  __syncthreads();
  // Head h's record: (row, head0 + h, slot); its o_c starts at record * d.
  const std::size_t record0 = (std::size_t(row) * heads + head0) * std::size_t(slots) + slot;
  for (int h = warp; h < nh; h += kBlockWarps) {
    float* w = weights + h * kWeightStride;
    float m = negative_infinity();
    for (int j = 2 * lane; j < 2 * lane + 2; ++j)
      if (j < count) m = order::attention_max_step(m, w[j]);
    m = warp_max_in_order(m);
    for (int j = 2 * lane; j < 2 * lane + 2; ++j)
      if (j < count) w[j] = order::attention_weight(w[j], m);
    __syncwarp();
    if (lane == 0) {  // l_c over j increasing, four e_j a load
      float l = 0.0f;
      int j = 0;
#pragma unroll 4
      for (; j + 4 <= count; j += 4) {
        const float4 e4 = *reinterpret_cast<const float4*>(w + j);
        l = order::add(order::add(order::add(order::add(l, e4.x), e4.y), e4.z), e4.w);
      }
      for (; j < count; ++j) l = order::add(l, w[j]);
      stats[record0 + std::size_t(h) * slots] = make_float2(m, l);
    }
  }

  // o_c: thread x takes the pair (h, p) = (x / pairs, x % pairs), the keys in increasing j; a
  // thread has at most PAIRS pairs.
  float acc[PAIRS][2];
#pragma unroll
  for (int u = 0; u < PAIRS; ++u) acc[u][0] = acc[u][1] = 0.0f;
  for (int j0 = 0; j0 < count; j0 += tile_rows) {
    const int rows = count - j0 < tile_rows ? count - j0 : tile_rows;
    wait_async_copies<0>();
    __syncthreads();  // the tile and every head's e_j are in place
#pragma unroll
    for (int u = 0; u < PAIRS; ++u) {
      const int x = tid + u * kBlock, h = x / pairs, p = x % pairs;
      if (x >= nh * pairs) break;
      const float* w = weights + h * kWeightStride + j0;
#pragma unroll 8
      for (int j = 0; j < rows; ++j) {
        const float2 v = load_pair<T>(tile + std::size_t(j) * std::size_t(row_bytes), p);
        acc[u][0] = order::fma(w[j], v.x, acc[u][0]);
        acc[u][1] = order::fma(w[j], v.y, acc[u][1]);
      }
    }
    __syncthreads();  // the tile is read: the next one may land in it
    if (j0 + tile_rows < count) {
      const int next = count - j0 - tile_rows;
      stage_rows<kBlock>(tile, row_bytes, v_rows + std::size_t(j0 + tile_rows) * stride, stride, next < tile_rows ? next : tile_rows,
                 row_bytes);
    }
  }
#pragma unroll
  for (int u = 0; u < PAIRS; ++u) {
    const int x = tid + u * kBlock, h = x / pairs, p = x % pairs;
    if (x >= nh * pairs) break;
    reinterpret_cast<float2*>(o_c + (record0 + std::size_t(h) * slots) * std::size_t(d))[p] = make_float2(acc[u][0], acc[u][1]);
  }

  // The last block of the group to arrive folds: every block's writes are visible before its
  // arrival counts, and the elected block reads them from L2.
  unsigned* counter = counters + (std::size_t(row) * kv_heads + kv) * groups + head_group;
  __threadfence();
  __syncthreads();
  if (tid == 0) last_block = atomicAdd(counter, 1u) + 1u == unsigned(chunks);
  __syncthreads();
  if (!last_block) return;
  __threadfence();

  fold_chunks<T, PAIRS, kBlock, kGroupHeads>(stats, o_c, (std::size_t(row) * heads + head0) * std::size_t(slots), slots, chunks,
                                             nh, d, shared + L.fold, out, (std::size_t(row) * heads + head0) * std::size_t(d));
  if (tid == 0) *counter = 0u;  // ready for the next call
}

}  // namespace

std::size_t attention_workspace_bytes(std::int64_t m, std::int64_t max_position, const AttentionShape& s) {
  const std::size_t per_row = row_bytes(s, slots_for(max_position, s.window));
  const std::size_t rows = kAttentionWorkspaceCap / per_row;
  return per_row * (rows < 1 ? 1 : rows < std::size_t(m) ? rows : std::size_t(m));
}

std::size_t attention_counter_count(std::int64_t m, const AttentionShape& s) {
  return std::size_t(m) * std::size_t(s.kv_heads) * std::size_t(head_groups(s));
}

void launch_attention(const void* q, const void* keys, const void* values, std::int64_t m,
                      const std::int32_t* positions, const std::int32_t* cache_at, std::int64_t cache_rows,
                      std::int64_t max_position, const AttentionShape& s, DType t, void* out, void* workspace,
                      std::size_t workspace_bytes, unsigned* counters, cudaStream_t stream) {
  const std::int64_t slots = slots_for(max_position, s.window), groups = head_groups(s);
  const std::size_t per_row = row_bytes(s, slots), e = dtype_size(t), row_elements = std::size_t(s.heads * s.head_dim);
  std::int64_t rows = std::int64_t(workspace_bytes / per_row);  // rows per slice
  if (rows > m) rows = m;
  if (rows > kMaxGrid / (s.kv_heads * groups * slots)) rows = kMaxGrid / (s.kv_heads * groups * slots);
  if (rows < 1)
    throw std::invalid_argument("[exactq] attention: a workspace of " + std::to_string(workspace_bytes) +
                                " bytes cannot hold one row's " + std::to_string(per_row) +
                                " bytes, or one row needs more blocks than a grid holds");
  if (reinterpret_cast<std::uintptr_t>(keys) % 16 != 0 || reinterpret_cast<std::uintptr_t>(values) % 16 != 0)
    throw std::invalid_argument("[exactq] attention: the key and value caches must be 16-byte aligned");
  const int nh = int(s.heads / s.kv_heads < kGroupHeads ? s.heads / s.kv_heads : kGroupHeads);
  const std::size_t shared = layout(nh, int(s.head_dim), e).total;
  const auto* q_bytes = static_cast<const std::byte*>(q);
  auto* out_bytes = static_cast<std::byte*>(out);
  for (std::int64_t r0 = 0; r0 < m; r0 += rows) {
    const std::int64_t n = m - r0 < rows ? m - r0 : rows;
    auto* stats = static_cast<float2*>(workspace);
    auto* o_c = reinterpret_cast<float*>(stats + std::size_t(n * s.heads * slots));
    dispatch_value<int(DType::f32), int(DType::f16), int(DType::bf16)>(int(t), "dtype", [&]<int D>() {
      const auto kernel = nh * s.head_dim / 2 <= kFewPairs * kBlock ? attention_kernel<DType(D), kFewPairs>
                                                                     : attention_kernel<DType(D), kMaxPairs>;
      if (shared > 48 * 1024)
        EXACTQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
      launch_step(kernel, dim3(unsigned(n * s.kv_heads * groups * slots)), kBlock, shared, stream,
                  q_bytes + std::size_t(r0) * row_elements * e, static_cast<const std::byte*>(keys),
                  static_cast<const std::byte*>(values), positions + r0, cache_at + r0, cache_rows, max_position,
                  int(s.heads), int(s.kv_heads), int(s.head_dim), s.scale, s.window, int(slots), stats, o_c, counters,
                  out_bytes + std::size_t(r0) * row_elements * e);
    });
    EXACTQ_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace exactq::cuda_detail
