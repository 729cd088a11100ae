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
// Then the group parameters (session 11, second question): qmv_mma's fragment layout keeps a
// round's scales and biases in two arrays beside the codes (64 bytes each per task and round,
// a lane's 8 bytes read with one 8-byte load per array, the four lanes of a row pair reading the
// same bytes). PARAMS = 1 adds those two loads per round; PARAMS = 2 reads the same 128 bytes
// placed right after the round's codes (2176 contiguous bytes per round), one 16-byte load per
// lane. The kernel's own loads-only probe (session 10) reached 77 % where this pattern alone
// reaches 84 %.
//
// Build: nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a -o stride
//          bench/prototypes/task_stride_probe.cu
#include <cstdint>
#include <cstdio>
#include <vector>

#include "prototype_common.cuh"

constexpr int kRoundBytes = 2048;  // 16 rows x 128 bytes
constexpr int kWarps = 14;         // qmv_mma's block at M <= 8

// Lane l reads 16 bytes at l * 16 of each of the round's four 512-byte pieces, and with PARAMS
// its row pair's parameters (see above).
constexpr int kParamBytes = 128;  // per task and round: 64 of scales, 64 of biases
template <int PARAMS>
__global__ void __launch_bounds__(kWarps * 32) task_read_kernel(const std::uint8_t* base, long long stride, int tasks,
                                                                 int rounds, const std::uint8_t* params, unsigned* sink) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  constexpr int kRoundStride = PARAMS == 2 ? kRoundBytes + kParamBytes : kRoundBytes;
  unsigned fold = 0;
  for (int task = warp * gridDim.x + blockIdx.x; task < tasks; task += gridDim.x * kWarps) {
    const std::uint8_t* tb = base + std::size_t(task) * stride;
    // PARAMS == 1: scales [task][round][64 bytes], then biases the same.
    const std::uint8_t* sb = params + std::size_t(task) * rounds * 64;
    const std::uint8_t* bb = sb + std::size_t(tasks) * rounds * 64;
    auto load = [&](int r, uint4 (&w)[5]) {
      const uint4* p = reinterpret_cast<const uint4*>(tb + std::size_t(r) * kRoundStride) + lane;
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = __ldcs(p + 32 * i);
      if constexpr (PARAMS == 1) {
        const uint2 sc = __ldcs(reinterpret_cast<const uint2*>(sb + std::size_t(r) * 64) + g);
        const uint2 bi = __ldcs(reinterpret_cast<const uint2*>(bb + std::size_t(r) * 64) + g);
        w[4] = make_uint4(sc.x, sc.y, bi.x, bi.y);
      } else if constexpr (PARAMS == 2) {
        w[4] = __ldcs(reinterpret_cast<const uint4*>(tb + std::size_t(r) * kRoundStride + kRoundBytes) + g);
      } else {
        w[4] = make_uint4(0, 0, 0, 0);
      }
    };
    uint4 a[5], b[5];
    load(0, a);
    for (int r = 0; r < rounds; r += 2) {
      if (r + 1 < rounds) load(r + 1, b);
#pragma unroll
      for (int i = 0; i < 5; ++i) fold ^= a[i].x ^ a[i].y ^ a[i].z ^ a[i].w;
      if (r + 1 >= rounds) break;
      if (r + 2 < rounds) load(r + 2, a);
#pragma unroll
      for (int i = 0; i < 5; ++i) fold ^= b[i].x ^ b[i].y ^ b[i].z ^ b[i].w;
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
    const int copies = int(std::max<std::size_t>(2, (std::size_t(200) << 20) / bytes + 1));
    for (const long long pad : {0LL, 2048LL}) {
      for (int params = 0; params < 3; ++params) {
        const long long round_stride = params == 2 ? kRoundBytes + kParamBytes : kRoundBytes;
        const long long stride = rounds * round_stride + pad;
        const std::size_t span = std::size_t(tasks - 1) * stride + rounds * round_stride;
        std::vector<std::uint8_t*> buffers(copies), pbuf(copies);
        for (int i = 0; i < copies; ++i) {
          PROTOTYPE_CHECK(cudaMalloc(&buffers[i], span));
          PROTOTYPE_CHECK(cudaMemset(buffers[i], 1, span));
          PROTOTYPE_CHECK(cudaMalloc(&pbuf[i], std::size_t(tasks) * rounds * kParamBytes));
          PROTOTYPE_CHECK(cudaMemset(pbuf[i], 1, std::size_t(tasks) * rounds * kParamBytes));
        }
        const float us = median_launch_us(
            [&](int i) {
              if (params == 0) task_read_kernel<0><<<grid, kWarps * 32>>>(buffers[i], stride, tasks, rounds, pbuf[i], sink);
              if (params == 1) task_read_kernel<1><<<grid, kWarps * 32>>>(buffers[i], stride, tasks, rounds, pbuf[i], sink);
              if (params == 2) task_read_kernel<2><<<grid, kWarps * 32>>>(buffers[i], stride, tasks, rounds, pbuf[i], sink);
            },
            copies);
        const double moved = double(bytes) + (params ? double(tasks) * rounds * kParamBytes : 0.0);
        const char* what[3] = {"codes only", "codes + params in two arrays", "codes + params after each round"};
        std::printf("  pad %+5lld, %-32s %7.1f us  %5.1f %% of the ceiling\n", pad, what[params], us,
                    100.0 * moved / us * 1e-3 / ceiling);
        for (int i = 0; i < copies; ++i) cudaFree(buffers[i]), cudaFree(pbuf[i]);
      }
    }
  }
  return 0;
}
