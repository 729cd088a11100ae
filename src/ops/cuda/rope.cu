// RoPE on CUDA: a thread per rotated pair (order/rope.h), in place: each thread reads and writes
// its own two elements. Row r is at positions[r] (a negative one, which the host refuses, is taken
// as 0).
//
// rope_write, an attention layer's RoPE and cache write in one kernel: a thread per pair of q,
// then of k, then of v. A k thread stores its rotated pair into k and into the key cache (the same
// stored bytes write_rows would copy); a v thread copies its two values' bytes into the value
// cache. A position outside the cache writes no cache row, as write_rows. The rotation's cos and
// sin are made before the kernel waits for the one before it.
#include <limits>
#include <stdexcept>
#include <string>

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

// The two elements at a and b of x, stored at a and b of `to` as they are (bytes, not values).
__device__ __forceinline__ void copy_pair(const void* x, std::size_t a, std::size_t b, DType t, void* to,
                                          std::size_t at, std::size_t bt) {
  const std::size_t e = dtype_size(t);
  const auto* from = static_cast<const unsigned char*>(x);
  auto* into = static_cast<unsigned char*>(to);
  for (std::size_t u = 0; u < e; ++u) into[at * e + u] = from[a * e + u], into[bt * e + u] = from[b * e + u];
}

__global__ void rope_write_kernel(void* q, void* k, const void* v, int m, int heads, int kv_heads, int head_dim,
                                  DType t, const std::int32_t* positions, const std::int32_t* cache_at,
                                  const std::uint64_t* steps, bool interleaved, void* keys, void* values,
                                  std::int64_t cache_rows) {
  // Before the wait: the indices, and the rotation's cos and sin, which depend on the positions
  // (the step's inputs, in place before its first kernel) and the immutable phase steps alone.
  let_next_grid_start();
  const int half = head_dim / 2, q_pairs = m * heads * half, kv_pairs = m * kv_heads * half;
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  const bool live = i < q_pairs + 2 * kv_pairs;
  const int part = i < q_pairs ? 0 : i < q_pairs + kv_pairs ? 1 : 2;  // q, k or v
  if (part > 0) i -= q_pairs + (part - 1) * kv_pairs;
  const int vector = i / half, pair = i % half, row = vector / (part == 0 ? heads : kv_heads);
  const std::int64_t position = live ? positions[row] : 0;
  order::CosSin cs{};
  if (live && part < 2) cs = order::cos_sin_of_phase(order::rope_phase(std::uint64_t(position < 0 ? 0 : position), steps[pair]));
  wait_for_previous_grid();
  if (!live) return;
  const std::size_t base = std::size_t(vector) * std::size_t(head_dim);
  const std::size_t a = base + std::size_t(interleaved ? 2 * pair : pair);
  const std::size_t b = interleaved ? a + 1 : a + std::size_t(half);
  // Element a of row `row` sits at (its cache row - row) rows further in the cache.
  const std::int64_t cache_row = cache_at[row];
  const std::int64_t shift = (cache_row - row) * kv_heads * head_dim;
  const bool cached = cache_row >= 0 && cache_row < cache_rows;
  if (part == 2) {
    if (cached) copy_pair(v, a, b, t, values, std::size_t(std::int64_t(a) + shift), std::size_t(std::int64_t(b) + shift));
    return;
  }
  void* x = part == 0 ? q : k;
  float y1, y2;
  order::rope_rotate_pair(load_f32(x, a, t), load_f32(x, b, t), cs, y1, y2);
  store_f32(x, a, t, y1);
  store_f32(x, b, t, y2);
  if (part == 1 && cached) {
    store_f32(keys, std::size_t(std::int64_t(a) + shift), t, y1);
    store_f32(keys, std::size_t(std::int64_t(b) + shift), t, y2);
  }
}

}  // namespace

void launch_rope_write(void* q, void* k, const void* v, std::int64_t m, std::int64_t heads, std::int64_t kv_heads,
                       std::int64_t head_dim, DType t, const std::int32_t* positions, const std::int32_t* cache_at,
                       const std::uint64_t* steps, bool interleaved, void* keys, void* values, std::int64_t cache_rows,
                       cudaStream_t stream) {
  if (m * (heads + 2 * kv_heads) * (head_dim / 2) > std::numeric_limits<int>::max())
    throw std::invalid_argument("[exactq] rope_write: " + std::to_string(m) + " rows of " +
                                std::to_string(heads + 2 * kv_heads) + " heads are more pairs than one launch indexes");
  launch_step(rope_write_kernel, dim3(blocks_for(m * (heads + 2 * kv_heads) * (head_dim / 2), kThreads)), kThreads, 0,
              stream, q, k, v, int(m), int(heads), int(kv_heads), int(head_dim), t, positions, cache_at, steps,
              interleaved, keys, values, cache_rows);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

void launch_rope(void* x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t,
                 const std::int32_t* positions, const std::uint64_t* steps, bool interleaved, cudaStream_t stream) {
  launch_step(rope_kernel, dim3(blocks_for(m * heads * (head_dim / 2), kThreads)), kThreads, 0, stream, x, m, heads,
              head_dim, t, positions, steps, interleaved);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
