// Shared by the hand-built measurement prototypes in this folder (not part of the library): an
// error check, a median timer that rotates launches over enough weight copies to stay out of
// the 60 MB L2, and the streaming read they compare against.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define PROTOTYPE_CHECK(x)                                                         \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::printf("CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

// Median microseconds per launch over 15 timed passes of 4 rotations through `copies` (after two
// rotations of warm-up); launch(i) launches on copy i.
template <typename Launch>
float median_launch_us(Launch&& launch, int copies) {
  cudaEvent_t a, b;
  PROTOTYPE_CHECK(cudaEventCreate(&a));
  PROTOTYPE_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 2 * copies; ++i) launch(i % copies);
  std::vector<float> t;
  for (int rep = 0; rep < 15; ++rep) {
    PROTOTYPE_CHECK(cudaEventRecord(a));
    for (int i = 0; i < 4 * copies; ++i) launch(i % copies);
    PROTOTYPE_CHECK(cudaEventRecord(b));
    PROTOTYPE_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PROTOTYPE_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0f / float(4 * copies));
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

inline int prototype_sm_count() {
  int sms = 0;
  PROTOTYPE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  return sms;
}

// As src/cuda/read_ceiling.cu: UNROLL 16-byte loads in flight per thread (1 is the plain
// grid-stride read), folded with xor so that the loads stay alive.
template <int UNROLL>
__global__ void stream_kernel(const uint4* data, std::size_t count, unsigned* sink) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < count; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(data + i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < count; i += stride) {
    const uint4 v = __ldcs(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // practically never stores
}

// Median microseconds of a streaming read of the first `bytes` of each buffer, rotating over them,
// with as many 512-thread blocks as fit.
template <int UNROLL, typename T>
float stream_read_us(const std::vector<T*>& buffers, std::size_t bytes, unsigned* sink) {
  int per_sm = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stream_kernel<UNROLL>, 512, 0));
  const int grid = per_sm * prototype_sm_count();
  return median_launch_us(
      [&](int i) { stream_kernel<UNROLL><<<grid, 512>>>(reinterpret_cast<const uint4*>(buffers[i]), bytes / 16, sink); },
      int(buffers.size()));
}
