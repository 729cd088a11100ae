// qmv_mma's weight requests with no arithmetic: does its pattern (a warp owns 16 rows and copies
// 128 bytes of each per ring stage through cp.async) run at the speed of a streaming read? If it
// does, qmv_mma at M = 1 is held back by its arithmetic and latencies; if not, by the pattern
// (then issuing two stages of a row at once, 256-byte requests, is the next thing to try).
//
// Each warp walks its tasks (16 rows, all of K) as qmv_mma does, with a ring of STAGES slots; a
// lane waits for each stage and xor-folds the word it would convert, so the copies must land.
// ROW_BYTES is the bytes of a row per copy round: 128 is qmv_mma's, 256 copies two stages of a
// row in one round. 4-bit codes; the group parameters are left out (3 % of the bytes).
// STAGE_MAJOR reads the same bytes as if repacked at load time into the mma's stage order: each
// 16-row task stored round by round, so a warp's round (16 x ROW_BYTES) is contiguous.
//
// Build: nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a -o .out/mma_pattern
//        bench/prototypes/mma_pattern_read.cu
#include <cstdint>
#include <cstdio>
#include <vector>

#include "prototype_common.cuh"

namespace {

constexpr int kRows = 16;

__device__ __forceinline__ void copy16(void* shared, const void* global) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(global));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait_pending() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

template <int WARPS, int STAGES, int ROW_BYTES, bool STAGE_MAJOR = false>
__global__ void __launch_bounds__(WARPS * 32) pattern_kernel(const std::uint8_t* packed, int n, int k, unsigned* sink) {
  constexpr int kRowStride = ROW_BYTES + 16;  // padded as qmv_mma pads
  constexpr int kSlotBytes = kRows * kRowStride;
  constexpr int kPieces = ROW_BYTES / 64;  // 16-byte pieces per lane and row, rows g and g + 8
  extern __shared__ std::uint8_t ring_all[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  std::uint8_t* ring = ring_all + warp * STAGES * kSlotBytes;
  const std::size_t row_bytes = std::size_t(k) / 2;
  const int rounds = int(row_bytes / ROW_BYTES);
  const int tasks = n / kRows;
  unsigned fold = 0;
  for (int task = warp * gridDim.x + blockIdx.x; task < tasks; task += gridDim.x * WARPS) {
    // Row-major (MLX's layout): row r's round j at r * row_bytes + j * ROW_BYTES. Stage-major:
    // the task's round j is one block of 16 rows x ROW_BYTES, rows in order.
    const std::uint8_t* task_base = packed + std::size_t(task) * kRows * row_bytes;
    const std::size_t row_step = STAGE_MAJOR ? ROW_BYTES : row_bytes;
    const std::size_t round_step = STAGE_MAJOR ? std::size_t(kRows) * ROW_BYTES : ROW_BYTES;
    const std::uint8_t* lo = task_base + g * row_step + 16 * t;
    const std::uint8_t* hi = lo + 8 * row_step;
    auto issue = [&](int round, int slot) {
      if (round < rounds) {
        std::uint8_t* to = ring + slot * kSlotBytes + g * kRowStride + 16 * t;
#pragma unroll
        for (int piece = 0; piece < kPieces; ++piece) {
          copy16(to + 64 * piece, lo + std::size_t(round) * round_step + 64 * piece);
          copy16(to + 8 * kRowStride + 64 * piece, hi + std::size_t(round) * round_step + 64 * piece);
        }
      }
      commit();
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s, s);
    int slot = 0;
    for (int round = 0; round < rounds; ++round) {
      issue(round + STAGES - 1, slot == 0 ? STAGES - 1 : slot - 1);
      wait_pending<STAGES - 1>();
      __syncwarp();
      const std::uint8_t* at = ring + slot * kSlotBytes + g * kRowStride + 4 * t;
#pragma unroll
      for (int j = 0; j < ROW_BYTES / 16; ++j)
        fold ^= *reinterpret_cast<const unsigned*>(at + 16 * j) ^ *reinterpret_cast<const unsigned*>(at + 8 * kRowStride + 16 * j);
      __syncwarp();
      slot = slot == STAGES - 1 ? 0 : slot + 1;
    }
    wait_pending<0>();
  }
  if (fold == 0x9e3779b9u) *sink = fold;
}

struct Run {
  int n, k;
  std::vector<std::uint8_t*> copies;
  unsigned* sink;
};

template <int WARPS, int STAGES, int ROW_BYTES, bool STAGE_MAJOR = false>
void report(const Run& r, float read_us, const char* name) {
  constexpr std::size_t smem = std::size_t(WARPS) * STAGES * kRows * (ROW_BYTES + 16);
  auto kernel = pattern_kernel<WARPS, STAGES, ROW_BYTES, STAGE_MAJOR>;
  PROTOTYPE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int per_sm = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, WARPS * 32, smem));
  const int grid = per_sm * prototype_sm_count();
  const float us = median_launch_us(
      [&](int i) { kernel<<<grid, WARPS * 32, smem>>>(r.copies[i], r.n, r.k, r.sink); }, int(r.copies.size()));
  PROTOTYPE_CHECK(cudaGetLastError());
  // Rows whose bytes are not a whole number of rounds leave their tail unread: rates count what
  // was read.
  const double all = double(r.n) * r.k / 2, read = double(r.n) * (std::size_t(r.k) / 2 / ROW_BYTES) * ROW_BYTES;
  std::printf("  %-44s %d/SM %8.1f us  %6.0f GB/s  %5.1f %% of the streaming read\n", name, per_sm, us,
              read / us * 1e-3, 100.0 * (read / us) / (all / read_us));
}

void run(int n, int k) {
  const std::size_t bytes = std::size_t(n) * k / 2;
  Run r{n, k, {}, nullptr};
  const int copies = int(std::max<std::size_t>(1, std::min<std::size_t>(8, 240e6 / bytes + 1)));
  for (int i = 0; i < copies; ++i) {
    std::uint8_t* p = nullptr;
    PROTOTYPE_CHECK(cudaMalloc(&p, bytes));
    PROTOTYPE_CHECK(cudaMemset(p, 0x5a + i, bytes));
    r.copies.push_back(p);
  }
  PROTOTYPE_CHECK(cudaMalloc(&r.sink, 4));
  const float read_us = stream_read_us<4>(r.copies, bytes, r.sink);
  std::printf("%d x %d, 4-bit codes, %.1f MB: streaming read %.1f us (%.0f GB/s)\n", n, k, bytes / 1e6, read_us,
              bytes / read_us * 1e-3);
  report<16, 3, 128>(r, read_us, "16 warps, 3 stages of 128 B (qmv_mma's)");
  report<8, 3, 128>(r, read_us, "8 warps, 3 stages of 128 B");
  report<16, 4, 128>(r, read_us, "16 warps, 4 stages of 128 B");
  report<16, 2, 256>(r, read_us, "16 warps, 2 stages of 256 B");
  report<16, 3, 256>(r, read_us, "16 warps, 3 stages of 256 B");
  report<8, 3, 256>(r, read_us, "8 warps, 3 stages of 256 B");
  report<16, 3, 128, true>(r, read_us, "16 warps, 3 stages of 128 B, stage-major");
  report<16, 2, 256, true>(r, read_us, "16 warps, 2 stages of 256 B, stage-major");
  for (auto p : r.copies) cudaFree(p);
  cudaFree(r.sink);
}

}  // namespace

int main() {
  run(28672, 8192);
  run(262144, 3840);
  run(15360, 3840);
  return 0;
}
