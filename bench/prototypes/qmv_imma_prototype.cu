// A measurement prototype, not part of the library (session 26; built by
// `scripts/build_prototype.sh qmv_imma_prototype`; first run: session 26 call 9, on an H100):
// qmv's exact order at M = 1 with the chunk's integer dot on the tensor cores, to price the lead
// of docs/benchmark_results/2026-12-05-h200-session26.md §4 (held, qmv at M = 1 on the H200 runs at
// the 700 W cap, so fewer joules per weight is what is left).
//
// The order is qmv's (docs/design.md §3): the chunk dot Σ q·X is an exact integer, so any unit may
// compute it; everything after it (the conversion, the fold, each logical lane's chain over chunks
// l, l+32, ... and the xor butterfly) is the same sequence of the same f32 operations.
//
// Scope: 4-bit, group 64, bf16 weights' parameters and activations, K a multiple of 1024, N a
// multiple of 16, M = 1.
//
// Mapping. A warp takes 16 rows. Lane (g, q) = (lane / 4, lane % 4) loads, per step j, the 16
// bytes of chunk 4j + q of rows g and g + 8. One mma.sync m16n8k32 (u8 codes x s8 digits) takes 8
// codes of each row from each lane: k-step s (0..3) covers codes 8s..8s+7 of the lane's chunk, the
// low nibbles (codes 8s, 8s+2, 8s+4, 8s+6) as A's k = 4q..4q+3, the high ones as k = 16+4q..16+4q+3.
// B's column n = 2c + e holds digit e (0, 1) of chunk 4j + c in a first mma, and n = 2c holds digit
// 2 in a second (n = 2c + 1 is zero there); B is zero outside the k of lane q = c. So lane (g, q)
// receives, in C, digits 0, 1, 2 of its own chunk's dot for rows g and g + 8: the dot is
// D0 + 2^8 D1 + 2^16 D2 (exact in 32 bits at 4 bits), folded as qmv folds it. Chunk 4j + q belongs
// to qmv's logical lane L = 4 (j mod 8) + q: each physical lane holds 8 logical chains per row, and
// the butterfly's masks 16, 8, 4 are adds between a lane's own chains, masks 2 and 1 shuffles.
//
// v2 (session 27, below): 128-byte row segments, D steps in flight, B without predication. Session
// 27 call 3 (H100, docs/benchmark_results/2026-12-05-h100-s27-call3-imma-v2.txt): every byte equal
// to the CPU mirror's qmv on 28672x8192 and 128256x4096 (control differing), and faster than v1
// (56.0 against 80.8 us on 28672x8192, 110.5 against 152.3 on Llama's head), still slower than the
// library's qmv (48.8 and 101.5). D = 4, or one block of 194 registers per SM, gain nothing over
// D = 2: loads in flight are not what holds it back. Each pass runs two chains of four dependent
// mma, each of which does a quarter of useful products (B is block-diagonal: a lane's k meets its
// own chunk's columns only), and ptxas, given 16 independent lane chains, hoists later passes over
// earlier ones until it spills (194 registers unbounded, 16-44 bytes of spill at 128).
//
// Prints whether every output byte equals the CPU mirror's qmv (and the library's CUDA qmv's),
// with qmv_wide's bytes as the negative control, then µs against the library's qmv and a read.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "common/order.h"
#include "exactq/cuda.h"
#include "exactq/dtype.h"
#include "exactq/qmv.h"
#include "library_prototype.h"
#include "prototype_common.cuh"

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kKSteps = 4;  // 32 codes of a chunk, 8 per lane and k-step

// Per chunk: for each k-step s and digit d, the digits of its 8 values as {low nibbles' values,
// high nibbles' values} (4 signed bytes each), then the facts {S, u}.
struct ChunkB {
  uint2 digits[kKSteps][3];
};

// Chunk c of x: its facts {S, u} into facts[c], and per k-step s and digit d the digits of its
// 8 values packed four to a word, the low nibbles' values (codes 8s, 8s+2, ...) and the high ones'.
struct ChunkDigits {
  std::uint32_t low[kKSteps][3], high[kKSteps][3];
};
__device__ ChunkDigits stage_chunk_digits(const std::uint16_t* x, int c, float2* facts) {
  float v[32];
  for (int i = 0; i < 32; ++i) v[i] = __uint_as_float(std::uint32_t(x[32 * c + i]) << 16);
  std::int32_t big[32];
  const exactq::order::ChunkFacts f = exactq::order::exact_chunk(v, big);
  facts[c] = make_float2(f.sum, f.unscale);
  ChunkDigits out{};
  for (int s = 0; s < kKSteps; ++s)
    for (int d = 0; d < 3; ++d)
      for (int t = 0; t < 4; ++t) {
        out.low[s][d] |= ((exactq::order::exact_digit_bytes(big[8 * s + 2 * t]) >> (8 * d)) & 0xffu) << (8 * t);
        out.high[s][d] |= ((exactq::order::exact_digit_bytes(big[8 * s + 2 * t + 1]) >> (8 * d)) & 0xffu) << (8 * t);
      }
  return out;
}

__global__ void stage_chunks(const std::uint16_t* x, int k, ChunkB* b, float2* facts) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= k / 32) return;
  const ChunkDigits digits = stage_chunk_digits(x, c, facts);
  ChunkB out;
  for (int s = 0; s < kKSteps; ++s)
    for (int d = 0; d < 3; ++d) out.digits[s][d] = make_uint2(digits.low[s][d], digits.high[s][d]);
  b[c] = out;
}

__device__ __forceinline__ void mma_u8s8(int (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                         std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32) qmv_imma_kernel(const std::uint8_t* packed,
                                                                        const std::uint16_t* scales,
                                                                        const std::uint16_t* biases, const ChunkB* b_global,
                                                                        const float2* facts_global, std::uint16_t* y, int n,
                                                                        int k) {
  extern __shared__ uint4 shared_raw[];
  const int chunks = k / 32;
  ChunkB* b = reinterpret_cast<ChunkB*>(shared_raw);
  float2* facts = reinterpret_cast<float2*>(b + chunks);
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) b[i] = b_global[i], facts[i] = facts_global[i];
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const std::int64_t row_bytes = k / 2;
  const int groups = k / 64;
  const int tasks = n / 16;
  const int steps = chunks / 4;
  for (int task = blockIdx.x * kWarpsPerBlock + warp; task < tasks; task += gridDim.x * kWarpsPerBlock) {
    const int row_lo = task * 16 + g, row_hi = row_lo + 8;
    const uint4* w_lo = reinterpret_cast<const uint4*>(packed + row_lo * row_bytes);
    const uint4* w_hi = reinterpret_cast<const uint4*>(packed + row_hi * row_bytes);
    float chain[2][8];
    for (int r = 0; r < 2; ++r)
      for (int t = 0; t < 8; ++t) chain[r][t] = 0.0f;
    uint4 next_lo = __ldcs(w_lo + q), next_hi = __ldcs(w_hi + q);
    std::uint32_t next_p[4] = {scales[row_lo * groups + (q >> 1)], biases[row_lo * groups + (q >> 1)],
                               scales[row_hi * groups + (q >> 1)], biases[row_hi * groups + (q >> 1)]};
    // Steps of 8, so that chunk 4j + q's logical lane slot (j mod 8) is a compile-time index.
    for (int j0 = 0; j0 < steps; j0 += 8) {
#pragma unroll
      for (int slot = 0; slot < 8; ++slot) {
        const int j = j0 + slot;
        const int chunk = 4 * j + q;
        const uint4 cur_lo = next_lo, cur_hi = next_hi;
        const std::uint32_t p[4] = {next_p[0], next_p[1], next_p[2], next_p[3]};
        if (j + 1 < steps) {
          const int nc = chunk + 4, ng = nc >> 1;
          next_lo = __ldcs(w_lo + nc), next_hi = __ldcs(w_hi + nc);
          next_p[0] = scales[row_lo * groups + ng], next_p[1] = biases[row_lo * groups + ng];
          next_p[2] = scales[row_hi * groups + ng], next_p[3] = biases[row_hi * groups + ng];
        }
        const std::uint32_t wl[4] = {cur_lo.x, cur_lo.y, cur_lo.z, cur_lo.w};
        const std::uint32_t wh[4] = {cur_hi.x, cur_hi.y, cur_hi.z, cur_hi.w};
        int c01[4] = {0, 0, 0, 0}, c2[4] = {0, 0, 0, 0};
        // B: column n = g is chunk g / 2 of the step; nonzero only in lane q = g / 2's k.
        const bool mine = q == (g >> 1);
        const ChunkB& cb = b[4 * j + (g >> 1)];
#pragma unroll
        for (int s = 0; s < kKSteps; ++s) {
          const std::uint32_t a0 = wl[s] & 0x0f0f0f0fu, a2 = (wl[s] >> 4) & 0x0f0f0f0fu;
          const std::uint32_t a1 = wh[s] & 0x0f0f0f0fu, a3 = (wh[s] >> 4) & 0x0f0f0f0fu;
          const uint2 d01 = mine ? cb.digits[s][g & 1] : make_uint2(0, 0);
          const uint2 d2 = mine && (g & 1) == 0 ? cb.digits[s][2] : make_uint2(0, 0);
          mma_u8s8(c01, a0, a1, a2, a3, d01.x, d01.y);
          mma_u8s8(c2, a0, a1, a2, a3, d2.x, d2.y);
        }
        // c01 = {row g digit 0, row g digit 1, row g+8 digit 0, row g+8 digit 1}; c2[0], c2[2]: digit 2.
        const float2 f = facts[chunk];
        const std::uint32_t dot_lo = std::uint32_t(c01[0]) + (std::uint32_t(c01[1]) << 8) + (std::uint32_t(c2[0]) << 16);
        const std::uint32_t dot_hi = std::uint32_t(c01[2]) + (std::uint32_t(c01[3]) << 8) + (std::uint32_t(c2[2]) << 16);
        using namespace exactq::order;
        chain[0][slot] = lane_add(chain[0][slot], chunk_fold(__uint_as_float(p[0] << 16), __uint_as_float(p[1] << 16),
                                                             chunk_value(exact_float(std::int32_t(dot_lo)), f.y), f.x));
        chain[1][slot] = lane_add(chain[1][slot], chunk_fold(__uint_as_float(p[2] << 16), __uint_as_float(p[3] << 16),
                                                             chunk_value(exact_float(std::int32_t(dot_hi)), f.y), f.x));
      }
    }
    // The butterfly over logical lanes L = 4 slot + q: masks 16, 8, 4 pair slots, 2 and 1 lanes.
    using namespace exactq::order;
#pragma unroll
    for (int step = 0; step < kButterflySteps; ++step) {
      const int mask = butterfly_mask(step);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float next[8];
#pragma unroll
        for (int t = 0; t < 8; ++t)
          next[t] = mask >= 4 ? butterfly_step(chain[r][t], chain[r][t ^ (mask >> 2)])
                              : butterfly_step(chain[r][t], __shfl_xor_sync(0xffffffffu, chain[r][t], mask));
#pragma unroll
        for (int t = 0; t < 8; ++t) chain[r][t] = next[t];
      }
    }
    if (q == 0) {
      exactq::store_f32(y, std::size_t(row_lo), exactq::DType::bf16, chain[0][0]);
      exactq::store_f32(y, std::size_t(row_hi), exactq::DType::bf16, chain[1][0]);
    }
  }
}

// ---- v2 (session 27): 128-byte row segments, D steps of loads in flight, B without predication ----
// Lane (g, q) loads, per step j, chunks 8j + 2q and 8j + 2q + 1 (t = 0, 1) of rows g and g + 8:
// 4 loads of 16 bytes, the four q-lanes of a row covering 128 contiguous bytes. Each t is one
// pass of the v1 mapping (chunk 8j + 2q + t in lane q's k). Chunk 8j + 2q + t is qmv's logical
// lane L = 8 (j mod 4) + 2q + t: each physical lane keeps 8 chains per row; the butterfly's masks
// 16, 8 and 1 are adds between a lane's own chains, 4 and 2 shuffles (lane xor 2, xor 1).
// B: per chunk two 64-byte roles, read as 16-byte vectors: role 0 (even g) holds digits 0 and 2
// for k-step s, role 1 (odd g) digit 1 and zeros. A lane whose k is not its column's chunk reads
// a 64-byte block of zeros instead (a pointer chosen once per task, no predicated loads).
struct ChunkRoles {
  uint4 role[2][kKSteps];
};

__global__ void stage_roles(const std::uint16_t* x, int k, ChunkRoles* b, float2* facts) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= k / 32) return;
  const ChunkDigits digits = stage_chunk_digits(x, c, facts);
  ChunkRoles out;
  for (int s = 0; s < kKSteps; ++s) {
    const auto& lo = digits.low[s];
    const auto& hi = digits.high[s];
    out.role[0][s] = make_uint4(lo[0], hi[0], lo[2], hi[2]);
    out.role[1][s] = make_uint4(lo[1], hi[1], 0, 0);
  }
  b[c] = out;
}

// Loads written as asm volatile, to keep them where they stand relative to the mma: with plain
// loads, then with these, ptxas spilled 264 -> 72 bytes (D = 2 at 3 blocks), 144 -> 20 (D = 4)
// and 24 -> 44 (D = 2 at 2 blocks). The order of volatile asm binds the
// compiler's PTX, not ptxas's schedule, so most of the spill remained (see the header).
__device__ __forceinline__ uint4 load_stream_in_place(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ std::uint32_t load_u16_in_place(const std::uint16_t* p) {
  unsigned short v;
  asm volatile("ld.global.L2::128B.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ uint4 load_shared_in_place(const uint4* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(unsigned(__cvta_generic_to_shared(p))));
  return v;
}

template <int D, int MIN_BLOCKS>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, MIN_BLOCKS)
    qmv_imma2_kernel(const std::uint8_t* packed, const std::uint16_t* scales, const std::uint16_t* biases,
                     const ChunkRoles* b_global, const float2* facts_global, std::uint16_t* y, int n, int k) {
  static_assert(D == 2 || D == 4, "the ring's slot must be a compile-time index in a loop unrolled by 4");
  extern __shared__ uint4 shared_raw[];
  const int chunks = k / 32;
  ChunkRoles* b = reinterpret_cast<ChunkRoles*>(shared_raw);
  uint4* zeros = reinterpret_cast<uint4*>(b + chunks);
  float2* facts = reinterpret_cast<float2*>(zeros + kKSteps);
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) b[i] = b_global[i], facts[i] = facts_global[i];
  if (threadIdx.x < kKSteps) zeros[threadIdx.x] = make_uint4(0, 0, 0, 0);
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const bool mine = q == (g >> 1);
  const int role = g & 1;
  const std::int64_t row_bytes = k / 2;
  const int groups = k / 64;
  const int tasks = n / 16;
  const int steps = chunks / 8;
  for (int task = blockIdx.x * kWarpsPerBlock + warp; task < tasks; task += gridDim.x * kWarpsPerBlock) {
    const int row_lo = task * 16 + g, row_hi = row_lo + 8;
    const uint4* w_lo = reinterpret_cast<const uint4*>(packed + row_lo * row_bytes);
    const uint4* w_hi = reinterpret_cast<const uint4*>(packed + row_hi * row_bytes);
    const int p_lo = row_lo * groups, p_hi = row_hi * groups;
    float chain[2][4][2];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int jm = 0; jm < 4; ++jm) chain[r][jm][0] = chain[r][jm][1] = 0.0f;
    uint4 wbuf[D][4];
    std::uint32_t pbuf[D][4];
    auto load = [&](int j, uint4 (&w)[4], std::uint32_t (&pp)[4]) {
      const int c0 = 8 * j + 2 * q, grp = 4 * j + q;
      w[0] = load_stream_in_place(w_lo + c0), w[1] = load_stream_in_place(w_lo + c0 + 1);
      w[2] = load_stream_in_place(w_hi + c0), w[3] = load_stream_in_place(w_hi + c0 + 1);
      pp[0] = load_u16_in_place(scales + p_lo + grp), pp[1] = load_u16_in_place(biases + p_lo + grp);
      pp[2] = load_u16_in_place(scales + p_hi + grp), pp[3] = load_u16_in_place(biases + p_hi + grp);
    };
#pragma unroll
    for (int i = 0; i + 1 < D; ++i)
      if (i < steps) load(i, wbuf[i], pbuf[i]);
#pragma unroll 1
    for (int j0 = 0; j0 < steps; j0 += 4) {
#pragma unroll
      for (int jm = 0; jm < 4; ++jm) {
        const int j = j0 + jm;
        if (j + D - 1 < steps) load(j + D - 1, wbuf[(jm + D - 1) % D], pbuf[(jm + D - 1) % D]);
        const uint4(&w)[4] = wbuf[jm % D];
        const std::uint32_t(&pp)[4] = pbuf[jm % D];
        using namespace exactq::order;
        const float sc_lo = __uint_as_float(pp[0] << 16), bi_lo = __uint_as_float(pp[1] << 16);
        const float sc_hi = __uint_as_float(pp[2] << 16), bi_hi = __uint_as_float(pp[3] << 16);
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int chunk = 8 * j + 2 * q + t;
          const uint4* src = mine ? &b[chunk].role[role][0] : zeros;
          const std::uint32_t wl[4] = {w[t].x, w[t].y, w[t].z, w[t].w};
          const std::uint32_t wh[4] = {w[2 + t].x, w[2 + t].y, w[2 + t].z, w[2 + t].w};
          int c01[4] = {0, 0, 0, 0}, c2[4] = {0, 0, 0, 0};
#pragma unroll
          for (int s = 0; s < kKSteps; ++s) {
            const uint4 bb = load_shared_in_place(src + s);
            const std::uint32_t a0 = wl[s] & 0x0f0f0f0fu, a2 = (wl[s] >> 4) & 0x0f0f0f0fu;
            const std::uint32_t a1 = wh[s] & 0x0f0f0f0fu, a3 = (wh[s] >> 4) & 0x0f0f0f0fu;
            mma_u8s8(c01, a0, a1, a2, a3, bb.x, bb.y);
            mma_u8s8(c2, a0, a1, a2, a3, bb.z, bb.w);
          }
          const float2 f = facts[chunk];
          const std::uint32_t dot_lo = std::uint32_t(c01[0]) + (std::uint32_t(c01[1]) << 8) + (std::uint32_t(c2[0]) << 16);
          const std::uint32_t dot_hi = std::uint32_t(c01[2]) + (std::uint32_t(c01[3]) << 8) + (std::uint32_t(c2[2]) << 16);
          chain[0][jm][t] = lane_add(chain[0][jm][t], chunk_fold(sc_lo, bi_lo, chunk_value(exact_float(std::int32_t(dot_lo)), f.y), f.x));
          chain[1][jm][t] = lane_add(chain[1][jm][t], chunk_fold(sc_hi, bi_hi, chunk_value(exact_float(std::int32_t(dot_hi)), f.y), f.x));
        }
      }
    }
    // The butterfly over L = 8 jm + 2 q + t: mask 16 flips jm's bit 1, 8 jm's bit 0, 4 and 2 q's
    // bits (lane xor 2, xor 1), 1 flips t.
    using namespace exactq::order;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int step = 0; step < kButterflySteps; ++step) {
        const int mask = butterfly_mask(step);
        float next[4][2];
#pragma unroll
        for (int jm = 0; jm < 4; ++jm)
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const float own = chain[r][jm][t];
            float partner;
            if (mask == 16) partner = chain[r][jm ^ 2][t];
            else if (mask == 8) partner = chain[r][jm ^ 1][t];
            else if (mask == 1) partner = chain[r][jm][t ^ 1];
            else partner = __shfl_xor_sync(0xffffffffu, own, mask == 4 ? 2 : 1);
            next[jm][t] = butterfly_step(own, partner);
          }
#pragma unroll
        for (int jm = 0; jm < 4; ++jm) chain[r][jm][0] = next[jm][0], chain[r][jm][1] = next[jm][1];
      }
    }
    if (q == 0) {
      exactq::store_f32(y, std::size_t(row_lo), exactq::DType::bf16, chain[0][0][0]);
      exactq::store_f32(y, std::size_t(row_hi), exactq::DType::bf16, chain[1][0][0]);
    }
  }
}

void run(int n, int k) {
  if (k % 1024 != 0 || n % 16 != 0) {
    std::printf("%d x %d: the prototype takes K a multiple of 1024 and N of 16\n", n, k);
    return;
  }
  constexpr int kCopies = 3;
  const std::size_t packed_bytes = std::size_t(n) * k / 2, params = std::size_t(n) * (k / 64);
  std::mt19937_64 rng(std::uint64_t(n) * 31 + k);
  std::vector<std::uint8_t> packed(packed_bytes);
  for (auto& v : packed) v = std::uint8_t(rng());
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<std::uint16_t> scales(params), biases(params), x(static_cast<std::size_t>(k));
  random_group_parameters(rng, scales, biases);
  for (auto& v : x) v = exactq::f32_to_bf16(unit(rng) * std::ldexp(1.0f, int(rng() % 12) - 6));  // a spread of binades

  exactq::QuantizedMatrixView host;
  host.packed = packed;
  host.scales = std::as_bytes(std::span(scales));
  host.biases = std::as_bytes(std::span(biases));
  host.n = n, host.k = k, host.bits = 4, host.group = 64, host.dtype = exactq::DType::bf16;
  std::vector<std::uint16_t> y_cpu(static_cast<std::size_t>(n)), y_wide(static_cast<std::size_t>(n));
  exactq::cpu::qmv(exactq::Kernel::qmv, host, std::as_bytes(std::span(x)), 1, std::as_writable_bytes(std::span(y_cpu)));
  exactq::cpu::qmv(exactq::Kernel::qmv_wide, host, std::as_bytes(std::span(x)), 1, std::as_writable_bytes(std::span(y_wide)));

  std::vector<exactq::cuda::DeviceBuffer> dp, ds, db;
  std::vector<exactq::QuantizedMatrixView> views;
  for (int c = 0; c < kCopies; ++c) {
    dp.emplace_back(packed_bytes), ds.emplace_back(params * 2), db.emplace_back(params * 2);
    dp.back().upload(std::as_bytes(std::span(packed)));
    ds.back().upload(host.scales);
    db.back().upload(host.biases);
  }
  for (int c = 0; c < kCopies; ++c) {
    exactq::QuantizedMatrixView v = host;
    v.packed = {reinterpret_cast<const std::uint8_t*>(dp[std::size_t(c)].bytes().data()), packed_bytes};
    v.scales = ds[std::size_t(c)].bytes();
    v.biases = db[std::size_t(c)].bytes();
    views.push_back(v);
  }
  exactq::cuda::DeviceBuffer dx(std::size_t(k) * 2), dy(std::size_t(n) * 2), dy_qmv(std::size_t(n) * 2);
  exactq::cuda::DeviceBuffer db_frag(sizeof(ChunkB) * (k / 32)), dfacts(sizeof(float2) * (k / 32));
  dx.upload(std::as_bytes(std::span(x)));
  auto* bfrag = reinterpret_cast<ChunkB*>(db_frag.bytes().data());
  auto* facts = reinterpret_cast<float2*>(dfacts.bytes().data());
  const std::size_t smem = (sizeof(ChunkB) + sizeof(float2)) * (k / 32);
  PROTOTYPE_CHECK(cudaFuncSetAttribute(qmv_imma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int per_sm = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, qmv_imma_kernel, kWarpsPerBlock * 32, smem));
  const int grid = std::min(per_sm * prototype_sm_count(), (n / 16 + kWarpsPerBlock - 1) / kWarpsPerBlock);
  auto imma = [&](int i) {
    const exactq::QuantizedMatrixView& v = views[std::size_t(i % kCopies)];
    stage_chunks<<<(k / 32 + 127) / 128, 128>>>(reinterpret_cast<const std::uint16_t*>(dx.bytes().data()), k, bfrag, facts);
    qmv_imma_kernel<<<grid, kWarpsPerBlock * 32, smem>>>(
        v.packed.data(), reinterpret_cast<const std::uint16_t*>(v.scales.data()),
        reinterpret_cast<const std::uint16_t*>(v.biases.data()), bfrag, facts,
        reinterpret_cast<std::uint16_t*>(dy.bytes().data()), n, k);
  };
  auto library_qmv = [&](int i) {
    exactq::cuda::qmv(exactq::Kernel::qmv, views[std::size_t(i % kCopies)], dx.bytes(), 1, dy_qmv.bytes());
  };
  dy.fill(0xA5);
  imma(0);
  library_qmv(0);
  PROTOTYPE_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint16_t> y_imma(static_cast<std::size_t>(n)), y_qmv(static_cast<std::size_t>(n));
  dy.download(std::as_writable_bytes(std::span(y_imma)));
  dy_qmv.download(std::as_writable_bytes(std::span(y_qmv)));
  auto differing = [&](const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
    int d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += a[i] != b[i];
    return d;
  };
  const int vs_cpu = differing(y_imma, y_cpu), vs_qmv = differing(y_imma, y_qmv), control = differing(y_wide, y_cpu);
  std::printf("%d x %d: imma vs CPU qmv: %d of %d outputs differ; vs CUDA qmv: %d; control (CPU qmv_wide vs CPU qmv): %d differ -> %s\n",
              n, k, vs_cpu, n, vs_qmv, control, vs_cpu == 0 && vs_qmv == 0 && control > 0 ? "PASS" : "FAIL");

  std::vector<void*> raw;
  for (auto& b : dp) raw.push_back(b.bytes().data());
  unsigned* sink = nullptr;
  PROTOTYPE_CHECK(cudaMalloc(&sink, 4));
  const float read_us = stream_read_us<4>(raw, packed_bytes, sink);
  const float imma_us = median_launch_us(imma, kCopies);
  const float qmv_us = median_launch_us(library_qmv, kCopies);
  std::printf("  read of the codes %.1f us; library qmv %.1f us (%.1f %% of the read); imma (staging included) %.1f us (%.1f %%); %d blocks of %d warps\n",
              read_us, qmv_us, 100.0 * read_us / qmv_us, imma_us, 100.0 * read_us / imma_us, grid, kWarpsPerBlock);

  // v2: its own staging (roles), then each configuration checked byte for byte and timed alone
  // (x staged once, outside the timing) and with its staging launch.
  exactq::cuda::DeviceBuffer d_roles(sizeof(ChunkRoles) * (k / 32));
  auto* roles = reinterpret_cast<ChunkRoles*>(d_roles.bytes().data());
  auto stage2 = [&] {
    stage_roles<<<(k / 32 + 127) / 128, 128>>>(reinterpret_cast<const std::uint16_t*>(dx.bytes().data()), k, roles, facts);
  };
  auto v2 = [&]<int D, int MIN_BLOCKS>() {
    const std::size_t smem2 = sizeof(ChunkRoles) * (k / 32) + 16 * kKSteps + sizeof(float2) * (k / 32);
    auto kernel = qmv_imma2_kernel<D, MIN_BLOCKS>;
    PROTOTYPE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem2)));
    int per_sm2 = 0;
    PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm2, kernel, kWarpsPerBlock * 32, smem2));
    const int grid2 = std::min(per_sm2 * prototype_sm_count(), (n / 16 + kWarpsPerBlock - 1) / kWarpsPerBlock);
    cudaFuncAttributes attributes{};
    PROTOTYPE_CHECK(cudaFuncGetAttributes(&attributes, kernel));
    auto alone = [&](int i) {
      const exactq::QuantizedMatrixView& v = views[std::size_t(i % kCopies)];
      kernel<<<grid2, kWarpsPerBlock * 32, smem2>>>(v.packed.data(), reinterpret_cast<const std::uint16_t*>(v.scales.data()),
                                                   reinterpret_cast<const std::uint16_t*>(v.biases.data()), roles, facts,
                                                   reinterpret_cast<std::uint16_t*>(dy.bytes().data()), n, k);
    };
    auto staged = [&](int i) { stage2(), alone(i); };
    dy.fill(0xA5);
    staged(0);
    PROTOTYPE_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint16_t> y2(static_cast<std::size_t>(n));
    dy.download(std::as_writable_bytes(std::span(y2)));
    const int d_cpu = differing(y2, y_cpu), d_qmv = differing(y2, y_qmv);
    const float alone_us = median_launch_us(alone, kCopies), staged_us = median_launch_us(staged, kCopies);
    std::printf("  v2 D=%d min_blocks=%d (%d regs, %d local bytes, %d blocks/SM): vs CPU qmv %d differ, vs CUDA qmv %d -> %s; "
                "%.1f us alone (%.1f %% of the read), %.1f us with its staging\n",
                D, MIN_BLOCKS, attributes.numRegs, int(attributes.localSizeBytes), per_sm2, d_cpu, d_qmv,
                d_cpu == 0 && d_qmv == 0 && control > 0 ? "PASS" : "FAIL", alone_us, 100.0 * read_us / alone_us, staged_us);
  };
  v2.template operator()<2, 2>();
  v2.template operator()<4, 2>();
  v2.template operator()<2, 3>();
  v2.template operator()<2, 1>();
  const float qmv_again_us = median_launch_us(library_qmv, kCopies);
  std::printf("  library qmv again %.1f us\n", qmv_again_us);
  cudaFree(sink);
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("%s\n", exactq::cuda::device_description().c_str());
  if (argc == 3) {
    run(std::atoi(argv[1]), std::atoi(argv[2]));
    return 0;
  }
  run(4096, 4096);
  run(28672, 8192);
  run(128256, 4096);
  return 0;
}
