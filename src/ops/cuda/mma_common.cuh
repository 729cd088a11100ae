// What qmv_mma's two kernels share (qmv_mma.cu reads MLX's layout through a shared-memory ring,
// qmv_mma_fragments.cu the fragment layout straight into registers): the block shape, the staged
// activations (B fragments and group sums), the exact code-to-bf16/f16 conversion and the mma
// step. The order contract is docs/design.md §6; both kernels produce the same bits.
#pragma once
#include <cuda_bf16.h>

#include "support/dispatch.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/launch.h"
#include "exactq/mma_layout.h"

namespace exactq::cuda_detail::mma {

// Warps per block. Where N has too few 16-row tasks to give every block a full set of task warps
// (a down projection has 240 tasks), only the first `task_warps` warps of a block take tasks and
// the others just help stage x, so the blocks spread over all SMs. The launcher picks task_warps
// from N and the SM count; it never enters any row's arithmetic.
// Warps per block, a -D knob: 16 (one block per SM: the staged x tile is shared by twice the
// rows, and at M = 4 a whole K of x fits next to the rings) or 8 (two blocks per SM).
#ifndef EXACTQ_MMA_WARPS
#define EXACTQ_MMA_WARPS 16
#endif
inline constexpr int kMmaWarps = EXACTQ_MMA_WARPS;
static_assert(kMmaWarps == 8 || kMmaWarps == 16, "8 or 16 warps per block");
static_assert(8 % order::kMmaMaxParts == 0, "a task's K parts fill whole blocks of 8 or 16 warps");
inline constexpr int kMmaThreads = kMmaWarps * 32;
inline constexpr int kMmaBlocksPerSm = 16 / kMmaWarps;  // 16 warps per SM at 128 registers
inline constexpr int kMmaRows = 16;          // rows per warp task: the mma's M
inline constexpr int kPassVectors = 16;  // vectors per pass: two n-tiles of 8
// Shared memory of a block, at most: the SM's 228 KB, less 1 KB reserved per block.
inline constexpr std::size_t kMmaBlockSmem = (228 / kMmaBlocksPerSm - 1) * 1024;

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
  int task_warps;   // warps of a block that take tasks: a multiple of k_parts, at most the block's
  int k_parts;      // K segments per task (order::mma_k_parts); consecutive warps are a task's parts
};

// The work of one warp: which part of a task it computes and which tasks it takes, trip by trip.
// K is cut into p.k_parts segments of whole rounds (order.h); the k_parts consecutive warps
// w = slot * k_parts + part of a block compute the segments of one task, and the block adds
// their totals in increasing part (combine_parts). With k_parts = 1 a warp walks all of K.
struct MmaWarpWork {
  int part, round_begin, rounds;  // this warp's segment: rounds [round_begin, round_begin + rounds)
  int rounds_max;                 // the longest segment: every warp walks as many steps (barriers)
  std::int64_t first_task, task_stride, trips;
  // The x tile (p.tile_values) holds sub_rounds rounds of every part's segment, restaged every
  // sub_chunks chunks if it does not hold them all; this warp's sub-tile starts at part_chunk0.
  int sub_rounds, sub_chunks, part_chunk0;
  bool restage;
  // parts: p.k_parts, or a compile-time 1 in the kernels built without the split.
  __device__ __forceinline__ MmaWarpWork(const MmaParams& p, int parts, int warp, int rounds_total, int round_chunks,
                                         std::int64_t tasks) {
    part = warp % parts;
    round_begin = order::mma_segment_begin(part, parts, rounds_total);
    rounds = order::mma_segment_begin(part + 1, parts, rounds_total) - round_begin;
    rounds_max = (rounds_total + parts - 1) / parts;
    task_stride = std::int64_t(gridDim.x) * (p.task_warps / parts);
    trips = (tasks + task_stride - 1) / task_stride;
    first_task = std::int64_t(warp / parts) * gridDim.x + blockIdx.x;
    sub_rounds = p.tile_values / (parts * 32 * round_chunks);
    sub_chunks = sub_rounds * round_chunks;
    part_chunk0 = part * sub_chunks;
    restage = rounds_max > sub_rounds;
  }
};

// The staged activations of a block: per vector, the K tile's B fragments, [count][x_stride] x
// 16 B (a lane's fragment of chunk c is at + 4c + t, so the chunk offsets of a stage are
// constants; x_stride is padded so that the 8 rows of lanes of a fragment read, vectors 64 B
// apart, are conflict-free), then the group sums group-major, [groups][kSumVectors] f32: lane
// (g, t) reads the sums of its output columns (vectors 2t, 2t + 1) of one group as one 8-byte
// word, group by group, so a round's sums need not sit in registers (session 9).
struct MmaTileLayout {
  static constexpr int kSumVectors = 16;  // a pass; columns past the pass's vectors read 0
  int x_stride;                           // uint4s per vector
  int sum_groups;                         // groups of the tile
  EXACTQ_HD MmaTileLayout(int tile_values, int group)
      : x_stride(tile_values / 32 * 4 + 4), sum_groups(tile_values / group) {}
  EXACTQ_HD std::size_t x_bytes(int count) const { return std::size_t(count) * x_stride * 16; }
  EXACTQ_HD std::size_t bytes(int count) const { return x_bytes(count) + std::size_t(sum_groups) * kSumVectors * 4; }
};

// A group parameter's 16 raw bits as f32 (exact), with the dtype known at compile time.
template <bool BF16>
__device__ __forceinline__ float widen_param(std::uint32_t raw16) {
  return BF16 ? __uint_as_float(raw16 << 16) : __half2float(__ushort_as_half(std::uint16_t(raw16)));
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

// Two f16 codes from halves that hold 1024 + 16 c (a code masked in place at bits 4-7): exactly c.
__device__ __forceinline__ std::uint32_t sixteenths_pair(std::uint32_t magic_or_codes) {
  const __half2 v = *reinterpret_cast<const __half2*>(&magic_or_codes);
  const __half2 r = __hfma2(v, __floats2half2_rn(0.0625f, 0.0625f), __floats2half2_rn(-64.0f, -64.0f));
  return *reinterpret_cast<const std::uint32_t*>(&r);
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
  if constexpr (BITS == 4 && BF16) {
    // Word w[0] holds c_i at bits 4i. (w >> 4i) & 0x000F000F puts c_i and c_{i+4} in the halves.
    // bf16 has 7 mantissa bits, so a code must sit at bits 0-3 of its half: one shift per pair.
#pragma unroll
    for (int i = 0; i < 4; ++i) pair[i] = exact_pair<true>(and_or<0x000F000Fu, 0x43004300u>(w[0] >> (4 * i)));
  } else if constexpr (BITS == 4) {
    // f16 has 10 mantissa bits, so codes at bits 4-7 of a half can stay in place: 1024 + 16 c is
    // exact, and fma(1024 + 16 c, 1/16, -64) = c with one rounding of an exact value. So pairs 0
    // and 1 come from w itself and pairs 2 and 3 from w >> 8: one shift per word, not three. The
    // pairs are the same values, so the bits are too.
    const std::uint32_t w8 = w[0] >> 8;
    pair[0] = exact_pair<false>(and_or<0x000F000Fu, 0x64006400u>(w[0]));
    pair[1] = sixteenths_pair(and_or<0x00F000F0u, 0x64006400u>(w[0]));
    pair[2] = exact_pair<false>(and_or<0x000F000Fu, 0x64006400u>(w8));
    pair[3] = sixteenths_pair(and_or<0x00F000F0u, 0x64006400u>(w8));
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

// r | (b & MASK) in one LOP3.
template <std::uint32_t MASK>
__device__ __forceinline__ std::uint32_t or_and(std::uint32_t r, std::uint32_t b) {
  std::uint32_t out;
  asm("lop3.b32 %0, %1, %2, %3, 0xF8;" : "=r"(out) : "r"(r), "r"(b), "n"(MASK));
  return out;
}

// 2, 3, 5 and 6 bits (the fragment layout's bit planes, exactq/mma_layout.h): pair i of chunk j of
// half h from the lane's round words `w`, a shift and a mask per plane (the planes' fields land at
// their place in the code), then the magic number's exact subtraction. The same pairs, so the
// same mma inputs, as the codes themselves: h, j and i are constants once the loops unroll.
template <int BITS, bool BF16>
__device__ __forceinline__ void planar_pairs(const std::uint32_t* w, int h, int j, std::uint32_t (&pair)[4]) {
  namespace ml = mma_layout;
  constexpr std::uint32_t kMagic = BF16 ? 0x43004300u : 0x64006400u;  // 128 / 1024: codes < 2^7 stay exact
  constexpr std::uint32_t kLow = ml::plane_mask(BITS, 0);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    std::uint32_t r = and_or<kLow, kMagic>(ml::shifted(w[ml::plane_word(BITS, 0, h, j)], ml::plane_shift(BITS, 0, j, i)));
    if constexpr (ml::plane_count(BITS) == 2)
      r = or_and<ml::plane_mask(BITS, 1)>(r, ml::shifted(w[ml::plane_word(BITS, 1, h, j)], ml::plane_shift(BITS, 1, j, i)));
    pair[i] = exact_pair<BF16>(r);
  }
}

// The pairs of chunk j of half h (rows g, g + 8) from a lane's round words in the fragment layout:
// 4 and 8 bits through codes_to_pairs (at 4 bits the planes' rule is MLX's word, which
// codes_to_pairs reads with fewer instructions in f16), the others through their planes.
template <int BITS, bool BF16>
__device__ __forceinline__ void fragment_pairs(const std::uint32_t* w, int h, int j, std::uint32_t (&pair)[4]) {
  if constexpr (BITS == 4 || BITS == 8)
    codes_to_pairs<BITS, BF16>(w + h * mma_layout::round_row_bytes(BITS, 0) / 16 + j * (BITS / 4), pair);
  else
    planar_pairs<BITS, BF16>(w, h, j, pair);
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

// Stages x for vectors [v0, v0 + count) of this pass, step `step` of every K segment: per part q,
// rounds [begin_q + step, min(begin_q + step + sub_rounds, end_q)) of K go to the part's sub-tile
// (its chunks start at q * sub_rounds rounds into the tile). In MmaTileLayout's order: per vector,
// chunk and lane t the 8 values 8t..8t+7 as the pairs (0,4), (1,5), (2,6), (3,7) (raw 16-bit
// patterns, no arithmetic), then per vector and group the f32 sum S_g in increasing k, read back
// from shared memory. With one part (`parts` a compile-time 1 where the kernel has no split) this
// is K values [step * round_values, ...) into the tile. Ends with the block synchronised.
__device__ __forceinline__ void stage_mma_x(uint4* xs, float* sums, const MmaTileLayout& layout, const MmaParams& p,
                                            std::int64_t v0, int count, int parts, int rounds_total, int round_values,
                                            int sub_rounds, int step) {
  const int sub_values = sub_rounds * round_values;
  // The K values part q stages: [first, first + values) of x, placed from q * sub_values on.
  auto segment = [&](int q, std::int64_t& first, int& values) {
    const int begin = order::mma_segment_begin(q, parts, rounds_total) + step;
    const int end = order::mma_segment_begin(q + 1, parts, rounds_total);
    first = std::int64_t(begin) * round_values;
    values = (end - begin < sub_rounds ? end - begin : sub_rounds) * round_values;  // <= 0: nothing left
  };
  // A thread takes a 16-byte piece (chunk c, lane t) and reads it for up to 4 vectors before
  // it writes any, so several L2 reads are in flight (one at a time, restaging at M = 16 waited
  // a full latency per piece: 19 % of the kernel's stall samples).
  const int sub_pieces = sub_values / 8;  // 16-byte pieces of one vector's sub-tile
  for (int e = threadIdx.x; e < parts * sub_pieces; e += blockDim.x) {
    const int q = e / sub_pieces, piece = e - q * sub_pieces;
    std::int64_t first;
    int values;
    segment(q, first, values);
    if (8 * piece >= values) continue;
    const int c = (q * sub_values + 8 * piece) >> 5, t = piece & 3;
    for (int vb = 0; vb < count; vb += 4) {
      uint4 raw[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (vb + u < count)
          raw[u] = *reinterpret_cast<const uint4*>(static_cast<const std::uint16_t*>(p.x) +
                                                   ((v0 + vb + u) * p.k + first + 8 * piece));
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (vb + u < count) {
          // raw.x = (x0, x1), raw.y = (x2, x3), raw.z = (x4, x5), raw.w = (x6, x7)
          uint4 out;
          out.x = __byte_perm(raw[u].x, raw[u].z, 0x5410);  // (x0, x4)
          out.y = __byte_perm(raw[u].x, raw[u].z, 0x7632);  // (x1, x5)
          out.z = __byte_perm(raw[u].y, raw[u].w, 0x5410);  // (x2, x6)
          out.w = __byte_perm(raw[u].y, raw[u].w, 0x7632);  // (x3, x7)
          xs[(vb + u) * layout.x_stride + 4 * c + t] = out;
        }
    }
  }
  __syncthreads();
  const int sub_groups = sub_values / p.group, chunks_per_group = p.group / 32;
  // Sums for the pass's n-tiles' columns: vectors past `count` get 0 (their columns are never
  // stored, and an mma column depends only on its own column of B).
  const int columns = count > 8 ? 16 : 8;
  for (int e = threadIdx.x; e < columns * parts * sub_groups; e += blockDim.x) {
    const int v = e / (parts * sub_groups), qg = e - v * (parts * sub_groups);
    const int q = qg / sub_groups, gi = qg - q * sub_groups;
    std::int64_t first;
    int values;
    segment(q, first, values);
    if (gi * p.group >= values) continue;
    const int g = q * sub_groups + gi;  // the group's place in the tile
    float s = 0.0f;
    if (v < count)
      for (int cc = 0; cc < chunks_per_group; ++cc)
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const uint4 u = xs[v * layout.x_stride + 4 * (g * chunks_per_group + cc) + t];
          const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
          for (int j = 0; j < 8; ++j) s = __fadd_rn(s, widen_half(j < 4 ? (w[j] & 0xffffu) : (w[j - 4] >> 16), p.dtype));
        }
    sums[g * MmaTileLayout::kSumVectors + v] = s;
  }
  __syncthreads();
}

// Shared memory for the parts' totals of one block (combine_parts), none without a K split.
inline std::size_t combine_bytes(int k_parts, int warps, int nt) {
  return k_parts > 1 ? std::size_t(warps) * 32 * nt * 4 * sizeof(float) : 0;
}

// The K split's combine (order.h): part 0 of each task adds the other parts' totals in increasing
// part, with one rounding each. Called by every warp of the block (it synchronises the block),
// only when p.k_parts > 1.
template <int NT>
__device__ __forceinline__ void combine_parts(float (&total)[NT][4], float* scratch, int parts, int part, int warp,
                                              int lane, bool active) {
  if (active && part > 0)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) scratch[(warp * NT * 4 + nt * 4 + i) * 32 + lane] = total[nt][i];
  __syncthreads();
  if (active && part == 0)
    for (int q = 1; q < parts; ++q)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          total[nt][i] = order::mma_segment_add(total[nt][i], scratch[((warp + q) * NT * 4 + nt * 4 + i) * 32 + lane]);
  __syncthreads();  // read before the next trip writes
}

// The x tile for `count` vectors: per part, sub_rounds rounds of K (the most that fit in `budget`
// bytes, at most the longest segment), so tile_values = k_parts * sub_rounds * round_values.
template <int GROUP>
int mma_sub_rounds(std::int64_t k, int round_values, int k_parts, int count, std::size_t budget) {
  const int rounds_total = int(k / round_values), rounds_max = (rounds_total + k_parts - 1) / k_parts;
  int sub = 1;
  while (sub < rounds_max && MmaTileLayout(k_parts * (sub + 1) * round_values, GROUP).bytes(count) <= budget) ++sub;
  return sub;
}

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

// Where lane (g, t) reads B (its vector g of each n-tile, clamped to the pass's last vector so
// that the loops have no bounds guards: a column past `count` repeats a real vector and is never
// stored, and an mma column depends only on its own column of B, so every other column keeps
// its bits), and the group sums of its output columns (vectors 2t, 2t + 1 of n-tile nt: the
// 8-byte word at fold + group * kSumVectors + 8 nt; `group_sums`).
template <int NT>
struct MmaLaneReads {
  const uint4* b[NT];
  const float* fold;
  __device__ __forceinline__ MmaLaneReads(const uint4* xs, const float* sums, const MmaTileLayout& layout, int count,
                                          int g, int t)
      : fold(sums + 2 * t) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) b[nt] = xs + min(nt * 8 + g, count - 1) * layout.x_stride + t;
  }
};

// The sums S_g of a lane's two output columns of n-tile nt, for the tile's group `group`.
__device__ __forceinline__ float2 group_sums(const float* fold, int group, int nt) {
  return *reinterpret_cast<const float2*>(fold + group * MmaTileLayout::kSumVectors + 8 * nt);
}

// ---- host side, shared by both kernels' launchers ------------------------------------------

// What every qmv_mma launch checks, whatever the layout (whose own bits and K rules its launcher
// checks).
inline void check_mma_arguments(const QuantizedMatrixView& w) {
  if (w.dtype == DType::f32)
    throw std::invalid_argument("[exactq] qmv_mma: dtype f32 has no exact tensor-core path (use bf16 or f16; qmv serves f32)");
  if (w.n * (w.k / w.group) >= (std::int64_t(1) << 31))
    throw std::invalid_argument("[exactq] N * K / group = " + std::to_string(w.n * (w.k / w.group)) +
                                " group parameters: qmv_mma indexes them with 32 bits");
  for (const void* params : {w.scales.data(), w.biases.data()})
    if (reinterpret_cast<std::uintptr_t>(params) % 16 != 0)
      throw std::invalid_argument("[exactq] qmv_mma: scales and biases must be 16-byte aligned (they are read in "
                                  "pieces of up to 16 bytes); got address " +
                                  std::to_string(reinterpret_cast<std::uintptr_t>(params)));
}

// The launches of one call: passes of 16 vectors run two n-tiles, a last pass of at most 8 one.
// `pass` is called as pass.template operator()<BITS, BF16, NT, GROUP>(params, first_pass,
// passes). The group is a template parameter, so the folds' places in a round are constants.
// kBits: the widths the calling kernel is built for (the caller has checked w.bits is one).
template <int... kBits, typename Pass>
void for_each_mma_launch(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y, Pass&& pass) {
  const MmaParams p{w.packed.data(), w.scales.data(), w.biases.data(), x, y, w.n, w.k, m, w.group, 0, w.dtype, kMmaWarps,
                    order::mma_k_parts(w.n, w.k, w.bits, w.group)};
  const std::int64_t full = m / kPassVectors;
  const int rest = int(m - full * kPassVectors);
  auto with = [&]<int BITS, int GROUP>() {
    auto go = [&]<int NT>(std::int64_t first, std::int64_t passes) {
      if (w.dtype == DType::bf16) pass.template operator()<BITS, true, NT, GROUP>(p, first, passes);
      else pass.template operator()<BITS, false, NT, GROUP>(p, first, passes);
    };
    if (full > 0) go.template operator()<2>(0, full);
    if (rest > 8) go.template operator()<2>(full, 1);
    else if (rest > 0) go.template operator()<1>(full, 1);
  };
  auto with_group = [&]<int BITS>() {
    if (w.group == 32) with.template operator()<BITS, 32>();
    else if (w.group == 64) with.template operator()<BITS, 64>();
    else with.template operator()<BITS, 128>();
  };
  dispatch_value<kBits...>(w.bits, "qmv_mma bits", with_group);
}

// Launches KERNEL (blocks of WARPS warps) over passes [first_pass, first_pass + passes), with
// p.tile_values already chosen and `smem` bytes of shared memory. The (task, K part) pairs are
// spread over the SMs: task_warps = ceil(pairs / SMs) warps per block, rounded up to whole tasks,
// take them (the rest only help stage x), from N, K and the SM count only. Each launch sees its
// first pass's vectors as 0.. .
template <auto KERNEL, int WARPS = kMmaWarps>
void launch_mma_passes(MmaParams p, std::int64_t first_pass, std::int64_t passes, std::size_t smem, cudaStream_t stream) {
  const std::int64_t tasks = (p.n + kMmaRows - 1) / kMmaRows;
  const std::int64_t per_sm = (tasks * p.k_parts + sm_count() - 1) / sm_count();
  const int warps = int(per_sm < WARPS ? per_sm : WARPS);
  p.task_warps = (warps + p.k_parts - 1) / p.k_parts * p.k_parts;  // k_parts divides WARPS
  const std::int64_t task_slots = p.task_warps / p.k_parts;
  const std::int64_t blocks_needed = (tasks + task_slots - 1) / task_slots;
  const std::int64_t resident = std::int64_t(resident_blocks<KERNEL>(WARPS * 32, smem, int(kMmaBlockSmem))) * sm_count();
  const unsigned grid_x = unsigned(blocks_needed < resident ? blocks_needed : resident);
  p.x = static_cast<const std::uint16_t*>(p.x) + first_pass * kPassVectors * p.k;
  p.y = static_cast<std::uint16_t*>(p.y) + first_pass * kPassVectors * p.n;
  p.m -= first_pass * kPassVectors;
  constexpr std::int64_t kMaxGridY = 65535;
  for (std::int64_t done = 0; done < passes; done += kMaxGridY) {
    const std::int64_t now = passes - done < kMaxGridY ? passes - done : kMaxGridY;
    KERNEL<<<dim3(grid_x, unsigned(now)), WARPS * 32, smem, stream>>>(p);
    EXACTQ_CUDA_CHECK(cudaGetLastError());
    p.x = static_cast<const std::uint16_t*>(p.x) + now * kPassVectors * p.k;
    p.y = static_cast<std::uint16_t*>(p.y) + now * kPassVectors * p.n;
    p.m -= now * kPassVectors;
  }
}

}  // namespace exactq::cuda_detail::mma
