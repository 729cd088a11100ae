// A measurement prototype, not part of the library (built by hand): does the distance between
// the tasks of qmv_mma's fragment layout decide how fast its loads stream?
//
// In the fragment layout a 16-row task is K/256 rounds of 2 KB, stored one after another, so
// concurrently running warps read 2 KB pieces exactly one task apart: 64 KB on 28672x8192, 32 KB
// on Llama's head, 30 KB on Gemma's. qmv_mma reaches 75 %, 85 % and 91 % of the read ceiling on
// those three, and its loads alone 77 % on the first (session 10). Power-of-two distances can
// pile the concurrent requests onto a few memory channels. This reads the same pattern (a warp
// per task, all rounds in order, two rounds in flight as the kernel's register double buffer)
// with the tasks placed `stride` bytes apart, for strides equal to the task and padded ones.
//
// Build: nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a -o stride
//          bench/prototypes/task_stride_probe.cu
#include <cstdint>
#include <cstdio>
#include <vector>

#include "prototype_common.cuh"

constexpr int kRoundBytes = 2048;  // 16 rows x 128 bytes
constexpr int kWarps = 14;         // qmv_mma's block at M <= 8

// Lane l reads 16 bytes at l * 16 of each of the round's four 512-byte pieces.
__global__ void __launch_bounds__(kWarps * 32) task_read_kernel(const std::uint8_t* base, long long stride, int tasks,
                                                                 int rounds, unsigned* sink) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned fold = 0;
  for (int task = warp * gridDim.x + blockIdx.x; task < tasks; task += gridDim.x * kWarps) {
    const uint4* p = reinterpret_cast<const uint4*>(base + std::size_t(task) * stride) + lane;
    uint4 a[4], b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = __ldcs(p + 32 * i);
    for (int r = 0; r < rounds; r += 2) {
      if (r + 1 < rounds)
#pragma unroll
        for (int i = 0; i < 4; ++i) b[i] = __ldcs(p + (r + 1) * (kRoundBytes / 16) + 32 * i);
#pragma unroll
      for (int i = 0; i < 4; ++i) fold ^= a[i].x ^ a[i].y ^ a[i].z ^ a[i].w;
      if (r + 1 >= rounds) break;
      if (r + 2 < rounds)
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = __ldcs(p + (r + 2) * (kRoundBytes / 16) + 32 * i);
#pragma unroll
      for (int i = 0; i < 4; ++i) fold ^= b[i].x ^ b[i].y ^ b[i].z ^ b[i].w;
    }
  }
  if (fold == 0x9e3779b9u) *sink = fold;
}

int main() {
  unsigned* sink;
  PROTOTYPE_CHECK(cudaMalloc(&sink, 4));
  std::vector<std::uint8_t*> big(2);
  const std::size_t big_bytes = std::size_t(1) << 30;
  for (auto& b : big) {
    PROTOTYPE_CHECK(cudaMalloc(&b, big_bytes));
    PROTOTYPE_CHECK(cudaMemset(b, 1, big_bytes));
  }
  const float ceiling_us = stream_read_us<4>(big, big_bytes, sink);
  const double ceiling = double(big_bytes) / ceiling_us * 1e-3;
  std::printf("ceiling: streaming read of 1 GB %.1f us = %.0f GB/s\n", ceiling_us, ceiling);
  const int grid = prototype_sm_count();
  struct Shape {
    const char* name;
    int n, k;
  };
  for (const Shape s : {Shape{"28672x8192", 28672, 8192}, Shape{"llama.head 128256x4096", 128256, 4096},
                        Shape{"gemma.head 262144x3840", 262144, 3840}, Shape{"17408x5120", 17408, 5120},
                        Shape{"15360x3840", 15360, 3840}}) {
    const int tasks = s.n / 16, rounds = s.k / 256;
    const long long task_bytes = 1LL * rounds * kRoundBytes;
    const std::size_t bytes = std::size_t(tasks) * task_bytes;
    std::printf("\n%s: %d tasks of %lld bytes (%.1f MB)\n", s.name, tasks, task_bytes, bytes / 1e6);
    for (const long long pad : {0LL, 256LL, 512LL, 2048LL, 4096LL, -2048LL}) {
      const long long stride = task_bytes + pad;
      const std::size_t span = std::size_t(tasks - 1) * stride + task_bytes;
      const int copies = int(std::max<std::size_t>(2, (std::size_t(200) << 20) / bytes + 1));
      if (pad < 0 && rounds < 2) continue;
      std::vector<std::uint8_t*> buffers(copies);
      for (auto& b : buffers) {
        PROTOTYPE_CHECK(cudaMalloc(&b, span));
        PROTOTYPE_CHECK(cudaMemset(b, 1, span));
      }
      // A negative pad overlaps neighbours (reads 2 KB less apart): only the spacing is measured.
      const float us = median_launch_us(
          [&](int i) { task_read_kernel<<<grid, kWarps * 32>>>(buffers[i], stride, tasks, rounds, sink); }, copies);
      std::printf("  stride %7lld (pad %+5lld): %7.1f us  %5.1f %% of the ceiling\n", stride, pad, us,
                  100.0 * bytes / us * 1e-3 / ceiling);
      for (auto& b : buffers) cudaFree(b);
    }
  }
  return 0;
}
