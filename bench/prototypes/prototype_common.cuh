// Shared by the hand-built measurement prototypes in this folder (not part of the library): an
// error check and a median timer that rotates launches over enough weight copies to stay out of
// the 60 MB L2.
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
