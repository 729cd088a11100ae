// CUDA timing for the benchmark: graph replays of kernel launches rotating over weight copies, the
// same-run read ceiling (a streaming read with 16-byte loads, several in flight per thread, folded
// with integer xor so no floating-point rate limits it: what a memory-bound mat-vec can hope for
// on this device now), and the kernels' resources.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_timing.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/launch.h"
#include "timing.h"

namespace exactq::bench {
namespace {

using namespace exactq::cuda_detail;
using cuda::DeviceBuffer;

// Median microseconds per launch of `launches` launches that enqueue(stream, i) puts on a stream:
// run once uncaptured (kernel attributes get set outside capture), then captured into a CUDA
// graph, replayed 3 times to warm up and `repeats` times timed with events.
template <typename Enqueue>
double median_replay_us(int launches, int repeats, Enqueue&& enqueue) {
  cudaStream_t stream;
  EXACTQ_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int i = 0; i < launches; ++i) enqueue(stream, i);
  EXACTQ_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  EXACTQ_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < launches; ++i) enqueue(stream, i);
  EXACTQ_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  EXACTQ_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  EXACTQ_CUDA_CHECK(cudaEventCreate(&start));
  EXACTQ_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) EXACTQ_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    EXACTQ_CUDA_CHECK(cudaEventRecord(start, stream));
    EXACTQ_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    EXACTQ_CUDA_CHECK(cudaEventRecord(stop, stream));
    EXACTQ_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    EXACTQ_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(double(ms) * 1000.0 / launches);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}


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

double l2_bytes() {
  int device = 0, bytes = 0;
  EXACTQ_CUDA_CHECK(cudaGetDevice(&device));
  EXACTQ_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device));
  return double(bytes);
}

double time_qmv_us(Kernel kernel, std::span<const QuantizedMatrixView> weights, std::span<const std::byte> x,
                   std::int64_t m, std::span<std::byte> y, const QmvOptions& options, int repeats) {
  if (weights.empty()) throw std::invalid_argument("[exactq] time_qmv_us: no weights");
  if (repeats < 1) throw std::invalid_argument("[exactq] time_qmv_us: repeats = " + std::to_string(repeats));
  // Each graph replay runs `launches` kernels cycling through the weight copies, so a copy is
  // evicted from L2 before it comes round again.
  const int launches = int(std::max<std::size_t>(weights.size(), 8));
  return median_replay_us(launches, repeats, [&](cudaStream_t stream, int i) {
    cuda::qmv(kernel, weights[std::size_t(i) % weights.size()], x, m, y, options, stream);
  });
}

double read_bandwidth(std::size_t bytes, int repeats) {
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
  if (bytes < 16) throw std::invalid_argument("[exactq] time_read_us: " + std::to_string(bytes) + " bytes (at least 16)");
  if (repeats < 1) throw std::invalid_argument("[exactq] time_read_us: repeats = " + std::to_string(repeats));
  bytes = bytes / 16 * 16;
  // As for the kernels (time_qmv_us): launches rotating over timing_copies copies.
  const int copies = timing_copies(bytes, 0, l2_bytes());
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

std::vector<KernelResources> kernel_resources(int bits) {
  std::vector<KernelResources> out;
  auto add = [&](Kernel kernel, int v, cuda_detail::KernelResources r) {
    out.push_back({std::string(to_string(kernel)), v, r.registers, r.local_bytes, r.blocks_per_sm});
  };
  add(Kernel::qmv, 1, qmv_resources(bits));
  for (int v = 2; v <= kMaxStreamedVectors; ++v) add(Kernel::qmv_streamed, v, qmv_streamed_resources(bits, v));
  for (int v = 1; v <= order::kWideMaxVectors; ++v) add(Kernel::qmv_wide, v, qmv_wide_resources(bits, v));
  // The fragment layout, the benchmark's default for qmv_mma.
  for (int v : {8, 16}) add(Kernel::qmv_mma, v, qmv_mma_fragments_resources(bits, v));
  return out;
}

}  // namespace exactq::bench
