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
//     scores   32 groups of 8 lanes, a (key, head) pair per group at a time: lane u runs partial u
//              (dims u, u + 8, ...; the 8 lanes read 16 consecutive bytes of the key per step),
//              then the xor butterfly 4, 2, 1 inside the group gives lane 0 the order's sum;
//     max, sum thread h for head h, over j increasing, as the order says; e_j a thread per
//              (head, key);
//     o_c      a thread per dim: for each head an fma chain over j increasing (one load of v_j,i
//              feeds every head's chain).
//   attention_fold    a block of 256 threads per (query row, head), folding the row's chunks in
//                     increasing c from (-inf, +0, +0), then storing out_i = div(o_i, l). Per tile
//                     of up to 256 chunks: thread 0 runs the running max over the tile (the m
//                     before each chunk), a thread per chunk computes that chunk's fold factors
//                     with attention_fold_factors (the values a sequential fold computes), and a
//                     thread per dim folds o_i, and its own copy of l, chunk by chunk.
//
// Workspace: for each (row, head) a fixed number of slots per call (an upper bound on any row's
// visible chunk count: rows of a verify block see different numbers of chunks), each slot holding
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

namespace exactq::cuda_detail {

namespace {

constexpr int kChunk = order::kAttentionChunk;
constexpr int kBlock = 256;
constexpr int kGroups = kBlock / order::kDotPartials;  // (key, head) pairs scored at once
constexpr int kDimsPerThread = (order::kMaxHeadDim + kBlock - 1) / kBlock;
constexpr int kGroupHeads = 8;                          // query heads per chunk block, at most
constexpr int kQStride = order::kMaxHeadDim + 8;        // q' rows in shared memory, padded
constexpr int kWeightStride = kChunk + 1;               // score rows in shared memory, padded
constexpr int kValueBatch = 8;                          // value rows loaded before their fmas
constexpr int kFoldTile = kBlock;                       // chunks whose fold factors are made at once
constexpr std::int64_t kMaxGrid = std::numeric_limits<int>::max();  // blocks in a 1-D grid

EXACTQ_HD float negative_infinity() { return float_from_bits(0xff800000u); }

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

// Asks for the 128-byte lines of `rows` rows of `bytes` bytes (`stride` apart) to come to L1 at
// once, so that the loads of the scores and of o_c find them near. It moves no value.
__device__ void prefetch_rows(const std::byte* base, std::size_t stride, int rows, int bytes) {
  const int lines = (bytes + 127) / 128 + 1;  // + 1: a row that starts mid-line ends in one more
  for (int x = threadIdx.x; x < rows * lines; x += kBlock) {
    const int offset = (x % lines) * 128 < bytes ? (x % lines) * 128 : bytes - 1;
    asm volatile("prefetch.global.L1 [%0];" ::"l"(base + std::size_t(x / lines) * stride + std::size_t(offset)));
  }
}

// Workspace bytes per row: (m_c, l_c) and o_c[d] as f32 for every (head, slot).
std::size_t row_bytes(const AttentionShape& s, std::int64_t slots) {
  return std::size_t(s.heads) * std::size_t(slots) * (sizeof(float2) + std::size_t(s.head_dim) * sizeof(float));
}

__global__ void __launch_bounds__(kBlock) attention_chunks(const std::byte* q, const std::byte* keys,
                                                           const std::byte* values, std::int64_t start_position,
                                                           std::int64_t heads, std::int64_t kv_heads, int d,
                                                           float scale, std::int64_t window, DType t,
                                                           std::int64_t slots, float2* stats, float* o_c) {
  __shared__ float q_scaled[kGroupHeads * kQStride];
  __shared__ float weights[kGroupHeads * kWeightStride];  // s_j, then e_j, of head h at [h][j]
  __shared__ float chunk_max[kGroupHeads];
  const std::int64_t group = heads / kv_heads, groups = (group + kGroupHeads - 1) / kGroupHeads;
  std::int64_t index = blockIdx.x;
  const std::int64_t slot = index % slots;
  index /= slots;
  const std::int64_t head_group = index % groups;
  index /= groups;
  const std::int64_t kv = index % kv_heads, row = index / kv_heads, position = start_position + row;
  const std::int64_t lo = order::attention_first_visible(position, window), c = lo / kChunk + slot;
  if (c > position / kChunk) return;  // past the row's last chunk: the whole block leaves
  const std::int64_t first = c * kChunk > lo ? c * kChunk : lo;
  const std::int64_t last = (c + 1) * kChunk - 1 < position ? (c + 1) * kChunk - 1 : position;
  const int count = int(last - first + 1);
  const std::int64_t head0 = kv * group + head_group * kGroupHeads;
  const int nh = int(group - head_group * kGroupHeads < kGroupHeads ? group - head_group * kGroupHeads : kGroupHeads);
  const int tid = threadIdx.x, lane = tid % order::kDotPartials, pair_group = tid / order::kDotPartials;
  const int qs = d + 8;  // q' row stride: the heads of a warp's groups fall in different banks
  const std::size_t row_stride = std::size_t(kv_heads * d), e = dtype_size(t);
  const std::byte* k_base = keys + std::size_t(kv * d) * e;
  const std::byte* v_base = values + std::size_t(kv * d) * e;
  prefetch_rows(k_base + std::size_t(first) * row_stride * e, row_stride * e, count, d * int(e));
  prefetch_rows(v_base + std::size_t(first) * row_stride * e, row_stride * e, count, d * int(e));
  for (int x = tid; x < nh * d; x += kBlock)
    q_scaled[(x / d) * qs + x % d] = order::mul(load_f32(q, std::size_t((row * heads + head0) * d + x), t), scale);
  __syncthreads();

  const int pairs = nh * count;  // pair = j * nh + h: the groups of a warp read the same key
  for (int base = 0; base < pairs; base += kGroups) {  // uniform trip count: every lane shuffles
    const int pair = base + pair_group, j = pair / nh, h = pair % nh;
    float part = 0.0f;
    if (pair < pairs) {
      const std::size_t key = std::size_t(first + j) * row_stride;
      for (int i = lane; i < d; i += order::kDotPartials)
        part = order::attention_dot_step(part, q_scaled[h * qs + i], load_f32(k_base, key + std::size_t(i), t));
    }
    for (int step = 0; step < order::kDotButterflySteps; ++step)
      part = order::attention_dot_butterfly_step(part, __shfl_xor_sync(0xffffffffu, part, order::dot_butterfly_mask(step)));
    if (lane == 0 && pair < pairs) weights[h * kWeightStride + j] = part;
  }
  __syncthreads();
  if (tid < nh) {
    float m = negative_infinity();
    for (int j = 0; j < count; ++j) m = order::attention_max_step(m, weights[tid * kWeightStride + j]);
    chunk_max[tid] = m;
  }
  __syncthreads();
  for (int x = tid; x < pairs; x += kBlock) {
    const int h = x / count, j = x % count;
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
  for (int u = 0; u < kDimsPerThread; ++u) {
    const int i = tid + u * kBlock;
    if (i >= d) break;
    float acc[kGroupHeads];
#pragma unroll
    for (int h = 0; h < kGroupHeads; ++h) acc[h] = 0.0f;
    for (int j0 = 0; j0 < count; j0 += kValueBatch) {  // the batch's loads first, then its fmas in j order
      float v[kValueBatch];
#pragma unroll
      for (int b = 0; b < kValueBatch; ++b)
        v[b] = j0 + b < count ? load_f32(v_base, std::size_t(first + j0 + b) * row_stride + std::size_t(i), t) : 0.0f;
#pragma unroll
      for (int b = 0; b < kValueBatch; ++b)
#pragma unroll
        for (int h = 0; h < kGroupHeads; ++h)
          if (j0 + b < count && h < nh) acc[h] = order::fma(weights[h * kWeightStride + j0 + b], v[b], acc[h]);
    }
#pragma unroll
    for (int h = 0; h < kGroupHeads; ++h)
      if (h < nh) o_c[(record0 + std::size_t(h) * std::size_t(slots)) * std::size_t(d) + std::size_t(i)] = acc[h];
  }
}

__global__ void __launch_bounds__(kBlock) attention_fold(const float2* stats, const float* o_c, std::int64_t slots,
                                                         std::int64_t start_position, std::int64_t heads, int d,
                                                         std::int64_t window, DType t, std::byte* out) {
  __shared__ order::FoldFactors factors[kFoldTile];
  __shared__ float maxima[kFoldTile], sums[kFoldTile];  // the tile's (m_c, l_c)
  __shared__ float before[kFoldTile];                   // the running max before each chunk of the tile
  __shared__ float running_max;
  const int tid = threadIdx.x;
  const std::int64_t r = blockIdx.x, position = start_position + r / heads;
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
    for (int k = 0; k < n; ++k) {
      const order::FoldFactors f = factors[k];
      l = order::attention_fold_value(l, sums[k], f);
      for (int u = 0; u < kDimsPerThread; ++u) {
        const int i = tid + u * kBlock;
        if (i < d) o[u] = order::attention_fold_value(o[u], oc[std::size_t(base + k) * std::size_t(d) + std::size_t(i)], f);
      }
    }
  }
  for (int u = 0; u < kDimsPerThread; ++u) {
    const int i = tid + u * kBlock;
    if (i < d) store_f32(out, std::size_t(r * d + i), t, order::div(o[u], l));
  }
}

}  // namespace

std::size_t attention_workspace_bytes(std::int64_t m, std::int64_t start_position, const AttentionShape& s) {
  const std::size_t per_row = row_bytes(s, slots_for(start_position + m - 1, s.window));
  const std::size_t rows = kAttentionWorkspaceCap / per_row;
  return per_row * (rows < 1 ? 1 : rows < std::size_t(m) ? rows : std::size_t(m));
}

void launch_attention(const void* q, const void* keys, const void* values, std::int64_t m, std::int64_t start_position,
                      const AttentionShape& s, DType t, void* out, void* workspace, std::size_t workspace_bytes,
                      cudaStream_t stream) {
  const std::int64_t slots = slots_for(start_position + m - 1, s.window), groups = head_groups(s);
  const std::size_t per_row = row_bytes(s, slots), e = dtype_size(t), row_elements = std::size_t(s.heads * s.head_dim);
  std::int64_t rows = std::int64_t(workspace_bytes / per_row);  // rows per slice
  if (rows > m) rows = m;
  if (rows > kMaxGrid / (s.kv_heads * groups * slots)) rows = kMaxGrid / (s.kv_heads * groups * slots);
  if (rows > kMaxGrid / s.heads) rows = kMaxGrid / s.heads;
  if (rows < 1)
    throw std::invalid_argument("[exactq] attention: a workspace of " + std::to_string(workspace_bytes) +
                                " bytes cannot hold one row's " + std::to_string(per_row) +
                                " bytes, or one row needs more blocks than a grid holds");
  const auto* q_bytes = static_cast<const std::byte*>(q);
  auto* out_bytes = static_cast<std::byte*>(out);
  for (std::int64_t r0 = 0; r0 < m; r0 += rows) {
    const std::int64_t n = m - r0 < rows ? m - r0 : rows;
    auto* stats = static_cast<float2*>(workspace);
    auto* o_c = reinterpret_cast<float*>(stats + std::size_t(n * s.heads * slots));
    attention_chunks<<<unsigned(n * s.kv_heads * groups * slots), kBlock, 0, stream>>>(
        q_bytes + std::size_t(r0) * row_elements * e, static_cast<const std::byte*>(keys),
        static_cast<const std::byte*>(values), start_position + r0, s.heads, s.kv_heads, int(s.head_dim), s.scale,
        s.window, t, slots, stats, o_c);
    EXACTQ_CUDA_CHECK(cudaGetLastError());
    attention_fold<<<unsigned(n * s.heads), kBlock, 0, stream>>>(stats, o_c, slots, start_position + r0, s.heads,
                                                                 int(s.head_dim), s.window, t,
                                                                 out_bytes + std::size_t(r0) * row_elements * e);
    EXACTQ_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace exactq::cuda_detail
