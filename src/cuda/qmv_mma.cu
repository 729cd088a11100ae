// qmv_mma on CUDA: one tensor-core schedule for every M (docs/design.md §6, decision 0002).
//
// A warp owns 16 output rows and walks all of K for them. Per 32-code chunk and row, lane
// (g, t) = (lane / 4, lane % 4) holds word t of the chunk (codes 8t .. 8t+7) of rows g and g+8,
// converts the codes exactly to bf16/f16 pairs and feeds two m16n8k16 mma steps with them:
//   k-step 0: A columns (2t, 2t+1) <- codes (8t, 8t+4), (2t+8, 2t+9) <- codes (8t+1, 8t+5)
//   k-step 1: A columns (2t, 2t+1) <- codes (8t+2, 8t+6), (2t+8, 2t+9) <- codes (8t+3, 8t+7)
// B holds the activations in the same permuted order, staged once per block per K tile, so a
// lane's B fragment for a chunk is one 16-byte shared-memory read. A k-step never leaves its
// chunk, so never its group: the mma accumulators hold acc_g = sum over group g of x * q, with
// the raw integer codes (exact in bf16 and f16), in f32. Each group is then folded in f32,
//   total = fma(scale_g, acc_g, fma(bias_g, S_g, total)),
// with S_g the f32 sum of the group's activations, in increasing group order.
//
// Width invariance: vector v is column v % 8 of n-tile v / 8. An mma output column depends only
// on its own column of B (checked on the H200 for bf16 and f16: tests/cuda/test_mma_probe.cpp),
// and the instruction sequence per (row, vector) is fixed by N, K, bits, group and dtype. M only
// decides how many n-tiles a pass runs (1 or 2) and how many passes of 16 vectors there are.
//
// Weights stream HBM -> shared memory through a per-warp cp.async ring (several stages in
// flight without spending registers), in MLX's layout, read once per pass.
#include <cuda_bf16.h>

#include "cuda/common.cuh"
#include "cuda/launch.h"

namespace exactq::cuda_detail {

namespace {

// Warps per block. Where N has too few 16-row tasks to give every SM a block of 8 task warps (a
// down projection has 240 tasks), only the first `task_warps` warps of a block take tasks and the
// others just help stage x, so the blocks spread over all SMs. The launcher picks task_warps from
// N and the SM count; it never enters any row's arithmetic.
inline constexpr int kMmaWarps = 8;
inline constexpr int kMmaThreads = kMmaWarps * 32;
inline constexpr int kMmaRows = 16;          // rows per warp task: the mma's M
// Bytes of one row in one ring stage: a whole 128-byte line per row (64 B per row and stage
// measured 1.0 TB/s on 28672x8192: half-line reads from 16 rows scattered the DRAM accesses).
inline constexpr int kStageRowBytes = 128;
// Ring depth (a -D knob for tuning: more stages, more bytes in flight per warp, more shared memory).
#ifndef EXACTQ_MMA_STAGES
#define EXACTQ_MMA_STAGES 3
#endif
inline constexpr int kMmaStages = EXACTQ_MMA_STAGES;
inline constexpr int kPassVectors = 16;      // vectors per pass: two n-tiles of 8

// Experiment (-D): feed 4-bit codes to the mma as magic + q (128 in bf16, 1024 in f16) instead of
// q, and fold the offset into the bias, b - magic * s: one HSUB2 less per two weights, at the
// price of f32 sums over larger values. Off by default (exact codes).
#ifndef EXACTQ_MMA_OFFSET_CODES
#define EXACTQ_MMA_OFFSET_CODES 0
#endif
template <int BITS, bool BF16>
inline constexpr float kCodeOffset = (EXACTQ_MMA_OFFSET_CODES && BITS == 4) ? (BF16 ? 128.0f : 1024.0f) : 0.0f;

struct MmaParams {
  const std::uint8_t* packed;
  const void* scales;
  const void* biases;
  const void* x;
  void* y;
  std::int64_t n, k, m;
  int group;
  int tile_values;  // K values of x staged at a time (a multiple of 256, or all of K)
  DType dtype;
  int task_warps;   // warps of a block that take tasks (1..8)
};

// Group parameters travel in windows of 16 groups: each lane loads 16 raw 16-bit values (row
// lane/2, scales or biases by lane%2) a whole window ahead into registers and parks them in a
// per-warp double buffer [2][16 rows][16 groups][scale, bias] when the window starts, so no
// group ever waits for a parameter load (a load per group stalled each group for a full HBM
// latency).
inline constexpr int kWindowGroups = 16;
inline constexpr int kParamBufferBytes = 2 * kMmaRows * 2 * kWindowGroups * 2;

template <int BITS>
inline constexpr int kRowStride = kStageRowBytes + 4 * BITS;  // padded: conflict-free fragment reads
template <int BITS>
inline constexpr int kStageBytes = kMmaRows * kRowStride<BITS>;
template <int BITS>
inline constexpr int kChunksPerStage = kStageRowBytes / (4 * BITS);  // 8 at 4 bits, 4 at 8 bits

// Shared memory: the staged activations [tile chunks][count vectors][4 lanes] x 16 B, the group
// sums [tile groups][count vectors] f32, then the weight rings of the 8 warps. Only the pass's
// real vectors are staged (count <= 16), so at M = 1 a whole K of 28672 fits at once; the tile
// size never enters the arithmetic (tiles hold whole groups).
inline std::size_t mma_x_bytes(int tile_values, int count) { return std::size_t(tile_values) / 32 * count * 64; }
inline std::size_t mma_sum_bytes(int tile_values, int count) { return std::size_t(tile_values) / 32 * count * 4; }
template <int BITS>
std::size_t mma_ring_bytes() { return std::size_t(kMmaWarps) * (kMmaStages * kStageBytes<BITS> + kParamBufferBytes); }
template <int BITS>
std::size_t mma_smem(int tile_values, int count) {
  return mma_x_bytes(tile_values, count) + mma_sum_bytes(tile_values, count) + mma_ring_bytes<BITS>();
}

// Two codes' bf16/f16 patterns from 16-bit halves that hold (magic | code): the magic is the
// float whose unit in the last place is 1 (128 in bf16, 1024 in f16), so subtracting it leaves
// the code exactly.
template <bool BF16>
__device__ __forceinline__ std::uint32_t exact_pair(std::uint32_t magic_or_codes) {
  if constexpr (BF16) {
    const __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&magic_or_codes);
    const __nv_bfloat162 r = __hsub2(v, __floats2bfloat162_rn(128.0f, 128.0f));
    return *reinterpret_cast<const std::uint32_t*>(&r);
  } else {
    const __half2 v = *reinterpret_cast<const __half2*>(&magic_or_codes);
    const __half2 r = __hsub2(v, __floats2half2_rn(1024.0f, 1024.0f));
    return *reinterpret_cast<const std::uint32_t*>(&r);
  }
}

// (x & MASK) | MAGIC in one LOP3; left to itself the compiler emits an AND and an OR (LOP3 takes
// one immediate).
template <std::uint32_t MASK, std::uint32_t MAGIC>
__device__ __forceinline__ std::uint32_t and_or(std::uint32_t x) {
  std::uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(x), "n"(MASK), "n"(MAGIC));
  return r;
}

// The 8 codes of a lane for one chunk and row, as the 4 A registers of the two k-steps:
// pairs (c0,c4), (c1,c5), (c2,c6), (c3,c7) of codes c0..c7 = 8t .. 8t+7.
template <int BITS, bool BF16>
__device__ __forceinline__ void codes_to_pairs(const std::uint32_t* w, std::uint32_t (&pair)[4]) {
  if constexpr (BITS == 4) {
    // Word w[0] holds c_i at bits 4i. (w >> 4i) & 0x000F000F puts c_i and c_{i+4} in the halves.
    constexpr std::uint32_t kMagic = BF16 ? 0x43004300u : 0x64006400u;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const std::uint32_t magic_or_codes = and_or<0x000F000Fu, kMagic>(w[0] >> (4 * i));
      pair[i] = kCodeOffset<BITS, BF16> != 0.0f ? magic_or_codes : exact_pair<BF16>(magic_or_codes);
    }
  } else {
    static_assert(BITS == 8);
    // w[0] holds c0..c3 and w[1] holds c4..c7, one byte each.
    if constexpr (!BF16) {
      // f16 has 10 mantissa bits: 1024 + c is exact for c < 1024.
#pragma unroll
      for (int i = 0; i < 4; ++i)
        pair[i] = exact_pair<false>(and_or<0x00FF00FFu, 0x64006400u>(__byte_perm(w[0], w[1], 0x0400 + 0x0101 * i)));
    } else {
      // bf16 has 7 mantissa bits: split c = 16 h + l, each exact as 128 + nibble, and recombine
      // with results that are all exact in bf16: 16 (128 + h) - 2176 = 16 (h - 8), then
      // + (128 + l) = c.
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const std::uint32_t bytes = __byte_perm(w[0], w[1], 0x0400 + 0x0101 * i);  // c_i, c_{i+4} in the halves
        const std::uint32_t lo = and_or<0x000F000Fu, 0x43004300u>(bytes);
        const std::uint32_t hi = and_or<0x000F000Fu, 0x43004300u>(bytes >> 4);
        const __nv_bfloat162 l = *reinterpret_cast<const __nv_bfloat162*>(&lo);
        const __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&hi);
        const __nv_bfloat162 r =
            __hadd2(__hfma2(h, __floats2bfloat162_rn(16.0f, 16.0f), __floats2bfloat162_rn(-2176.0f, -2176.0f)), l);
        pair[i] = *reinterpret_cast<const std::uint32_t*>(&r);
      }
    }
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

template <bool BF16>
__device__ __forceinline__ void mma_step(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  if constexpr (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Stages x for vectors [v0, v0 + count) of this pass and K values [first, first + values):
// per chunk, vector and lane t the 8 values 8t..8t+7 as the pairs (0,4), (1,5), (2,6), (3,7)
// (raw 16-bit patterns, no arithmetic), then per group and vector the f32 sum S_g in increasing
// k, read back from shared memory. Ends with the block synchronised.
__device__ __forceinline__ void stage_mma_x(uint4* xs, float* sums, const MmaParams& p, std::int64_t v0, int count,
                                            std::int64_t first, int values) {
  const int chunks = values / 32;
  for (int e = threadIdx.x; e < count * chunks * 4; e += blockDim.x) {
    const int t = e & 3, v = (e >> 2) % count, c = (e >> 2) / count;
    const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const std::uint16_t*>(p.x) +
                                                      ((v0 + v) * p.k + first + 32 * c + 8 * t));
    // raw.x = (x0, x1), raw.y = (x2, x3), raw.z = (x4, x5), raw.w = (x6, x7)
    uint4 out;
    out.x = __byte_perm(raw.x, raw.z, 0x5410);  // (x0, x4)
    out.y = __byte_perm(raw.x, raw.z, 0x7632);  // (x1, x5)
    out.z = __byte_perm(raw.y, raw.w, 0x5410);  // (x2, x6)
    out.w = __byte_perm(raw.y, raw.w, 0x7632);  // (x3, x7)
    xs[(c * count + v) * 4 + t] = out;
  }
  __syncthreads();
  const int groups = values / p.group, chunks_per_group = p.group / 32;
  for (int e = threadIdx.x; e < count * groups; e += blockDim.x) {
    const int v = e % count, g = e / count;
    float s = 0.0f;
    for (int cc = 0; cc < chunks_per_group; ++cc)
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const uint4 u = xs[((g * chunks_per_group + cc) * count + v) * 4 + t];
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) s = __fadd_rn(s, widen_half(j < 4 ? (w[j] & 0xffffu) : (w[j - 4] >> 16), p.dtype));
      }
    sums[g * count + v] = s;
  }
  __syncthreads();
}

template <int BITS, bool BF16, int NT>
__global__ void __launch_bounds__(kMmaThreads, 2) qmv_mma_kernel(const MmaParams p) {
  constexpr int kChunkBytes = 4 * BITS;
  constexpr int kCps = kChunksPerStage<BITS>;
  constexpr DType kType = BF16 ? DType::bf16 : DType::f16;
  extern __shared__ uint4 mma_shared[];
  uint4* xs = mma_shared;
  const std::int64_t v0 = std::int64_t(blockIdx.y) * kPassVectors;
  const int count = int(p.m - v0 < kPassVectors ? p.m - v0 : kPassVectors);
  float* sums = reinterpret_cast<float*>(xs + p.tile_values / 32 * count * 4);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  std::uint8_t* ring = reinterpret_cast<std::uint8_t*>(sums + p.tile_values / 32 * count) +
                       warp * (kMmaStages * kStageBytes<BITS> + kParamBufferBytes);
  std::uint16_t* params = reinterpret_cast<std::uint16_t*>(ring + kMmaStages * kStageBytes<BITS>);
  const std::int64_t row_bytes = p.k * BITS / 8, groups = p.k / p.group;
  const int group_shift = p.group == 32 ? 0 : (p.group == 64 ? 1 : 2);  // chunks per group: 1 << shift
  const int chunks_total = int(p.k / 32);
  const int stages_total = chunks_total / kCps;  // K is a multiple of 32 * kCps (the launcher checks)
  const int tile_chunks = p.tile_values / 32;
  const bool restage = p.k > p.tile_values;
  const std::int64_t tasks = (p.n + kMmaRows - 1) / kMmaRows;
  const std::int64_t warps_total = std::int64_t(gridDim.x) * p.task_warps;
  const std::int64_t trips = (tasks + warps_total - 1) / warps_total;
  const std::int64_t my_first_task = std::int64_t(warp) * gridDim.x + blockIdx.x;
  // The vectors this lane reads for B and for the folds, clamped to the pass's last one, so that
  // the loop has no bounds guards: a column past `count` repeats a real vector and is never
  // stored, and an mma column depends only on its own column of B, so every other column keeps
  // its bits.
  // As pointers: chunk cl's B fragment is b_lane[nt][cl * count * 4], group gl's sums are
  // fold_lane[nt][k][gl * count].
  const uint4* b_lane[NT];
  const float* fold_lane[NT][2];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    b_lane[nt] = xs + min(nt * 8 + g, count - 1) * 4 + t;
    fold_lane[nt][0] = sums + min(nt * 8 + 2 * t, count - 1);
    fold_lane[nt][1] = sums + min(nt * 8 + 2 * t + 1, count - 1);
  }
  const int chunk_stride = count * 4;  // uint4s from one chunk's B fragments to the next's

  for (std::int64_t trip = 0; trip < trips; ++trip) {
    const std::int64_t task = my_first_task + trip * warps_total;
    const bool active = warp < p.task_warps && task < tasks;
    const std::int64_t row_lo = task * kMmaRows + g, row_hi = row_lo + 8;
    const std::int64_t rl = row_lo < p.n ? row_lo : p.n - 1, rh = row_hi < p.n ? row_hi : p.n - 1;
    // Lane (g, t) copies the 16-byte pieces t, t + 4, ... of rows g and g+8 of each stage.
    const std::uint8_t* src_lo = p.packed + rl * row_bytes + 16 * t;
    const std::uint8_t* src_hi = p.packed + rh * row_bytes + 16 * t;
    // Stage st goes to ring slot st % kMmaStages; callers pass the slot (counters, not divisions).
    auto issue = [&](int st, int ring_slot) {
      if (active && st < stages_total) {
        std::uint8_t* slot = ring + ring_slot * kStageBytes<BITS>;
        const std::int64_t off = std::int64_t(st) * kStageRowBytes;
#pragma unroll
        for (int piece = 0; piece < kStageRowBytes / 64; ++piece) {  // pieces t, t + 4, ... of the row
          copy16_async(slot + g * kRowStride<BITS> + 64 * piece + 16 * t, src_lo + off + 64 * piece);
          copy16_async(slot + (g + 8) * kRowStride<BITS> + 64 * piece + 16 * t, src_hi + off + 64 * piece);
        }
      }
      commit_async_copies();
    };
    float total[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) total[j][i] = 0.0f;
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
    // Group parameter windows (see kWindowGroups): lane l loads row l/2's scales (l even) or
    // biases (l odd) for the 16 groups of a window.
    const int stages_per_window = kWindowGroups * p.group / (32 * kCps);
    const std::int64_t my_param_row = task * kMmaRows + lane / 2;
    const std::uint16_t* my_params = static_cast<const std::uint16_t*>(lane % 2 ? p.biases : p.scales) +
                                     (my_param_row < p.n ? my_param_row : p.n - 1) * groups;
    std::uint16_t pending[kWindowGroups];
    auto load_window = [&](int window) {
#pragma unroll
      for (int i = 0; i < kWindowGroups; ++i) {
        const std::int64_t grp = std::int64_t(window) * kWindowGroups + i;
        pending[i] = active && grp < groups ? my_params[grp] : std::uint16_t(0);
      }
    };
    // The buffer holds [2 windows][16 rows][16 groups][scale, bias], so one 32-bit read gives a
    // row's scale and bias of a group.
    auto park_window = [&](int window) {
      std::uint16_t* to = params + (window & 1) * (kMmaRows * 2 * kWindowGroups) + (lane / 2) * 2 * kWindowGroups + lane % 2;
#pragma unroll
      for (int i = 0; i < kWindowGroups; ++i) to[2 * i] = pending[i];
    };
    // Scale and bias of group grp for a row (g or g + 8), from the buffer.
    auto param_pair = [&](int grp, int row, float& scale, float& bias) {
      static_assert(kWindowGroups == 16, "windows are indexed with shifts and masks");
      const std::uint32_t raw = *reinterpret_cast<const std::uint32_t*>(
          params + ((grp >> 4) & 1) * (kMmaRows * 2 * kWindowGroups) + (row * kWindowGroups + (grp & 15)) * 2);
      if constexpr (BF16) {
        scale = __uint_as_float(raw << 16), bias = __uint_as_float(raw & 0xffff0000u);
      } else {
        scale = __half2float(__ushort_as_half(std::uint16_t(raw & 0xffffu)));
        bias = __half2float(__ushort_as_half(std::uint16_t(raw >> 16)));
      }
    };
    float s_lo = 0, s_hi = 0, b_lo = 0, b_hi = 0;
    load_window(0);
#pragma unroll
    for (int st = 0; st < kMmaStages - 1; ++st) issue(st, st);

    // Counters instead of run-time divisions in the loop (each % or / by a run-time value is an
    // IABS/I2F/MUFU/F2I sequence, and the SASS had six per stage): the stage's ring slot, its
    // first chunk within the staged tile of x, and its place in the parameter window.
    int read_slot = 0, tile_chunk0 = 0, window_stage = 0, window = 0;
    for (int st = 0; st < stages_total; ++st, tile_chunk0 += kCps) {
      const int c0 = st * kCps;
      if (tile_chunk0 == tile_chunks) tile_chunk0 = 0;
      if (tile_chunk0 == 0 && (restage || trip == 0)) {
        __syncthreads();
        const std::int64_t first = std::int64_t(c0) * 32;
        const int values = int(p.k - first < p.tile_values ? p.k - first : p.tile_values);
        stage_mma_x(xs, sums, p, v0, count, first, values);
      }
      issue(st + kMmaStages - 1, read_slot == 0 ? kMmaStages - 1 : read_slot - 1);
      if (window_stage == 0) {  // a window starts: park its parameters, load the next's
        park_window(window);
        load_window(window + 1);
      }
      if (++window_stage == stages_per_window) window_stage = 0, ++window;
      wait_async_copies<kMmaStages - 1>();
      __syncwarp();  // the stage was copied (and the window parked) by all lanes of the warp
      const std::uint8_t* slot = ring + read_slot * kStageBytes<BITS>;
      read_slot = read_slot == kMmaStages - 1 ? 0 : read_slot + 1;
#pragma unroll
      for (int j = 0; j < kCps; ++j) {
        const int c = c0 + j;
        if ((c & ((1 << group_shift) - 1)) == 0) {  // a group starts: its parameters
          const int grp = c >> group_shift;
          param_pair(grp, g, s_lo, b_lo);
          param_pair(grp, g + 8, s_hi, b_hi);
          if constexpr (kCodeOffset<BITS, BF16> != 0.0f) {
            b_lo = __fmaf_rn(-kCodeOffset<BITS, BF16>, s_lo, b_lo);
            b_hi = __fmaf_rn(-kCodeOffset<BITS, BF16>, s_hi, b_hi);
          }
        }
        std::uint32_t w_lo[BITS / 4], w_hi[BITS / 4];
        read_chunk_words<BITS>(slot + g * kRowStride<BITS> + j * kChunkBytes + t * (BITS), w_lo);
        read_chunk_words<BITS>(slot + (g + 8) * kRowStride<BITS> + j * kChunkBytes + t * (BITS), w_hi);
        std::uint32_t p_lo[4], p_hi[4];
        codes_to_pairs<BITS, BF16>(w_lo, p_lo);
        codes_to_pairs<BITS, BF16>(w_hi, p_hi);
        const int cl = tile_chunk0 + j;  // c's chunk within the staged tile
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const uint4 b = b_lane[nt][cl * chunk_stride];
          mma_step<BF16>(acc[nt], {p_lo[0], p_hi[0], p_lo[1], p_hi[1]}, b.x, b.y);
          mma_step<BF16>(acc[nt], {p_lo[2], p_hi[2], p_lo[3], p_hi[3]}, b.z, b.w);
        }
        if (((c + 1) & ((1 << group_shift) - 1)) == 0) {  // the group ends: fold it
          const int gl = cl >> group_shift;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const float2 sum = make_float2(fold_lane[nt][0][gl * count], fold_lane[nt][1][gl * count]);
            // acc: [0] (row g, vector 2t), [1] (g, 2t+1), [2] (g+8, 2t), [3] (g+8, 2t+1)
            total[nt][0] = __fmaf_rn(s_lo, acc[nt][0], __fmaf_rn(b_lo, sum.x, total[nt][0]));
            total[nt][1] = __fmaf_rn(s_lo, acc[nt][1], __fmaf_rn(b_lo, sum.y, total[nt][1]));
            total[nt][2] = __fmaf_rn(s_hi, acc[nt][2], __fmaf_rn(b_hi, sum.x, total[nt][2]));
            total[nt][3] = __fmaf_rn(s_hi, acc[nt][3], __fmaf_rn(b_hi, sum.y, total[nt][3]));
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
          }
        }
      }
      __syncwarp();  // every lane is done with the stage before it is copied over
    }
    wait_async_copies<0>();
    if (active) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const std::int64_t row = i < 2 ? row_lo : row_hi;
          const int v = nt * 8 + 2 * t + (i & 1);
          if (row < p.n && v < count) store_f32(p.y, std::size_t((v0 + v) * p.n + row), kType, total[nt][i]);
        }
    }
  }
}

template <int BITS, bool BF16, int NT>
int mma_blocks_per_sm(std::size_t smem) {
  return resident_blocks<qmv_mma_kernel<BITS, BF16, NT>>(kMmaThreads, smem, 200 * 1024);
}

// K values of x staged per block at a time for `count` vectors: what fits next to the rings in
// ~100 KB (two blocks per SM), a multiple of 256 so tiles never split a group or a ring stage.
template <int BITS>
int mma_tile(std::int64_t k, int count) {
  const double left = 100.0 * 1024 - double(mma_ring_bytes<BITS>());
  int tile = int(left / (count * (2.0 + 4.0 / 32)) / 256) * 256;
  tile = tile < 256 ? 256 : tile;
  return int(k < tile ? k : tile);
}

template <int BITS, bool BF16, int NT>
void launch_pass(const MmaParams& base, std::int64_t first_pass, std::int64_t passes, cudaStream_t stream) {
  MmaParams p = base;
  const std::int64_t vectors = base.m - first_pass * kPassVectors;
  const int count = int(vectors < kPassVectors ? vectors : kPassVectors);  // passes > 1 are all full
  p.tile_values = mma_tile<BITS>(p.k, count);
  const std::int64_t tasks = (p.n + kMmaRows - 1) / kMmaRows;
  const std::int64_t per_sm = (tasks + sm_count() - 1) / sm_count();
  p.task_warps = int(per_sm < kMmaWarps ? per_sm : kMmaWarps);
  const std::size_t smem = mma_smem<BITS>(p.tile_values, count);
  const std::int64_t blocks_needed = (tasks + p.task_warps - 1) / p.task_warps;
  const std::int64_t resident = std::int64_t(mma_blocks_per_sm<BITS, BF16, NT>(smem)) * sm_count();
  const unsigned grid_x = unsigned(blocks_needed < resident ? blocks_needed : resident);
  // Each launch sees the vectors from its first pass on as its own vectors 0..
  p.x = static_cast<const std::uint16_t*>(base.x) + first_pass * kPassVectors * p.k;
  p.y = static_cast<std::uint16_t*>(base.y) + first_pass * kPassVectors * p.n;
  p.m = base.m - first_pass * kPassVectors;
  constexpr std::int64_t kMaxGridY = 65535;
  for (std::int64_t done = 0; done < passes; done += kMaxGridY) {
    const std::int64_t now = passes - done < kMaxGridY ? passes - done : kMaxGridY;
    qmv_mma_kernel<BITS, BF16, NT><<<dim3(grid_x, unsigned(now)), kMmaThreads, smem, stream>>>(p);
    EXACTQ_CUDA_CHECK(cudaGetLastError());
    p.x = static_cast<const std::uint16_t*>(p.x) + now * kPassVectors * p.k;
    p.y = static_cast<std::uint16_t*>(p.y) + now * kPassVectors * p.n;
    p.m -= now * kPassVectors;
  }
}

}  // namespace

void launch_qmv_mma(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y, cudaStream_t stream) {
  if (w.dtype == DType::f32)
    throw std::invalid_argument("[exactq] qmv_mma: dtype f32 has no exact tensor-core path (use bf16 or f16; qmv serves f32)");
  if (w.bits != 4 && w.bits != 8)
    throw std::invalid_argument("[exactq] qmv_mma: bits = " + std::to_string(w.bits) + " is not implemented yet (4 and 8 are)");
  const int stage_values = 32 * (kStageRowBytes / (4 * w.bits));
  if (w.k % stage_values != 0)
    throw std::invalid_argument("[exactq] qmv_mma: K = " + std::to_string(w.k) + " must be a multiple of " +
                                std::to_string(stage_values) + " at " + std::to_string(w.bits) + " bits");
  if (w.n * (w.k / w.group) >= (std::int64_t(1) << 31))
    throw std::invalid_argument("[exactq] N * K / group = " + std::to_string(w.n * (w.k / w.group)) +
                                " group parameters: qmv_mma indexes them with 32 bits");
  const bool bf16 = w.dtype == DType::bf16;
  auto run = [&]<int BITS>() {
    MmaParams p{w.packed.data(), w.scales.data(), w.biases.data(), x, y, w.n, w.k, m, w.group, 0, w.dtype, kMmaWarps};
    // Passes of 16 vectors; a last pass of at most 8 needs only one n-tile.
    const std::int64_t full = m / kPassVectors;
    const int rest = int(m - full * kPassVectors);
    auto go = [&]<int NT>(std::int64_t first, std::int64_t passes) {
      if (bf16) launch_pass<BITS, true, NT>(p, first, passes, stream);
      else launch_pass<BITS, false, NT>(p, first, passes, stream);
    };
    if (full > 0) go.template operator()<2>(0, full);
    if (rest > 8) go.template operator()<2>(full, 1);
    else if (rest > 0) go.template operator()<1>(full, 1);
  };
  if (w.bits == 4) run.template operator()<4>();
  else run.template operator()<8>();
}

cuda::KernelResources qmv_mma_resources(int bits, int vectors) {
  cudaFuncAttributes a{};
  int blocks = 0;
  auto get = [&]<int BITS, int NT>() {
    EXACTQ_CUDA_CHECK(cudaFuncGetAttributes(&a, qmv_mma_kernel<BITS, true, NT>));
    const int count = NT * 8;
    blocks = mma_blocks_per_sm<BITS, true, NT>(mma_smem<BITS>(mma_tile<BITS>(4096, count), count));
  };
  const bool wide = vectors > 8;
  if (bits == 8) wide ? get.template operator()<8, 2>() : get.template operator()<8, 1>();
  else wide ? get.template operator()<4, 2>() : get.template operator()<4, 1>();
  return {a.numRegs, int(a.localSizeBytes), a.maxThreadsPerBlock, blocks};
}

}  // namespace exactq::cuda_detail
