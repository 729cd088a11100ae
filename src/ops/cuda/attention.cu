// Attention on CUDA: a block of 256 threads per (query row, head), walking the visible chunks in
// increasing position (order/attention.h). In each chunk:
//   scores   32 groups of 8 lanes, a key per group at a time: lane u runs partial u (dims u, u + 8,
//            ...; the 8 lanes read 16 consecutive bytes of the key per step), then the xor
//            butterfly 4, 2, 1 inside the group gives lane 0 the order's sum;
//   max, sum thread 0, over j increasing, as the order says;
//   o_c      a thread per dim, an fma chain over j increasing (the value rows read coalesced);
//   fold     every thread folds its dims with the same factors.
// Each chunk's (m_c, l_c, o_c) is complete before it is folded.
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "order/attention.h"

namespace exactq::cuda_detail {

namespace {

constexpr int kChunk = order::kAttentionChunk;
constexpr int kBlock = 256;
constexpr int kGroups = kBlock / order::kDotPartials;  // keys scored at once
constexpr int kDimsPerThread = (order::kMaxHeadDim + kBlock - 1) / kBlock;

__global__ void __launch_bounds__(kBlock) attention_kernel(const void* q, const std::byte* keys, const std::byte* values,
                                                           std::int64_t start_position, std::int64_t heads,
                                                           std::int64_t kv_heads, int d, float scale,
                                                           std::int64_t window, DType t, void* out) {
  __shared__ float q_scaled[order::kMaxHeadDim];
  __shared__ float weights[kChunk];
  __shared__ float chunk_max, chunk_sum, running_max, running_sum;
  const int tid = threadIdx.x, lane = tid % order::kDotPartials, group = tid / order::kDotPartials;
  const std::int64_t r = blockIdx.x, row = r / heads, head = r % heads, kv = head / (heads / kv_heads);
  const std::int64_t position = start_position + row;
  const std::size_t row_stride = std::size_t(kv_heads * d), e = dtype_size(t);
  const std::byte* k_base = keys + std::size_t(kv * d) * e;
  const std::byte* v_base = values + std::size_t(kv * d) * e;
  float o[kDimsPerThread];
  for (int u = 0; u < kDimsPerThread; ++u) o[u] = 0.0f;
  for (int i = tid; i < d; i += kBlock) q_scaled[i] = order::mul(load_f32(q, std::size_t(r * d + i), t), scale);
  if (tid == 0) {
    running_max = float_from_bits(0xff800000u);  // -inf
    running_sum = 0.0f;
  }
  __syncthreads();
  const std::int64_t lo = order::attention_first_visible(position, window);
  for (std::int64_t c = lo / kChunk; c <= position / kChunk; ++c) {
    const std::int64_t first = c * kChunk > lo ? c * kChunk : lo;
    const std::int64_t last = (c + 1) * kChunk - 1 < position ? (c + 1) * kChunk - 1 : position;
    const int count = int(last - first + 1);
    for (int base = 0; base < count; base += kGroups) {  // uniform trip count: every lane shuffles
      const int j = base + group;
      float part = 0.0f;
      if (j < count) {
        const std::size_t key = std::size_t(first + j) * row_stride;
        for (int i = lane; i < d; i += order::kDotPartials)
          part = order::attention_dot_step(part, q_scaled[i], load_f32(k_base, key + std::size_t(i), t));
      }
      for (int step = 0; step < order::kDotButterflySteps; ++step)
        part = order::attention_dot_butterfly_step(part, __shfl_xor_sync(0xffffffffu, part, order::dot_butterfly_mask(step)));
      if (lane == 0 && j < count) weights[j] = part;
    }
    __syncthreads();
    if (tid == 0) {
      float m = float_from_bits(0xff800000u);
      for (int j = 0; j < count; ++j) m = order::attention_max_step(m, weights[j]);
      chunk_max = m;
    }
    __syncthreads();
    if (tid < count) weights[tid] = order::attention_weight(weights[tid], chunk_max);
    __syncthreads();
    if (tid == 0) {
      float l = 0.0f;
      for (int j = 0; j < count; ++j) l = order::add(l, weights[j]);
      chunk_sum = l;
    }
    float o_c[kDimsPerThread];
    for (int u = 0; u < kDimsPerThread; ++u) {
      const int i = tid + u * kBlock;
      o_c[u] = 0.0f;
      if (i < d)
        for (int j = 0; j < count; ++j)
          o_c[u] = order::fma(weights[j], load_f32(v_base, std::size_t(first + j) * row_stride + std::size_t(i), t), o_c[u]);
    }
    __syncthreads();
    const order::FoldFactors f = order::attention_fold_factors(running_max, chunk_max);
    for (int u = 0; u < kDimsPerThread; ++u)
      if (tid + u * kBlock < d) o[u] = order::attention_fold_value(o[u], o_c[u], f);
    __syncthreads();  // every thread has read running_max before it moves
    if (tid == 0) {
      running_sum = order::attention_fold_value(running_sum, chunk_sum, f);
      running_max = f.max;
    }
    __syncthreads();
  }
  for (int u = 0; u < kDimsPerThread; ++u) {
    const int i = tid + u * kBlock;
    if (i < d) store_f32(out, std::size_t(r * d + i), t, order::div(o[u], running_sum));
  }
}

}  // namespace

void launch_attention(const void* q, const void* keys, const void* values, std::int64_t m, std::int64_t start_position,
                      const AttentionShape& s, DType t, void* out, cudaStream_t stream) {
  attention_kernel<<<unsigned(m * s.heads), kBlock, 0, stream>>>(
      q, static_cast<const std::byte*>(keys), static_cast<const std::byte*>(values), start_position, s.heads,
      s.kv_heads, int(s.head_dim), s.scale, s.window, t, out);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
