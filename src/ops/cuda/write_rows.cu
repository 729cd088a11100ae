// The cache write on CUDA: row i of `rows` to row positions[i] of the cache, a block per row, 16
// bytes a thread where the rows allow it. A position outside the cache (which the host refuses
// before issuing) writes nothing.
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"

namespace exactq::cuda_detail {

namespace {

template <typename Piece>
__global__ void write_rows_kernel(const Piece* rows, const std::int32_t* positions, std::int64_t pieces,
                                  Piece* cache, std::int64_t cache_rows) {
  step_prologue();
  const std::int64_t row = blockIdx.x, position = positions[row];
  if (position < 0 || position >= cache_rows) return;
  for (std::int64_t i = threadIdx.x; i < pieces; i += blockDim.x) cache[position * pieces + i] = rows[row * pieces + i];
}

}  // namespace

void launch_write_rows(const void* rows, const std::int32_t* positions, std::int64_t m, std::size_t row_bytes,
                       void* cache, std::int64_t cache_rows, cudaStream_t stream) {
  const bool vectors = row_bytes % 16 == 0 && reinterpret_cast<std::uintptr_t>(rows) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(cache) % 16 == 0;
  if (vectors)
    launch_step(write_rows_kernel<uint4>, dim3(unsigned(m)), 128, 0, stream, static_cast<const uint4*>(rows), positions,
                std::int64_t(row_bytes / 16), static_cast<uint4*>(cache), cache_rows);
  else
    launch_step(write_rows_kernel<unsigned char>, dim3(unsigned(m)), 128, 0, stream,
                static_cast<const unsigned char*>(rows), positions, std::int64_t(row_bytes),
                static_cast<unsigned char*>(cache), cache_rows);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
