// A measurement prototype, not part of the library (built by hand; the experiment named in
// docs/benchmark_results/2026-12-03-h200-session5-qmv.md §7): qmv's memory request pattern at
// M = 1 with no arithmetic, to tell how much of the gap between 4-bit qmv (~70 % of the read
// ceiling) and the streaming read (~95-100 %) the pattern costs by itself.
//
// Pattern as in src/cuda/qmv_family.cuh at V = 1 and one K tile: 256-thread blocks, as many as
// fit (2 per SM, the qmv kernel's occupancy), tasks of ROWS consecutive rows dealt block-fastest
// (task t to warp t / grid of block t % grid), and per task and round r every lane loads the
// 16 bytes of chunk lane + 32 r of each row, then (PARAMS) the 2-byte scale and bias of that
// chunk's group. ROUNDS rounds are loaded per batch, with two batches in registers (the
// kernel's double buffer). The loaded words are folded with xor so the loads stay alive.
//
// Build: nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a -o pattern FILE
// Run: ./pattern [N K] (defaults: 28672 8192, then 262144 3840); prints µs and % of the read.
#include <cmath>
#include <cstdint>

#include "prototype_common.cuh"


constexpr int kThreads = 256, kWarps = 8, kGroup = 64;

// INTERLEAVED reads a repacked layout: a task's rows interleaved by round (round i of rows 0..ROWS-1
// adjacent, the last partial round compacted), so a warp-round reads ROWS * 512 contiguous bytes.
template <int ROWS, int ROUNDS, bool PARAMS, bool INTERLEAVED = false>
__global__ void __launch_bounds__(kThreads, 1)
    pattern_kernel(const uint4* packed, const uint16_t* scales, const uint16_t* biases, int n, int k, unsigned* sink) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tasks = n / ROWS, chunks = k / 32, groups = k / kGroup;
  const int row_chunks = chunks;  // 16-byte units per row at 4 bits
  unsigned acc = 0;
  for (int task = warp * gridDim.x + blockIdx.x; task < tasks; task += gridDim.x * kWarps) {
    const uint4* rows[ROWS];
    int prow[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      rows[r] = INTERLEAVED ? packed + std::size_t(task) * ROWS * row_chunks
                            : packed + std::size_t(task * ROWS + r) * row_chunks;
      prow[r] = (task * ROWS + r) * groups;
      asm("" : "+l"(rows[r]), "+r"(prow[r]));
    }
    uint4 wa[ROUNDS][ROWS], wb[ROUNDS][ROWS];
    unsigned pa[ROUNDS][ROWS], pb[ROUNDS][ROWS];
    auto load = [&](int c, uint4 (&w)[ROUNDS][ROWS], unsigned (&pr)[ROUNDS][ROWS]) {
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int i = 0; i < ROUNDS; ++i) {
          const int ci = c + 32 * i;
          if (i > 0 && ci >= chunks) continue;
          if constexpr (INTERLEAVED) {
            const int round = ci >> 5, width = min(32, chunks - 32 * round);
            w[i][r] = __ldcs(rows[r] + round * 32 * ROWS + r * width + (ci & 31));
          } else {
            w[i][r] = __ldcs(rows[r] + ci);
          }
          pr[i][r] = PARAMS ? unsigned(scales[prow[r] + ci / 2]) ^ (unsigned(biases[prow[r] + ci / 2]) << 16) : 0u;
        }
    };
    auto use = [&](const uint4 (&w)[ROUNDS][ROWS], const unsigned (&pr)[ROUNDS][ROWS], int c) {
#pragma unroll
      for (int i = 0; i < ROUNDS; ++i) {
        if (i > 0 && c + 32 * i >= chunks) break;
#pragma unroll
        for (int r = 0; r < ROWS; ++r) acc ^= w[i][r].x ^ w[i][r].y ^ w[i][r].z ^ w[i][r].w ^ pr[i][r];
      }
    };
    constexpr int kStride = 32 * ROUNDS;
    int c = lane;
    if (c < chunks) load(c, wa, pa);
    while (c < chunks) {
      if (c + kStride < chunks) load(c + kStride, wb, pb);
      use(wa, pa, c);
      c += kStride;
      if (c >= chunks) break;
      if (c + kStride < chunks) load(c + kStride, wa, pa);
      use(wb, pb, c);
      c += kStride;
    }
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads; practically never stores
}

struct Problem {
  int n, k, copies;
  std::size_t weight_bytes, param_count;
  std::vector<uint4*> packed;
  uint16_t *scales, *biases;
  unsigned* sink;
};

// blocks_per_sm: 2 is qmv's occupancy.
template <int ROWS, int ROUNDS, bool PARAMS, bool INTERLEAVED = false>
void time_pattern(const Problem& p, float stream_us, const char* name, int blocks_per_sm = 2) {
  auto kernel = pattern_kernel<ROWS, ROUNDS, PARAMS, INTERLEAVED>;
  int per_sm = 0, sms = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  PROTOTYPE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  per_sm = std::min(per_sm, blocks_per_sm);
  const int tasks = p.n / ROWS;
  const int grid = std::min(per_sm * sms, tasks);
  const float us = median_launch_us(
      [&](int i) { kernel<<<grid, kThreads>>>(p.packed[i], p.scales, p.biases, p.n, p.k, p.sink); }, p.copies);
  PROTOTYPE_CHECK(cudaGetLastError());
  const int trips = (tasks + grid * kWarps - 1) / (grid * kWarps);
  std::printf("  %-44s %d/SM %2d trips (%4.1f %% full) %8.1f us  %5.1f %% of the streaming read of the same bytes\n", name, per_sm, trips,
              100.0 * tasks / (double(trips) * grid * kWarps), us, 100.0 * stream_us / us);
}

void run(int n, int k) {
  Problem p{n, k, 0, std::size_t(n) * k / 2, std::size_t(n) * (k / kGroup), {}, nullptr, nullptr, nullptr};
  const double bytes = double(p.weight_bytes) + 4.0 * double(p.param_count);
  p.copies = std::max(2, int(std::ceil(240e6 / bytes)));
  for (int i = 0; i < p.copies; ++i) {
    uint4* w = nullptr;
    PROTOTYPE_CHECK(cudaMalloc(&w, p.weight_bytes));
    PROTOTYPE_CHECK(cudaMemset(w, 0x5a + i, p.weight_bytes));
    p.packed.push_back(w);
  }
  PROTOTYPE_CHECK(cudaMalloc(&p.scales, p.param_count * 2));
  PROTOTYPE_CHECK(cudaMalloc(&p.biases, p.param_count * 2));
  PROTOTYPE_CHECK(cudaMemset(p.scales, 0x3c, p.param_count * 2));
  PROTOTYPE_CHECK(cudaMemset(p.biases, 0x3c, p.param_count * 2));
  PROTOTYPE_CHECK(cudaMalloc(&p.sink, 4));
  const float plain_us = stream_read_us<1>(p.packed, p.weight_bytes, p.sink);
  const float stream_us = stream_read_us<4>(p.packed, p.weight_bytes, p.sink);
  std::printf("%d x %d, 4-bit g64: streaming read of the %.1f MB of weights %.1f us (%.0f GB/s; one load in flight "
              "per thread: %.1f us); percentages below are of the former\n",
              n, k, p.weight_bytes / 1e6, stream_us, p.weight_bytes / stream_us * 1e-3, plain_us);
  time_pattern<4, 1, true>(p, stream_us, "qmv's pattern: 4 rows, 512 B, params");
  time_pattern<4, 1, false>(p, stream_us, "4 rows, 512 B, no params");
  time_pattern<4, 1, true>(p, stream_us, "4 rows, 512 B, params", 3);
  time_pattern<4, 1, true>(p, stream_us, "4 rows, 512 B, params", 4);
  time_pattern<4, 1, true, true>(p, stream_us, "4 rows interleaved (2 KB), params");
  time_pattern<4, 1, true, true>(p, stream_us, "4 rows interleaved (2 KB), params", 4);
  time_pattern<4, 2, true>(p, stream_us, "4 rows, 1 KB batches, params");
  time_pattern<4, 4, false>(p, stream_us, "4 rows, 2 KB batches, no params");
  time_pattern<2, 2, true>(p, stream_us, "2 rows, 1 KB batches, params");
  time_pattern<2, 2, false>(p, stream_us, "2 rows, 1 KB batches, no params");
  time_pattern<2, 1, true>(p, stream_us, "2 rows, 512 B, params", 4);
  time_pattern<1, 4, false>(p, stream_us, "1 row, 2 KB batches, no params");
  time_pattern<1, 2, true>(p, stream_us, "1 row, 1 KB batches, params", 4);
  time_pattern<8, 1, false>(p, stream_us, "8 rows, 512 B, no params");
  for (auto w : p.packed) cudaFree(w);
  cudaFree(p.scales);
  cudaFree(p.biases);
  cudaFree(p.sink);
}

int main(int argc, char** argv) {
  if (argc == 3) {
    run(std::atoi(argv[1]), std::atoi(argv[2]));
  } else {
    run(28672, 8192);
    run(25344, 8192);  // 3 whole trips of 4-row tasks at 2 blocks of 8 warps on 132 SMs
    run(262144, 3840);
    run(15360, 3840);
    run(3840, 15360);
  }
  return 0;
}
