// Dense mat-vec on CUDA: a warp per (vector, output row), lane l summing k = l, l + 32, ...
// (order/dense.h), then the butterfly.
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "ops/cuda/warp_sum.cuh"
#include "order/dense.h"

namespace exactq::cuda_detail {

namespace {

__global__ void dense_mv_kernel(const void* w, std::int64_t n, std::int64_t k, DType t, const void* x, std::int64_t m,
                                void* y) {
  step_prologue();
  const std::int64_t warp = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= m * n) return;
  const std::int64_t v = warp / n, r = warp % n;
  float acc = 0.0f;
  for (std::int64_t i = lane; i < k; i += 32)
    acc = order::dense_lane_step(acc, load_f32(w, std::size_t(r * k + i), t), load_f32(x, std::size_t(v * k + i), t));
  acc = warp_butterfly_sum(acc);
  if (lane == 0) store_f32(y, std::size_t(v * n + r), t, acc);
}

}  // namespace

void launch_dense_mv(const void* w, std::int64_t n, std::int64_t k, DType t, const void* x, std::int64_t m, void* y,
                     cudaStream_t stream) {
  launch_step(dense_mv_kernel, dim3(blocks_for(m * n, kWarps)), kThreads, 0, stream, w, n, k, t, x, m, y);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
