// Attention on CUDA: a block of kAttentionChunk threads per (query row, head), walking the visible
// chunks in increasing position (order/attention.h). In each chunk thread t scores key first + t;
// thread 0 forms the chunk's max and then its sum in increasing j, as the order says; thread t
// keeps o_c for dims t, t + 64, ... (each an fma chain in increasing j); then every thread folds
// its dims with the same factors. Each chunk's (m_c, l_c, o_c) is complete before it is folded.
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "order/attention.h"

namespace exactq::cuda_detail {

namespace {

constexpr int kChunk = order::kAttentionChunk;
constexpr int kDimsPerThread = order::kMaxHeadDim / kChunk;

__global__ void __launch_bounds__(kChunk) attention_kernel(const void* q, const std::byte* keys, const std::byte* values,
                                                           std::int64_t start_position, std::int64_t heads,
                                                           std::int64_t kv_heads, int d, float scale,
                                                           std::int64_t window, DType t, void* out) {
  __shared__ float q_scaled[order::kMaxHeadDim];
  __shared__ float weights[kChunk];
  __shared__ float chunk_max, chunk_sum, running_max, running_sum;
  const int tid = threadIdx.x;
  const std::int64_t r = blockIdx.x, row = r / heads, head = r % heads, kv = head / (heads / kv_heads);
  const std::int64_t position = start_position + row;
  const std::size_t row_stride = std::size_t(kv_heads * d), e = dtype_size(t);
  const std::byte* k_base = keys + std::size_t(kv * d) * e;
  const std::byte* v_base = values + std::size_t(kv * d) * e;
  float o[kDimsPerThread];
  for (int u = 0; u < kDimsPerThread; ++u) o[u] = 0.0f;
  for (int i = tid; i < d; i += kChunk) q_scaled[i] = order::mul(load_f32(q, std::size_t(r * d + i), t), scale);
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
    if (tid < count) weights[tid] = order::attention_score(q_scaled, k_base, std::size_t(first + tid) * row_stride, t, d);
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
      const int i = tid + u * kChunk;
      o_c[u] = 0.0f;
      if (i < d)
        for (int j = 0; j < count; ++j)
          o_c[u] = order::fma(weights[j], load_f32(v_base, std::size_t(first + j) * row_stride + std::size_t(i), t), o_c[u]);
    }
    __syncthreads();
    const order::FoldFactors f = order::attention_fold_factors(running_max, chunk_max);
    for (int u = 0; u < kDimsPerThread; ++u)
      if (tid + u * kChunk < d) o[u] = order::attention_fold_value(o[u], o_c[u], f);
    __syncthreads();  // every thread has read running_max before it moves
    if (tid == 0) {
      running_sum = order::attention_fold_value(running_sum, chunk_sum, f);
      running_max = f.max;
    }
    __syncthreads();
  }
  for (int u = 0; u < kDimsPerThread; ++u) {
    const int i = tid + u * kChunk;
    if (i < d) store_f32(out, std::size_t(r * d + i), t, order::div(o[u], running_sum));
  }
}

}  // namespace

void launch_attention(const void* q, const void* keys, const void* values, std::int64_t m, std::int64_t start_position,
                      const AttentionShape& s, DType t, void* out, cudaStream_t stream) {
  attention_kernel<<<unsigned(m * s.heads), kChunk, 0, stream>>>(
      q, static_cast<const std::byte*>(keys), static_cast<const std::byte*>(values), start_position, s.heads,
      s.kv_heads, int(s.head_dim), s.scale, s.window, t, out);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
