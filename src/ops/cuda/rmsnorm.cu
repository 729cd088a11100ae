// RMSNorm on CUDA: a warp per row (order/norm.h): lane l sums x_i^2 for i = l, l + 32, ..., the
// butterfly gives every lane the sum, and each lane writes its own elements. y may be x: a lane
// writes only the elements it read, after the sum is complete.
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "ops/cuda/warp_sum.cuh"

namespace exactq::cuda_detail {

namespace {

__global__ void rmsnorm_kernel(const void* x, const void* weight, std::int64_t rows, std::int64_t h, DType t,
                               float eps, bool one_plus_weight, void* y) {
  const std::int64_t row = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const std::size_t base = std::size_t(row * h);
  float acc = 0.0f;
  for (std::int64_t i = lane; i < h; i += 32) acc = order::norm_lane_step(acc, load_f32(x, base + std::size_t(i), t));
  const float r = order::norm_inverse_rms(warp_butterfly_sum(acc), int(h), eps);
  for (std::int64_t i = lane; i < h; i += 32) {
    const float w = order::norm_weight(load_f32(weight, std::size_t(i), t), one_plus_weight);
    store_f32(y, base + std::size_t(i), t, order::norm_apply(load_f32(x, base + std::size_t(i), t), r, w));
  }
}

}  // namespace

void launch_rmsnorm(const void* x, const void* weight, std::int64_t rows, std::int64_t h, DType t, float eps,
                    bool one_plus_weight, void* y, cudaStream_t stream) {
  rmsnorm_kernel<<<blocks_for(rows, kWarps), kThreads, 0, stream>>>(x, weight, rows, h, t, eps, one_plus_weight, y);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
