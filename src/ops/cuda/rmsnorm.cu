// RMSNorm on CUDA (order/norm.h): a block per row. Every thread stages the row into shared memory
// as f32 (16-byte loads where the row allows), then warp 0 runs the order as written: lane l's fma
// chain over x_l, x_{l+32}, ... from shared memory, the xor butterfly, r = rsqrt(S/H + eps). Every
// thread then writes y_i = (x_i r) w'_i for its own elements. y may be x: every element of x is in
// shared memory before the first write. The weight row (where rows move in 16-byte vectors) is
// copied into shared memory before the kernel waits for the one before it.
//
// add_rmsnorm stages x_i = add(h_i, delta_i) rounded to the stored type (the residual add's bytes,
// order/elementwise.h), writes them back to h, and normalizes them: the two ops' bytes, one pass.
#include <stdexcept>
#include <string>

#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "ops/cuda/row_io.cuh"
#include "ops/cuda/warp_sum.cuh"
#include "order/elementwise.h"
#include "support/dispatch.h"

namespace exactq::cuda_detail {

namespace {

constexpr int kMaxThreads = 256;
constexpr int kChainUnroll = 8;  // independent shared-memory loads in flight ahead of the fmas

// x_i = add(h_i, delta_i) as stored in T, written back to h and into `out`.
template <DType T>
__device__ __forceinline__ void stage_sum(void* h_row, const void* delta_row, std::int64_t h, bool vectors, float* out) {
  write_row<T>(h_row, h, vectors, [&](std::int64_t i) {
    const float sum = order::residual(load_f32(h_row, std::size_t(i), T), load_f32(delta_row, std::size_t(i), T));
    std::uint32_t stored = 0;
    store_f32(&stored, 0, T, sum);
    return out[i] = load_f32(&stored, 0, T);
  });
}

template <DType T, bool ADD>
__global__ void __launch_bounds__(kMaxThreads) rmsnorm_kernel(void* x, const void* delta, const void* weight,
                                                              std::int64_t h, float eps, bool one_plus_weight,
                                                              bool vectors, void* y) {
  extern __shared__ __align__(16) float row[];  // h values, then (with vectors) the weight row as stored
  __shared__ float inverse_rms;
  auto* stored_weight = reinterpret_cast<std::byte*>(row + h);
  let_next_grid_start();
  if (vectors) copy_row_async(stored_weight, weight, h * std::int64_t(dtype_size(T)));  // weights are immutable
  wait_for_previous_grid();
  if (vectors) weight = stored_weight;
  const std::size_t base = std::size_t(blockIdx.x) * std::size_t(h) * dtype_size(T);
  if constexpr (ADD)
    stage_sum<T>(static_cast<std::byte*>(x) + base, static_cast<const std::byte*>(delta) + base, h, vectors, row);
  else
    stage_row<T>(static_cast<const std::byte*>(x) + base, h, vectors, row);
  wait_async_copies<0>();
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = int(threadIdx.x);
    float acc = 0.0f;
    std::int64_t i = lane;
    for (; i + (kChainUnroll - 1) * 32 < h; i += kChainUnroll * 32) {
      float v[kChainUnroll];
#pragma unroll
      for (int u = 0; u < kChainUnroll; ++u) v[u] = row[i + u * 32];
#pragma unroll
      for (int u = 0; u < kChainUnroll; ++u) acc = order::norm_lane_step(acc, v[u]);
    }
    for (; i < h; i += 32) acc = order::norm_lane_step(acc, row[i]);
    const float r = order::norm_inverse_rms(warp_butterfly_sum(acc), int(h), eps);
    if (lane == 0) inverse_rms = r;
  }
  __syncthreads();
  const float r = inverse_rms;
  write_row<T>(static_cast<std::byte*>(y) + base, h, vectors, [&](std::int64_t i) {
    return order::norm_apply(row[i], r, order::norm_weight(load_f32(weight, std::size_t(i), T), one_plus_weight));
  });
}

// The shared launcher: ADD selects add_rmsnorm (delta non-null).
template <bool ADD>
void launch_norm(void* x, const void* delta, const void* weight, std::int64_t rows, std::int64_t h, DType t, float eps,
                 bool one_plus_weight, void* y, cudaStream_t stream) {
  if (rows < 1) return;
  dispatch_value<int(DType::f32), int(DType::f16), int(DType::bf16)>(int(t), "dtype", [&]<int D>() {
    constexpr DType T = DType(D);
    const auto kernel = rmsnorm_kernel<T, ADD>;
    const bool vectors = rows_vectorizable<T>(x, h) && rows_vectorizable<T>(y, h) && rows_vectorizable<T>(weight, h) &&
                         (!ADD || rows_vectorizable<T>(delta, h));
    const std::size_t shared = std::size_t(h) * (sizeof(float) + (vectors ? dtype_size(T) : 0));
    if (shared > 48 * 1024) {
      if (shared > std::size_t(shared_memory_limits().per_block))
        throw std::invalid_argument("[exactq] rmsnorm: a row of " + std::to_string(h) +
                                    " values does not fit in one block's shared memory");
      EXACTQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
    }
    const std::int64_t per_thread = vectors ? kPerVector<T> : 1, items = (h + per_thread - 1) / per_thread;
    const int threads = int(items >= kMaxThreads ? kMaxThreads : (items + 31) / 32 * 32);
    launch_step(kernel, dim3(unsigned(rows)), threads, shared, stream, x, delta, weight, h, eps, one_plus_weight, vectors, y);
  });
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_rmsnorm(const void* x, const void* weight, std::int64_t rows, std::int64_t h, DType t, float eps,
                    bool one_plus_weight, void* y, cudaStream_t stream) {
  launch_norm<false>(const_cast<void*>(x), nullptr, weight, rows, h, t, eps, one_plus_weight, y, stream);
}

void launch_add_rmsnorm(void* h, const void* delta, const void* weight, std::int64_t rows, std::int64_t width, DType t,
                        float eps, bool one_plus_weight, void* y, cudaStream_t stream) {
  launch_norm<true>(h, delta, weight, rows, width, t, eps, one_plus_weight, y, stream);
}

}  // namespace exactq::cuda_detail
