// Launch helper of the qmv-family kernel, shared by qmv.cu and qmv_streamed.cu.
#pragma once

#include "common/dispatch.h"
#include "cuda/launch.h"
#include "cuda/qmv_family.cuh"

namespace exactq::cuda_detail {

// Rows per warp of qmv_streamed: each activation piece read from shared memory serves 4 rows.
// (qmv uses 2, see qmv.cu.) Numerically irrelevant: rows are independent.
inline constexpr int kFamilyRows = 4;

template <int BITS, int V>
std::size_t family_shared_bytes(int tile_values) {
  return std::size_t(V) * tile_values * 4 + std::size_t(V) * (tile_values / kChunkValues) * 4;
}

template <int BITS, int V, int ROWS = kFamilyRows>
int family_blocks_per_sm(std::size_t smem) {
  auto kernel = qmv_family_kernel<BITS, V, ROWS>;
  static const bool raised = [&] {
    EXACTQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    return true;
  }();
  (void)raised;
  int blocks = 0;
  EXACTQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, smem));
  return blocks < 1 ? 1 : blocks;
}

// Launches `tiles` tiles of V vectors starting at vector_offset.
template <int BITS, int V, int ROWS = kFamilyRows>
void launch_family(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t tiles,
                   void* y, std::int64_t m_total, cudaStream_t stream) {
  QmvParams p{w.packed.data(), w.scales.data(), w.biases.data(), x, y, w.n, w.k, m_total, 0, w.group,
              k_tile(w.k, V, 1.0 / kChunkValues), w.dtype};
  const std::size_t smem = family_shared_bytes<BITS, V>(p.tile_values);
  const std::int64_t row_blocks = (w.n + kWarps * ROWS - 1) / (kWarps * ROWS);
  const std::int64_t resident = std::int64_t(family_blocks_per_sm<BITS, V, ROWS>(smem)) * sm_count();
  const unsigned grid_x = unsigned(row_blocks < resident ? row_blocks : resident);
  constexpr std::int64_t kMaxGridY = 65535;
  for (std::int64_t t0 = 0; t0 < tiles; t0 += kMaxGridY) {
    const std::int64_t count = tiles - t0 < kMaxGridY ? tiles - t0 : kMaxGridY;
    p.vector_offset = vector_offset + t0 * V;
    qmv_family_kernel<BITS, V, ROWS><<<dim3(grid_x, unsigned(count)), kThreads, smem, stream>>>(p);
    EXACTQ_CUDA_CHECK(cudaGetLastError());
  }
}

template <int BITS, int V, int ROWS = kFamilyRows>
cuda::KernelResources family_resources() {
  cudaFuncAttributes a{};
  EXACTQ_CUDA_CHECK(cudaFuncGetAttributes(&a, qmv_family_kernel<BITS, V, ROWS>));
  const std::size_t smem = family_shared_bytes<BITS, V>(k_tile(4096, V, 1.0 / kChunkValues));
  return {a.numRegs, int(a.localSizeBytes), a.maxThreadsPerBlock, family_blocks_per_sm<BITS, V, ROWS>(smem)};
}

// Runtime bits to the template.
template <typename F>
void dispatch_bits(int bits, F&& f) {
  dispatch_value<2, 3, 4, 5, 6, 8>(bits, "bits", std::forward<F>(f));
}

}  // namespace exactq::cuda_detail
