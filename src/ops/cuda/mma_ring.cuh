// qmv_mma.cu's weight ring: per warp, kMmaStages stages of 16 rows' codes and their group
// parameters in shared memory, filled by cp.async (common.cuh's copy_async_if) and read back
// as the mma's A fragments.
#pragma once

#include "ops/cuda/mma_codes.cuh"
#include "ops/cuda/mma_common.cuh"

namespace exactq::cuda_detail::mma {

// Bytes of one row in one ring stage: a whole 128-byte line per row (64 B per row and stage
// measured 1.0 TB/s on 28672x8192: half-line reads from 16 rows scattered the DRAM accesses).
inline constexpr int kStageRowBytes = 128;
static_assert(kStageRowBytes == mma_layout::kRoundRowBytes, "a stage is a round of the K split (src/order/qmv_mma.h)");
// Ring depth: kMmaStages - 1 stages in flight per warp while one is read. Each stage more puts
// more bytes in flight and takes kMmaWarps * MmaStage::kBytes of shared memory from x's tile.
inline constexpr int kMmaStages = 3;

// One ring stage of a warp, for BITS and GROUP: the 16 rows' codes (kStageRowBytes each, padded
// rows), then the stage's group parameters, copied by the same cp.async ring so that no group
// waits for a parameter load and none passes through registers: scales [16 rows][kParamBytes],
// then biases [16 rows][kParamBytes]. Lane l copies row l / 2's scales (l even) or biases (l odd).
template <int BITS, int GROUP>
struct MmaStage {
  static constexpr int kChunks = kStageRowBytes / (4 * BITS);  // 8 at 4 bits, 4 at 8 bits
  static constexpr int kChunkBytes = 4 * BITS;
  static constexpr int kGroups = 32 * kChunks / GROUP;         // groups per stage: 1..8
  static constexpr int kChunksPerGroup = GROUP / 32;
  static_assert(kGroups >= 1, "a stage holds whole groups");
  static constexpr int kRowStride = kStageRowBytes + 4 * BITS;  // padded: conflict-free fragment reads
  static constexpr int kCodeBytes = kMmaRows * kRowStride;
  // A row's parameters of one stage are 2 * kGroups bytes, aligned to that (K is a multiple of the
  // stage). One group (8 bits, g128) is 2 bytes, below cp.async's 4: then the aligned 4-byte word
  // holding it is copied, and the reader picks the half.
  static constexpr int kParamBytes = 2 * kGroups < 4 ? 4 : 2 * kGroups;
  static constexpr int kBytes = kCodeBytes + 2 * kMmaRows * kParamBytes;
  static_assert(kCodeBytes % 16 == 0 && kBytes % 16 == 0, "16-byte aligned pieces");
};

// The rings of one block.
template <int BITS, int GROUP>
EXACTQ_HD constexpr std::size_t mma_ring_bytes() { return std::size_t(kMmaWarps) * kMmaStages * MmaStage<BITS, GROUP>::kBytes; }

// N consecutive 32-bit words from shared memory in the widest loads their alignment allows (the
// callers' offsets are multiples of 4 N bytes).
template <int N>
__device__ __forceinline__ void read_words(const void* at, std::uint32_t (&w)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const uint4 v = reinterpret_cast<const uint4*>(at)[i / 4];
      w[i] = v.x, w[i + 1] = v.y, w[i + 2] = v.z, w[i + 3] = v.w;
    }
  } else if constexpr (N == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(at);
    w[0] = v.x, w[1] = v.y;
  } else {
    static_assert(N == 1);
    w[0] = *reinterpret_cast<const std::uint32_t*>(at);
  }
}

// A lane's words of one chunk of one row in the ring: word t (4 bits) or words 2t, 2t+1 (8 bits).
template <int BITS>
__device__ __forceinline__ void read_chunk_words(const std::uint8_t* at, std::uint32_t (&w)[BITS / 4]) {
  if constexpr (BITS == 4) {
    w[0] = *reinterpret_cast<const std::uint32_t*>(at);
  } else {
    const uint2 v = *reinterpret_cast<const uint2*>(at);
    w[0] = v.x, w[1] = v.y;
  }
}

// The stage's kGroups parameters of one row (scales or biases) as f32, from the stage's copy.
// `odd` (one group per stage only) says which half of the copied word is the group's.
template <int BITS, int GROUP, bool BF16>
__device__ __forceinline__ void read_params(const std::uint8_t* at, bool odd, float (&out)[MmaStage<BITS, GROUP>::kGroups]) {
  using Stage = MmaStage<BITS, GROUP>;
  auto widen = widen_param<BF16>;
  std::uint32_t w[Stage::kParamBytes / 4];
  read_words<Stage::kParamBytes / 4>(at, w);
  if constexpr (Stage::kGroups == 1) {
    out[0] = widen(odd ? w[0] >> 16 : w[0] & 0xffffu);
  } else {
#pragma unroll
    for (int i = 0; i < Stage::kGroups; ++i) out[i] = widen(i % 2 ? w[i / 2] >> 16 : w[i / 2] & 0xffffu);
  }
}

}  // namespace exactq::cuda_detail::mma
