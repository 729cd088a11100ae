// Greedy argmax on CUDA: a block per row; each thread keeps the best (value, index) of its strided
// share, then a shared-memory tree picks among them. argmax_better is a total order on
// (value, index) (order/argmax.h), so this tree gives the CPU's sequential answer.
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "order/argmax.h"

namespace exactq::cuda_detail {

namespace {

__global__ void argmax_kernel(const void* logits, std::int64_t n, DType t, std::int32_t* indices) {
  __shared__ float best_v[kThreads];
  __shared__ std::int64_t best_i[kThreads];
  const std::int64_t row = blockIdx.x;
  float v = 0.0f;
  std::int64_t index = -1;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float x = load_f32(logits, std::size_t(row * n + j), t);
    if (order::argmax_better(x, j, v, index)) {
      v = x;
      index = j;
    }
  }
  best_v[threadIdx.x] = v;
  best_i[threadIdx.x] = index;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) {
      const int other = threadIdx.x + stride;
      if (best_i[other] >= 0 && order::argmax_better(best_v[other], best_i[other], best_v[threadIdx.x], best_i[threadIdx.x])) {
        best_v[threadIdx.x] = best_v[other];
        best_i[threadIdx.x] = best_i[other];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) indices[row] = std::int32_t(best_i[0] < 0 ? 0 : best_i[0]);
}

}  // namespace

void launch_argmax(const void* logits, std::int64_t m, std::int64_t n, DType t, std::int32_t* indices,
                   cudaStream_t stream) {
  argmax_kernel<<<unsigned(m), kThreads, 0, stream>>>(logits, n, t, indices);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
