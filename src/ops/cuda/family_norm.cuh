// The norm before a linear, in the qmv kernel's staging (Backend::norm_qmv): every block makes the
// normalized row x itself, in shared memory, and stages it as it would stage x from memory. The
// values are add_rmsnorm's (rmsnorm.cu): s_i = add(h_i, delta_i) rounded to T (s = h without
// delta), the norm's order on s (order/norm.h: lane l's fma chain over s_l, s_{l+32}, ..., the
// xor butterfly, r = rsqrt(S/H + eps)), then x_i = mul(mul(s_i, r), w'_i) rounded to T. Block 0
// of the vector writes s to h_out. The weight row is copied into shared memory before the kernel
// waits for the one before it (weights are immutable while the step runs).
#pragma once

#include "ops/cuda/common.cuh"
#include "ops/cuda/qmv_params.cuh"
#include "ops/cuda/warp_sum.cuh"
#include "order/elementwise.h"
#include "order/norm.h"

namespace exactq::cuda_detail {

// Shared memory of the norm: the row as stored (T) and the weight row, K values each.
template <DType T>
__host__ __device__ inline std::size_t norm_shared_bytes(std::int64_t k) {
  return 2 * std::size_t(k) * dtype_size(T);
}

// Vector v's normalized row into `row` (T values), by every thread of the block; returns with it
// in place for every thread. `weight` holds the prefetched weight row.
template <DType T>
__device__ __forceinline__ void norm_row(const QmvParams& p, std::int64_t v, std::byte* row, const std::byte* weight) {
  __shared__ float inverse_rms;
  constexpr int kPer = int(16 / dtype_size(T));  // values in a 16-byte piece
  const std::int64_t k = p.k, pieces = k / kPer;
  const std::size_t base = std::size_t(v * k) * dtype_size(T);
  const auto* h = reinterpret_cast<const uint4*>(static_cast<const std::byte*>(p.x) + base);
  const auto* d = p.delta ? reinterpret_cast<const uint4*>(static_cast<const std::byte*>(p.delta) + base) : nullptr;
  auto* out = p.h_out && blockIdx.x == 0 ? reinterpret_cast<uint4*>(static_cast<std::byte*>(p.h_out) + base) : nullptr;
  for (std::int64_t j = threadIdx.x; j < pieces; j += blockDim.x) {
    uint4 s = h[j];
    if (d) {
      const uint4 dj = d[j];
#pragma unroll
      for (int u = 0; u < kPer; ++u)
        store_f32(&s, std::size_t(u), T, order::residual(load_f32(&s, std::size_t(u), T), load_f32(&dj, std::size_t(u), T)));
    }
    reinterpret_cast<uint4*>(row)[j] = s;
    if (out) out[j] = s;
  }
  wait_async_copies<0>();  // the weight row
  __syncthreads();
  if (threadIdx.x < 32) {
    float acc = 0.0f;
#pragma unroll 8
    for (std::int64_t i = threadIdx.x; i < k; i += 32) acc = order::norm_lane_step(acc, load_f32(row, std::size_t(i), T));
    const float r = order::norm_inverse_rms(warp_butterfly_sum(acc), int(k), p.eps);
    if (threadIdx.x == 0) inverse_rms = r;
  }
  __syncthreads();
  const float r = inverse_rms;
  for (std::int64_t j = threadIdx.x; j < pieces; j += blockDim.x) {
    uint4 x = reinterpret_cast<const uint4*>(row)[j];
    const uint4 w = reinterpret_cast<const uint4*>(weight)[j];
#pragma unroll
    for (int u = 0; u < kPer; ++u)
      store_f32(&x, std::size_t(u), T,
                order::norm_apply(load_f32(&x, std::size_t(u), T), r,
                                  order::norm_weight(load_f32(&w, std::size_t(u), T), p.one_plus_weight)));
    reinterpret_cast<uint4*>(row)[j] = x;
  }
  __syncthreads();
}

}  // namespace exactq::cuda_detail
