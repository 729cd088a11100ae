// attention.cu's steps on a chunk staged in shared memory: the rows' cp.async copy, a key's score
// against a scaled query, the in-order warp max, and a value row's pair of dims.
#pragma once

#include "ops/cuda/common.cuh"
#include "order/attention.h"

namespace exactq::cuda_detail {

// s_j for key row `key` and the scaled query row `q`, both in shared memory (16-byte aligned):
// partial u takes dims u, u + 8, ..., one 16-byte step (32 at f32) feeding all eight.
template <DType T>
__device__ __forceinline__ float score(const float* q, const std::byte* key, int d) {
  constexpr int kWords = T == DType::f32 ? 2 : 1;  // 16-byte words per step of 8 dims
  float part[order::kDotPartials];
#pragma unroll
  for (int u = 0; u < order::kDotPartials; ++u) part[u] = 0.0f;
#pragma unroll 4
  for (int i = 0; i < d; i += order::kDotPartials) {
    uint4 raw[kWords];
#pragma unroll
    for (int w = 0; w < kWords; ++w) raw[w] = reinterpret_cast<const uint4*>(key + std::size_t(i) * dtype_size(T))[w];
    const float4 q0 = *reinterpret_cast<const float4*>(q + i), q1 = *reinterpret_cast<const float4*>(q + i + 4);
    const float qs[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    unsigned words[4 * kWords];
#pragma unroll
    for (int w = 0; w < kWords; ++w)
      words[4 * w] = raw[w].x, words[4 * w + 1] = raw[w].y, words[4 * w + 2] = raw[w].z, words[4 * w + 3] = raw[w].w;
#pragma unroll
    for (int u = 0; u < order::kDotPartials; ++u) {
      float k;  // dim i + u, widened exactly (the hardware's conversions: load_f32's values)
      if constexpr (T == DType::f32)
        k = __uint_as_float(words[u]);
      else
        k = widen_half(u % 2 ? words[u / 2] >> 16 : words[u / 2] & 0xffffu, T);
      part[u] = order::attention_dot_step(part[u], qs[u], k);
    }
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

// `rows` cache rows from `from` (rows `stride` bytes apart) into a tile whose rows are `pitch`
// bytes apart, by 16-byte cp.async (consecutive threads on consecutive pieces: whole sectors), as
// one commit group, by the BLOCK threads of the block.
template <int BLOCK>
__device__ __forceinline__ void stage_rows(std::byte* tile, int pitch, const std::byte* from, std::size_t stride, int rows,
                                           int row_bytes) {
  const int pieces = row_bytes / 16;
  for (int x = threadIdx.x; x < rows * pieces; x += BLOCK)
    copy_async_if<16>(true, tile + (x / pieces) * pitch + (x % pieces) * 16,
                      from + std::size_t(x / pieces) * stride + std::size_t(x % pieces) * 16);
  commit_async_copies();
}

// Two consecutive stored values (dims 2p, 2p + 1 of a staged row), widened.
template <DType T>
__device__ __forceinline__ float2 load_pair(const std::byte* row, int pair) {
  if constexpr (T == DType::f32) return reinterpret_cast<const float2*>(row)[pair];
  const unsigned w = reinterpret_cast<const unsigned*>(row)[pair];
  return make_float2(load_f32(&w, 0, T), load_f32(&w, 1, T));
}

}  // namespace exactq::cuda_detail
