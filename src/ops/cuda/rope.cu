// RoPE on CUDA: a thread per rotated pair (order/rope.h), in place: each thread reads and writes
// its own two elements. Row r is at positions[r] (a negative one, which the host refuses, is taken
// as 0).
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "order/rope.h"

namespace exactq::cuda_detail {

namespace {

__global__ void rope_kernel(void* x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t,
                            const std::int32_t* positions, const std::uint64_t* steps, bool interleaved) {
  step_prologue();
  const std::int64_t half = head_dim / 2;
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * heads * half) return;
  const std::int64_t vector = i / half, pair = i % half, row = vector / heads;
  const std::size_t base = std::size_t(vector * head_dim);
  const std::size_t a = base + std::size_t(interleaved ? 2 * pair : pair);
  const std::size_t b = interleaved ? a + 1 : a + std::size_t(half);
  const order::CosSin cs =
      order::cos_sin_of_phase(order::rope_phase(std::uint64_t(positions[row] < 0 ? 0 : positions[row]), steps[pair]));
  float y1, y2;
  order::rope_rotate_pair(load_f32(x, a, t), load_f32(x, b, t), cs, y1, y2);
  store_f32(x, a, t, y1);
  store_f32(x, b, t, y2);
}

}  // namespace

void launch_rope(void* x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t,
                 const std::int32_t* positions, const std::uint64_t* steps, bool interleaved, cudaStream_t stream) {
  launch_step(rope_kernel, dim3(blocks_for(m * heads * (head_dim / 2), kThreads)), kThreads, 0, stream, x, m, heads,
              head_dim, t, positions, steps, interleaved);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
