// The same-run read ceiling: a streaming read of a large buffer with 16-byte loads, several in
// flight per thread, folded with integer xor so no floating-point rate limits it. What this
// kernel reaches is what a memory-bound mat-vec can hope for on this device now.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/launch.h"
#include "exactq/cuda.h"
#include "exactq/timing.h"

namespace exactq::cuda_detail {
namespace {

__global__ void __launch_bounds__(512) read_kernel(const uint4* __restrict__ data, std::size_t count,
                                                   unsigned* __restrict__ sink) {
  let_next_grid_start();  // writes nothing a next launch reads (the sink practically never)
  constexpr int kUnroll = 4;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + (kUnroll - 1) * stride < count; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(data + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < count; i += stride) {
    const uint4 v = __ldcs(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads alive; practically never stores
}

}  // namespace
}  // namespace exactq::cuda_detail

namespace exactq::cuda {

double read_bandwidth(std::size_t bytes, int repeats) {
  using namespace cuda_detail;
  bytes = bytes / 16 * 16;
  DeviceBuffer buffer(bytes), sink(sizeof(unsigned));
  buffer.fill(0x5a);
  const auto* data = reinterpret_cast<const uint4*>(buffer.bytes().data());
  auto* out = reinterpret_cast<unsigned*>(sink.bytes().data());
  int blocks_per_sm = 0;
  EXACTQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, read_kernel, 512, 0));
  const unsigned grid = unsigned(blocks_per_sm * sm_count());
  cudaEvent_t start, stop;
  EXACTQ_CUDA_CHECK(cudaEventCreate(&start));
  EXACTQ_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> seconds;
  for (int i = 0; i < repeats + 2; ++i) {
    EXACTQ_CUDA_CHECK(cudaEventRecord(start));
    read_kernel<<<grid, 512>>>(data, bytes / 16, out);
    EXACTQ_CUDA_CHECK(cudaGetLastError());
    EXACTQ_CUDA_CHECK(cudaEventRecord(stop));
    EXACTQ_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    EXACTQ_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (i >= 2) seconds.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return double(bytes) / seconds[seconds.size() / 2];
}

double time_read_us(std::size_t bytes, int repeats, bool overlap_launch) {
  using namespace cuda_detail;
  if (bytes < 16) throw std::invalid_argument("[exactq] time_read_us: " + std::to_string(bytes) + " bytes (at least 16)");
  if (repeats < 1) throw std::invalid_argument("[exactq] time_read_us: repeats = " + std::to_string(repeats));
  bytes = bytes / 16 * 16;
  // As for the kernels (time_qmv_us): launches rotating over timing_copies copies.
  const int copies = timing_copies(bytes, 0);
  std::vector<DeviceBuffer> buffers;
  for (int i = 0; i < copies; ++i) {
    buffers.emplace_back(bytes);
    buffers.back().fill(std::uint8_t(0x5a + i));
  }
  DeviceBuffer sink(sizeof(unsigned));
  auto* out = reinterpret_cast<unsigned*>(sink.bytes().data());
  int blocks_per_sm = 0;
  EXACTQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, read_kernel, 512, 0));
  const unsigned grid = unsigned(blocks_per_sm * sm_count());
  return median_replay_us(std::max(copies, 8), repeats, [&](cudaStream_t stream, int i) {
    const auto* data = reinterpret_cast<const uint4*>(buffers[std::size_t(i % copies)].bytes().data());
    launch_overlapping(read_kernel, dim3(grid), 512, 0, overlap_launch, stream, data, bytes / 16, out);
  });
}

}  // namespace exactq::cuda
