// A measurement prototype, not part of the library (built by hand): does qmv at M = 1 reach the
// read ceiling when its weights arrive through a block-wide shared-memory ring filled by the
// tensor copy engine (cp.async.bulk.tensor, one 2D box per stage), instead of through each warp's
// register double buffer (68-73 % of the ceiling, sessions 4-10)? And with which arithmetic?
// Results: docs/benchmark_results/2026-12-03-h200-session11.md; decision 0003.
// Its f32-chain mode calls the library's f32-chain staging and chunk step, which session 12
// replaced with the integer contract (decision 0003): it builds against commit c648b72, not later.
//
// Earlier rings (session 3: per-thread cp.async; session 6: one 512-byte bulk copy per row and
// warp slot) stopped near 80 % of a streaming read even without arithmetic. What is new here is
// the size of a copy: one instruction moves a whole stage, all rows of the block times one round
// (32 rows x 512 bytes = 16 KB at 4 bits), so the copy engine sees few, large requests.
//
// The kernels, all 4-bit, group 64, bf16, M = 1:
//   qmv_tma_kernel<STAGES, CONSUMERS, MODE, ROWS>: the ring, with MODE = loads only, qmv's f32
//     chain (the library's stage_lifted and chunk_step: its bytes must equal the library
//     kernel's), or the candidate exact integer chunk dot (the int_* functions below, checked
//     against int_reference on the host).
//       block: CONSUMERS warps of ROWS rows, plus one producer warp whose lane 0 issues the copies.
//       stage: one round (chunk l + 32 r of each row, for every lane l) of the block's rows, a box.
//       params: each consumer warp copies its rows' scales and biases for round r + STAGES - 1
//         with 4-byte cp.async into its own small ring.
//       release: every consumer lane arrives on the stage's empty barrier (a lane-0 arrive after
//         __syncwarp let the producer refill a stage under other lanes' reads).
//   qmv_int_kernel: the integer ring tuned after ncu (shared-space loads, the ring unrolled per
//     stage, one unscale multiply).
//   qmv_ring_kernel: x's digits prepared once per launch (prep_digits_kernel) and carried by the
//     ring. Its 5-stage, 16-warp instance still differs on a few rows in some runs (not found).
//   qmv_register_int_kernel: the integer dot in the library kernel's own register structure.
//   stage_only_kernel: the per-block staging of x alone, and an empty launch, on qmv's grid.
// Every kernel may run as an overlapped launch (programmatic dependent launch), as the library's.
//
// Build: nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a --fmad=false -ftz=false \
//          -Xcompiler -ffp-contract=off -I include -I src -o tma bench/prototypes/qmv_tma_prototype.cu
// Run: ./tma [N K ...] (defaults: 7 shapes), or ./tma --only VARIANT N K (three launches, for ncu).
// Timing: medians of back-to-back stream launches rotating over weight copies (not graph
// replays), so a launch's fixed cost (~3-4 us on this grid) is in every figure.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "cuda/family_launch.cuh"
#include "prototype_common.cuh"

using namespace exactq;
using namespace exactq::cuda_detail;

constexpr int kBits = 4, kRows = 4 /* the library kernel's */, kGroup = 64, kRoundBytes = 512;
constexpr int kRoundGroups = 1024 / kGroup;                 // groups a row has per round
constexpr int kParamWords = kRoundGroups / 2;               // 4-byte words of one row's scales per round
template <int ROWS>
constexpr int kParamBytesPerWarpSlot = ROWS * 2 * kRoundGroups * 2;  // rows x {scale, bias} x groups x 2 B

__device__ __forceinline__ unsigned smem_u32(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void bar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void bar_expect(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_wait(std::uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(smem_u32(bar)), "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int x0, int y0, std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x0), "r"(y0), "r"(smem_u32(bar))
      : "memory");
}

enum { kLoadsOnly = 0, kFloatChain = 1, kIntegerDot = 2 };

struct TmaArgs {
  const std::uint16_t* scales;
  const std::uint16_t* biases;
  const void* x;
  void* y;
  int n, k;
  unsigned* sink;
};

// ---- the candidate contract: an exact integer chunk dot -----------------------------------------
// The host reference (int_reference) computes it with src/common/order.h's exact_* functions,
// the library's one definition (decision 0003); the device functions below are the ones that ran.
// Per chunk: E = max(exponent field of the largest |x|, 1), so every |x| < 2^(E-126);
// X_i = rint(x_i * 2^(148-E)), |X_i| < 2^22; D = sum q_i X_i exactly (|D| < 2^31 at 4 bits);
// A = mul(mul(float(D), 2^u1), 2^u2) with u1 = max(E-148, -126), u2 = E-148-u1. The fold, the
// lane chains and the butterfly are qmv's. D has no order, so any instruction may compute it.
__host__ __device__ inline float int_pow2(int n) { return float_from_bits(std::uint32_t(n + 127) << 23); }
__host__ __device__ inline int int_exponent(std::uint32_t max_abs_bits) {
  const int field = int(max_abs_bits >> 23);
  return field < 1 ? 1 : field;
}
__host__ __device__ inline float int_scaled(float x, int e) {  // x * 2^(148-E), two exact muls
  const int t = 148 - e, s1 = t < 127 ? t : 127;
  return order::mul(order::mul(x, int_pow2(s1)), int_pow2(t - s1));
}
__host__ __device__ inline float int_unscale_first(int e) { return int_pow2(e - 148 > -126 ? e - 148 : -126); }
__host__ __device__ inline float int_unscale_second(int e) { return int_pow2(e - 148 > -126 ? 0 : e - 148 + 126); }

__device__ __forceinline__ int to_int_rn(float v) { return __float2int_rn(v); }
__device__ __forceinline__ int dp4a_us(unsigned a, unsigned b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
// Where word p (0..23) of chunk c's digit words sits, in uint4s: 6 uint4 per chunk,
// chunk-interleaved like piece_index (conflict-free 16-byte reads by 32 lanes).
__device__ __forceinline__ int digit_index(int c, int k) { return (c >> 5) * 192 + k * 32 + (c & 31); }
// Digit word for code word j, half h (0: codes 8j+0,2,4,6 = the low nibbles; 1: 8j+1,3,5,7), digit d.
__host__ __device__ constexpr int digit_word(int j, int h, int d) { return (j * 2 + h) * 3 + d; }

// One thread per chunk: E, the digits of X packed 4 per word in the order the masked code bytes
// come, and the facts {S, 2^u1, 2^u2}.
__device__ void stage_digits(uint4* digits, float4* facts, const std::uint16_t* x, int k) {
  const int chunks = k / 32;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = bf16_to_f32(x[c * 32 + i]);
    const int e = int_exponent(order::chunk_max_abs_bits(v));
    unsigned words[24];
#pragma unroll
    for (int i = 0; i < 24; ++i) words[i] = 0;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int big = to_int_rn(int_scaled(v[i], e));
      const int d0 = int(std::int8_t(big & 0xff));
      const int d1 = int(std::int8_t(((big - d0) >> 8) & 0xff));
      const int d2 = (big - d0 - 256 * d1) >> 16;
      const int j = i / 8, h = i % 2, byte = (i % 8) / 2;
      words[digit_word(j, h, 0)] |= unsigned(d0 & 0xff) << (8 * byte);
      words[digit_word(j, h, 1)] |= unsigned(d1 & 0xff) << (8 * byte);
      words[digit_word(j, h, 2)] |= unsigned(d2 & 0xff) << (8 * byte);
    }
#pragma unroll
    for (int q = 0; q < 6; ++q)
      digits[digit_index(c, q)] = make_uint4(words[4 * q], words[4 * q + 1], words[4 * q + 2], words[4 * q + 3]);
    facts[c] = make_float4(order::chunk_x_sum(v), int_unscale_first(e), int_unscale_second(e), 0.0f);
  }
}

// The chunk of 4 rows: per code word, the low and the high nibbles masked in their bytes (the
// high ones stay x16), three dp4a per half and digit, then D and qmv's fold.
template <int ROWS>
__device__ __forceinline__ void int_chunk_step(const std::uint32_t (&w)[ROWS][kBits], const float (&scale)[ROWS],
                                               const float (&bias)[ROWS], const uint4* digits, const float4* facts,
                                               int c, float (&total)[ROWS][1]) {
  unsigned dw[24];
#pragma unroll
  for (int q = 0; q < 6; ++q) {
    const uint4 v = digits[digit_index(c, q)];
    dw[4 * q] = v.x, dw[4 * q + 1] = v.y, dw[4 * q + 2] = v.z, dw[4 * q + 3] = v.w;
  }
  const float4 f = facts[c];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    int lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned l = w[r][j] & 0x0f0f0f0fu, h = w[r][j] & 0xf0f0f0f0u;
#pragma unroll
      for (int d = 0; d < 3; ++d) {
        lo[d] = dp4a_us(l, dw[digit_word(j, 0, d)], lo[d]);
        hi[d] = dp4a_us(h, dw[digit_word(j, 1, d)], hi[d]);
      }
    }
    const int dot = (lo[0] + (hi[0] >> 4)) + ((lo[1] + (hi[1] >> 4)) << 8) + ((lo[2] + (hi[2] >> 4)) << 16);
    const float a = order::mul(order::mul(__int2float_rn(dot), f.y), f.z);
    total[r][0] = order::lane_add(total[r][0], order::chunk_fold(scale[r], bias[r], a, f.x));
  }
}

__host__ __device__ constexpr int lifted_values(int k) { return (k + 1023) / 1024 * 1024; }
template <int STAGES, int CONSUMERS, int ROWS>
__host__ __device__ constexpr std::size_t ring_bytes() { return std::size_t(STAGES) * CONSUMERS * ROWS * kRoundBytes; }
template <int STAGES, int CONSUMERS, int ROWS>
std::size_t tma_shared_bytes(int k) {
  return ring_bytes<STAGES, CONSUMERS, ROWS>() + std::size_t(CONSUMERS) * STAGES * kParamBytesPerWarpSlot<ROWS> + 16 * 2 * STAGES +
         std::size_t(lifted_values(k)) * 4 + std::size_t(lifted_values(k) / 32) * 16 + 1024;
}

template <int STAGES, int CONSUMERS, int MODE, int ROWS>
__global__ void __launch_bounds__((CONSUMERS + 1) * 32, CONSUMERS * ROWS <= 16 ? 3 : (CONSUMERS * ROWS <= 32 ? 2 : 1)) qmv_tma_kernel(const __grid_constant__ CUtensorMap weights,
                                                                        const TmaArgs a) {
  extern __shared__ unsigned char raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t(1023));
  unsigned char* ring = base;
  unsigned char* pring = ring + ring_bytes<STAGES, CONSUMERS, ROWS>();
  std::uint64_t* full = reinterpret_cast<std::uint64_t*>(pring + std::size_t(CONSUMERS) * STAGES * kParamBytesPerWarpSlot<ROWS>);
  std::uint64_t* empty = full + STAGES;
  float4* lifted = reinterpret_cast<float4*>(empty + STAGES);
  const int tile = lifted_values(a.k);
  float4* facts = lifted + tile / 4;

  constexpr int kBlocROWS = CONSUMERS * ROWS;
  constexpr unsigned kStageBytes = kBlocROWS * kRoundBytes;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int chunks = a.k / 32, rounds = (chunks + 31) / 32, groups = a.k / kGroup;
  const int block_tasks = (a.n + kBlocROWS - 1) / kBlocROWS;
  const int my_tasks = blockIdx.x < block_tasks ? (block_tasks - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  const int steps = my_tasks * rounds;  // (task, round) pairs of this block, in order

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) bar_init(&full[s], 1), bar_init(&empty[s], CONSUMERS * 32);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // The producer starts the first stages before x is staged.
  int p_step = 0, p_task = blockIdx.x, p_round = 0, p_slot = 0;
  unsigned p_phase = 0;
  auto produce = [&]() {
    bar_wait(&empty[p_slot], p_phase ^ 1);
    bar_expect(&full[p_slot], kStageBytes);
    tma_load_2d(ring + std::size_t(p_slot) * kStageBytes, &weights, p_round * (kRoundBytes / 4), p_task * kBlocROWS,
                &full[p_slot]);
    ++p_step;
    if (++p_round == rounds) p_round = 0, p_task += gridDim.x;
    if (++p_slot == STAGES) p_slot = 0, p_phase ^= 1;
  };
  // Overlapped launches (programmatic dependent launch, as the library's kernels allow): the next
  // launch may start as this one's blocks finish; weights are immutable, so the first stages are
  // requested before waiting for the previous launch, which may still be writing x and y.
  let_next_grid_start();
  if (warp == CONSUMERS && lane == 0)
    while (p_step < steps && p_step < STAGES) produce();
  wait_for_previous_grid();

  if constexpr (MODE == kIntegerDot) {
    stage_digits(reinterpret_cast<uint4*>(lifted), facts, static_cast<const std::uint16_t*>(a.x), a.k);
  } else {
    QmvParams p{};
    p.x = a.x, p.k = a.k, p.dtype = DType::bf16;
    stage_lifted<kBits, 1>(lifted, facts, tile, p, 0, 0, a.k);
  }
  __syncthreads();

  if (warp == CONSUMERS) {
    if (lane == 0)
      while (p_step < steps) produce();
    return;
  }

  // ---- consumers ----
  unsigned char* my_params = pring + std::size_t(warp) * STAGES * kParamBytesPerWarpSlot<ROWS>;
  // Param copies of step j (task, round) into slot j % STAGES: lanes take the rows' words.
  int q_step = 0, q_task = blockIdx.x, q_round = 0, q_slot = 0;
  auto issue_params = [&]() {
    if (q_step < steps) {
      unsigned char* slot = my_params + q_slot * kParamBytesPerWarpSlot<ROWS>;
      for (int i = lane; i < ROWS * 2 * kParamWords; i += 32) {
        const int array = i / (ROWS * kParamWords), r = (i / kParamWords) % ROWS, word = i % kParamWords;
        int row = q_task * kBlocROWS + warp * ROWS + r;
        row = row < a.n ? row : a.n - 1;
        const int g = q_round * kRoundGroups + 2 * word;
        const std::uint16_t* src = (array == 0 ? a.scales : a.biases) + std::size_t(row) * groups + g;
        copy_async_if<4>(g < groups, slot + ((array * ROWS + r) * kRoundGroups + 2 * word) * 2, src);
      }
    }
    commit_async_copies();
    ++q_step;
    if (++q_round == rounds) q_round = 0, q_task += gridDim.x;
    if (++q_slot == STAGES) q_slot = 0;
  };
  for (int s = 0; s < STAGES - 1; ++s) issue_params();

  float total[ROWS][1];
  unsigned fold = 0;
  int task = blockIdx.x, round = 0, slot = 0;
  unsigned phase = 0;
  for (int j = 0; j < steps; ++j) {
    if (round == 0)
#pragma unroll
      for (int r = 0; r < ROWS; ++r) total[r][0] = 0.0f;
    __syncwarp();  // every lane is done with the param slot refilled next
    issue_params();
    wait_async_copies<STAGES - 1>();
    __syncwarp();  // the other lanes' copies of this step's params are visible
    bar_wait(&full[slot], phase);
    std::uint32_t w[ROWS][kBits];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const uint4 v = *reinterpret_cast<const uint4*>(ring + std::size_t(slot) * kStageBytes +
                                                      (warp * ROWS + r) * kRoundBytes + lane * 16);
      w[r][0] = v.x, w[r][1] = v.y, w[r][2] = v.z, w[r][3] = v.w;
    }
    bar_arrive(&empty[slot]);  // every lane: its own reads are done (a lane-0 arrive after __syncwarp raced)
    const int c = lane + 32 * round;
    const std::uint16_t* ps = reinterpret_cast<const std::uint16_t*>(my_params + slot * kParamBytesPerWarpSlot<ROWS>);
    if (c < chunks) {
      float sc[ROWS], bi[ROWS];
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
        sc[r] = widen_half(ps[r * kRoundGroups + lane / 2], DType::bf16),
        bi[r] = widen_half(ps[(ROWS + r) * kRoundGroups + lane / 2], DType::bf16);
      if constexpr (MODE == kFloatChain) {
        chunk_step<kBits, 1, ROWS>(w, sc, bi, lifted, tile / 4, facts, tile / 32, c, total);
      } else if constexpr (MODE == kIntegerDot) {
        int_chunk_step<ROWS>(w, sc, bi, reinterpret_cast<const uint4*>(lifted), facts, c, total);
      } else {
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
          fold ^= w[r][0] ^ w[r][1] ^ w[r][2] ^ w[r][3] ^ __float_as_uint(sc[r]) ^ __float_as_uint(bi[r]);
      }
    }
    if (++slot == STAGES) slot = 0, phase ^= 1;
    if (++round == rounds) {
      round = 0;
      if constexpr (MODE != kLoadsOnly) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
          float t = total[r][0];
#pragma unroll
          for (int step = 0; step < order::kButterflySteps; ++step)
            t = order::butterfly_step(t, __shfl_xor_sync(0xffffffffu, t, order::butterfly_mask(step)));
          const int row = task * kBlocROWS + warp * ROWS + r;
          if (lane == 0 && row < a.n) store_f32(a.y, std::size_t(row), DType::bf16, t);
        }
      }
      task += gridDim.x;
    }
  }
  wait_async_copies<0>();
  if (fold == 0x9e3779b9u) *a.sink = fold;
}


// ---- the integer contract, tuned (session 11, after ncu: 414 warp-instructions per round of 4
// rows in qmv_tma_kernel, 76 % issue active) ----
// Shared memory addressed from the kernel's own array (LDS, not generic loads), the ring loop
// unrolled over its stages (slot offsets are constants), each lane's parameter copies fixed per
// task, scale and bias of a row read with one 8-byte load, one multiply to unscale, staging with
// a warp per chunk.
__host__ __device__ inline float exact_pow2(int n) {  // 2^n for n in [-149, 127], subnormal below -126
  return n >= -126 ? float_from_bits(std::uint32_t(n + 127) << 23) : float_from_bits(1u << (n + 149));
}
// The candidate contract's unscale, one rounding: A = mul(float(D), 2^(E-148)).
__host__ __device__ inline float int_unscale(int e) { return exact_pow2(e - 148); }

template <int ROWS>
constexpr int kParamSlotBytes = ROWS * kParamWords * 8;  // per row and word pair: {scales, biases}

template <int STAGES, int CONSUMERS, int ROWS>
constexpr std::size_t int_shared_bytes(int k) {
  return std::size_t(STAGES) * CONSUMERS * ROWS * kRoundBytes + std::size_t(CONSUMERS) * STAGES * kParamSlotBytes<ROWS> +
         16 * 2 * STAGES + std::size_t(lifted_values(k) / 32) * (96 + 16);
}

// Warp per chunk: lane i takes value i; E from a warp max; lane i writes its three digit bytes
// where the dp4a operands want them. Then a thread per chunk sums S in order.
__device__ void stage_digits_fast(unsigned char* digit_bytes, float4* facts, const std::uint16_t* x, int k) {
  const int chunks = k / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int j = lane / 8, h = lane % 2, b = (lane % 8) / 2;
  for (int c = warp; c < chunks; c += warps) {
    const float v = bf16_to_f32(x[c * 32 + lane]);
    const int e = int_exponent(__reduce_max_sync(0xffffffffu, bits_from_float(v) & 0x7fffffffu));
    const int big = to_int_rn(int_scaled(v, e));
    const int d0 = int(std::int8_t(big & 0xff));
    const int d1 = int(std::int8_t(((big - d0) >> 8) & 0xff));
    const int d2 = (big - d0 - 256 * d1) >> 16;
    const int digits[3] = {d0, d1, d2};
#pragma unroll
    for (int d = 0; d < 3; ++d) {
      const int p = digit_word(j, h, d);
      digit_bytes[digit_index(c, p / 4) * 16 + (p % 4) * 4 + b] = std::uint8_t(digits[d] & 0xff);
    }
    if (lane == 0) facts[c] = make_float4(0.0f, int_unscale(e), 0.0f, 0.0f);
  }
  __syncthreads();
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    float sum = 0.0f;
    for (int i = 0; i < 32; ++i) sum = order::sum_step(sum, bf16_to_f32(x[c * 32 + i]));
    facts[c].x = sum;
  }
}

template <int ROWS>
__device__ __forceinline__ void int_rows_compute(const std::uint32_t (&w)[ROWS][kBits], const uint2 (&params)[ROWS],
                                                 unsigned selector, const unsigned (&dw)[24], const float4 f,
                                                 float (&total)[ROWS]);
template <int ROWS>
__device__ __forceinline__ void int_rows_step(const std::uint32_t (&w)[ROWS][kBits], const uint2 (&params)[ROWS],
                                              unsigned selector, const uint4* digits, const float4* facts, int c,
                                              float (&total)[ROWS]) {
  unsigned dw[24];
#pragma unroll
  for (int q = 0; q < 6; ++q) {
    const uint4 v = digits[digit_index(c, q)];
    dw[4 * q] = v.x, dw[4 * q + 1] = v.y, dw[4 * q + 2] = v.z, dw[4 * q + 3] = v.w;
  }
  int_rows_compute<ROWS>(w, params, selector, dw, facts[c], total);
}
// f = {S, 2^(E-148)}
template <int ROWS>
__device__ __forceinline__ void int_rows_compute(const std::uint32_t (&w)[ROWS][kBits], const uint2 (&params)[ROWS],
                                                 unsigned selector, const unsigned (&dw)[24], const float4 f,
                                                 float (&total)[ROWS]) {
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    int lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned l = w[r][j] & 0x0f0f0f0fu, hh = w[r][j] & 0xf0f0f0f0u;
#pragma unroll
      for (int d = 0; d < 3; ++d) {
        lo[d] = dp4a_us(l, dw[digit_word(j, 0, d)], lo[d]);
        hi[d] = dp4a_us(hh, dw[digit_word(j, 1, d)], hi[d]);
      }
    }
    // D = lo0 + lo1 2^8 + lo2 2^16 + (hi0 + hi1 2^8 + hi2 2^16) / 16, with hi_d = 16 x (their dots):
    // wrapping 32-bit arithmetic, exact because the true D fits.
    const unsigned dot = unsigned(lo[0]) + (unsigned(lo[1]) << 8) + (unsigned(lo[2]) << 16) + unsigned(hi[0] >> 4) +
                         (unsigned(hi[1]) << 4) + (unsigned(hi[2]) << 12);
    const float a = order::mul(__int2float_rn(int(dot)), f.y);
    const float scale = __uint_as_float(__byte_perm(params[r].x, 0, selector));
    const float bias = __uint_as_float(__byte_perm(params[r].y, 0, selector));
    total[r] = order::lane_add(total[r], order::chunk_fold(scale, bias, a, f.x));
  }
}

// A consumer warp's ring of parameter slots (qmv_int_kernel, qmv_ring_kernel): for step j
// (task, round) of the block, the warp's rows' scales and biases of that round land in slot
// j % STAGES, copied STAGES - 1 steps ahead with 4-byte cp.async. Lane takes copy i = lane + 32 m
// (m < ROWS / 2): array i / (ROWS * 8), row (i / 8) % ROWS, word i % 8, into {scales, biases}
// word pairs per row and word, so a lane reads its row's pair with one 8-byte load.
template <int ROWS, int STAGES>
struct ParamRing {
  static constexpr int kCopies = ROWS * 2 * kParamWords / 32;
  unsigned char* slots;
  const std::uint16_t* scales;
  const std::uint16_t* biases;
  int n, groups, rounds, steps, block_rows, warp_row0, word;
  int dst[kCopies], array[kCopies], row[kCopies];
  const std::uint16_t* src[kCopies];
  int step = 0, task, round = 0, slot = 0;

  __device__ ParamRing(unsigned char* warp_slots, const TmaArgs& a, int warp_row0, int lane, int groups, int rounds,
                       int steps, int block_rows)
      : slots(warp_slots), scales(a.scales), biases(a.biases), n(a.n), groups(groups), rounds(rounds), steps(steps),
        block_rows(block_rows), warp_row0(warp_row0), word(lane % kParamWords), task(blockIdx.x) {
#pragma unroll
    for (int m = 0; m < kCopies; ++m) {
      const int i = lane + 32 * m;
      array[m] = i / (ROWS * kParamWords);
      row[m] = (i / kParamWords) % ROWS;
      dst[m] = ((row[m] * kParamWords + word) * 2 + array[m]) * 4;
    }
    aim();
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue();
  }
  // The copy sources of the task being copied (rows past N read row N - 1).
  __device__ void aim() {
#pragma unroll
    for (int m = 0; m < kCopies; ++m) {
      int r = task * block_rows + warp_row0 + row[m];
      r = r < n ? r : n - 1;
      src[m] = (array[m] == 0 ? scales : biases) + std::size_t(r) * groups + 2 * word;
    }
  }
  // The next step's copies, as one commit group (empty past the last step or the row's end).
  __device__ void issue() {
    const int g = round * kRoundGroups + 2 * word;
    const bool live = step < steps && g < groups;
    unsigned char* to = slots + slot * kParamSlotBytes<ROWS>;
#pragma unroll
    for (int m = 0; m < kCopies; ++m) copy_async_if<4>(live, to + dst[m], src[m] + round * kRoundGroups);
    commit_async_copies();
    ++step;
    if (++slot == STAGES) slot = 0;
    if (++round == rounds) round = 0, task += gridDim.x, aim();
  }
  // Row r's {scale, bias} word pair for this lane's group, in slot s.
  __device__ uint2 pair(int s, int r, int lane) const {
    return *reinterpret_cast<const uint2*>(slots + s * kParamSlotBytes<ROWS> + (r * kParamWords + lane / 4) * 8);
  }
};

// The end of a task: each row's lane chains through the butterfly, lane 0 stores, totals reset.
template <int ROWS>
__device__ __forceinline__ void finish_task(float (&total)[ROWS], int first_row, int lane, const TmaArgs& a) {
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    float t = total[r];
#pragma unroll
    for (int step = 0; step < order::kButterflySteps; ++step)
      t = order::butterfly_step(t, __shfl_xor_sync(0xffffffffu, t, order::butterfly_mask(step)));
    if (lane == 0 && first_row + r < a.n) store_f32(a.y, std::size_t(first_row + r), DType::bf16, t);
    total[r] = 0.0f;
  }
}

template <int STAGES, int CONSUMERS, int ROWS>
__global__ void __launch_bounds__((CONSUMERS + 1) * 32, CONSUMERS * ROWS <= 16 ? 3 : (CONSUMERS * ROWS <= 32 ? 2 : 1))
    qmv_int_kernel(const __grid_constant__ CUtensorMap weights, const TmaArgs a) {
  extern __shared__ __align__(1024) unsigned char smem[];
  constexpr int kBlockRows = CONSUMERS * ROWS;
  constexpr unsigned kStageBytes = kBlockRows * kRoundBytes;
  constexpr int kRingBytes = STAGES * kStageBytes;
  constexpr int kParamRingBytes = CONSUMERS * STAGES * kParamSlotBytes<ROWS>;
  std::uint64_t* full = reinterpret_cast<std::uint64_t*>(smem + kRingBytes + kParamRingBytes);
  std::uint64_t* empty = full + STAGES;
  const int chunks = a.k / 32, rounds = (chunks + 31) / 32, groups = a.k / kGroup;
  uint4* digits = reinterpret_cast<uint4*>(empty + STAGES);
  float4* facts = reinterpret_cast<float4*>(digits + (lifted_values(a.k) / 32) * 6);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int block_tasks = (a.n + kBlockRows - 1) / kBlockRows;
  const int my_tasks = blockIdx.x < block_tasks ? (block_tasks - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  const int steps = my_tasks * rounds;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) bar_init(&full[s], 1), bar_init(&empty[s], CONSUMERS * 32);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  int p_step = 0, p_task = blockIdx.x, p_round = 0, p_slot = 0;
  unsigned p_phase = 0;
  auto produce = [&]() {
    bar_wait(&empty[p_slot], p_phase ^ 1);
    bar_expect(&full[p_slot], kStageBytes);
    tma_load_2d(smem + p_slot * kStageBytes, &weights, p_round * (kRoundBytes / 4), p_task * kBlockRows, &full[p_slot]);
    ++p_step;
    if (++p_round == rounds) p_round = 0, p_task += gridDim.x;
    if (++p_slot == STAGES) p_slot = 0, p_phase ^= 1;
  };
  if (warp == CONSUMERS && lane == 0)
    while (p_step < steps && p_step < STAGES) produce();
  stage_digits_fast(reinterpret_cast<unsigned char*>(digits), facts, static_cast<const std::uint16_t*>(a.x), a.k);
  __syncthreads();
  if (warp == CONSUMERS) {
    if (lane == 0)
      while (p_step < steps) produce();
    return;
  }

  ParamRing<ROWS, STAGES> params(smem + kRingBytes + warp * STAGES * kParamSlotBytes<ROWS>, a, warp * ROWS, lane, groups,
                                 rounds, steps, kBlockRows);

  const unsigned selector = (lane / 2) % 2 ? 0x3244u : 0x1044u;  // bf16 half of the pair word, widened
  float total[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) total[r] = 0.0f;
  int task = blockIdx.x, round = 0;
  unsigned phase = 0;
  for (int j0 = 0; j0 < steps; j0 += STAGES, phase ^= 1) {
#pragma unroll
    for (int slot = 0; slot < STAGES; ++slot) {
      if (j0 + slot >= steps) break;
      __syncwarp();
      params.issue();
      wait_async_copies<STAGES - 1>();
      __syncwarp();
      bar_wait(&full[slot], phase);
      std::uint32_t w[ROWS][kBits];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        const uint4 v = *reinterpret_cast<const uint4*>(smem + slot * kStageBytes + (warp * ROWS + r) * kRoundBytes + lane * 16);
        w[r][0] = v.x, w[r][1] = v.y, w[r][2] = v.z, w[r][3] = v.w;
      }
      uint2 pairs[ROWS];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) pairs[r] = params.pair(slot, r, lane);
      bar_arrive(&empty[slot]);  // every lane: its own reads are done (a lane-0 arrive after __syncwarp raced)
      const int c = lane + 32 * round;
      if (c < chunks) int_rows_step<ROWS>(w, pairs, selector, digits, facts, c, total);
      if (++round == rounds) {
        round = 0;
        finish_task<ROWS>(total, task * kBlockRows + warp * ROWS, lane, a);
        task += gridDim.x;
      }
    }
  }
  wait_async_copies<0>();
}


// ---- the integer contract with x prepared once (session 11, third cut) ----
// ncu on qmv_int_kernel: the consumers wait at the full barrier (long scoreboard on the
// try_wait branches, 22 % of samples) and the per-block staging of x is latency-bound. So x's
// digits are prepared once per launch by a small kernel, laid out round by round exactly as a
// stage wants them, and ride the ring with the weights (one bulk copy of 3.5 KB per stage): no
// staging, and shared memory no longer grows with K, which leaves room for deeper rings.
constexpr int kRoundDigitBytes = 6 * 32 * 16 + 32 * 16;  // 6 digit uint4 and a facts float4 per lane

// A warp per chunk: lane i takes value i. Writes round c/32, lane c%32 of the digit buffer.
__global__ void prep_digits_kernel(const std::uint16_t* x, int k, unsigned char* out) {
  const int lane = threadIdx.x % 32;
  const int c = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (c >= k / 32) return;
  const float v = bf16_to_f32(x[c * 32 + lane]);
  const int e = int_exponent(__reduce_max_sync(0xffffffffu, bits_from_float(v) & 0x7fffffffu));
  const int big = to_int_rn(int_scaled(v, e));
  const int d0 = int(std::int8_t(big & 0xff));
  const int d1 = int(std::int8_t(((big - d0) >> 8) & 0xff));
  const int d2 = (big - d0 - 256 * d1) >> 16;
  const int digits[3] = {d0, d1, d2};
  const int j = lane / 8, h = lane % 2, b = (lane % 8) / 2;
  unsigned char* round = out + std::size_t(c / 32) * kRoundDigitBytes;
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    const int p = digit_word(j, h, d);
    round[((p / 4) * 32 + c % 32) * 16 + (p % 4) * 4 + b] = std::uint8_t(digits[d] & 0xff);
  }
  float sum = 0.0f;  // S in order: lane 0 walks the values
  for (int i = 0; i < 32; ++i) {
    const float xi = __shfl_sync(0xffffffffu, v, i);
    sum = order::sum_step(sum, xi);
  }
  if (lane == 0)
    reinterpret_cast<float4*>(round + 6 * 32 * 16)[c % 32] = make_float4(sum, int_unscale(e), 0.0f, 0.0f);
}

__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, std::uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}

template <int STAGES, int CONSUMERS, int ROWS>
constexpr std::size_t ring_shared_bytes() {
  return std::size_t(STAGES) * (CONSUMERS * ROWS * kRoundBytes + kRoundDigitBytes) +
         std::size_t(CONSUMERS) * STAGES * kParamSlotBytes<ROWS> + 16 * 2 * STAGES;
}

template <int STAGES, int CONSUMERS, int ROWS>
__global__ void __launch_bounds__((CONSUMERS + 1) * 32, CONSUMERS * ROWS <= 16 ? 3 : (CONSUMERS * ROWS <= 32 ? 2 : 1))
    qmv_ring_kernel(const __grid_constant__ CUtensorMap weights, const TmaArgs a, const unsigned char* prepared) {
  extern __shared__ __align__(1024) unsigned char smem[];
  constexpr int kBlockRows = CONSUMERS * ROWS;
  constexpr unsigned kWeightBytes = kBlockRows * kRoundBytes;
  constexpr unsigned kStageBytes = kWeightBytes + kRoundDigitBytes;
  constexpr int kRingBytes = STAGES * kStageBytes;
  constexpr int kParamRingBytes = CONSUMERS * STAGES * kParamSlotBytes<ROWS>;
  std::uint64_t* full = reinterpret_cast<std::uint64_t*>(smem + kRingBytes + kParamRingBytes);
  std::uint64_t* empty = full + STAGES;
  const int chunks = a.k / 32, rounds = (chunks + 31) / 32, groups = a.k / kGroup;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int block_tasks = (a.n + kBlockRows - 1) / kBlockRows;
  const int my_tasks = blockIdx.x < block_tasks ? (block_tasks - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  const int steps = my_tasks * rounds;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) bar_init(&full[s], 1), bar_init(&empty[s], CONSUMERS * 32);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == CONSUMERS) {
    if (lane == 0) {
      int p_task = blockIdx.x, p_round = 0, p_slot = 0;
      unsigned p_phase = 0;
      for (int p_step = 0; p_step < steps; ++p_step) {
        bar_wait(&empty[p_slot], p_phase ^ 1);
        bar_expect(&full[p_slot], kStageBytes);
        unsigned char* stage = smem + p_slot * kStageBytes;
        tma_load_2d(stage, &weights, p_round * (kRoundBytes / 4), p_task * kBlockRows, &full[p_slot]);
        bulk_load(stage + kWeightBytes, prepared + std::size_t(p_round) * kRoundDigitBytes, kRoundDigitBytes, &full[p_slot]);
        if (++p_round == rounds) p_round = 0, p_task += gridDim.x;
        if (++p_slot == STAGES) p_slot = 0, p_phase ^= 1;
      }
    }
    return;
  }

  ParamRing<ROWS, STAGES> params(smem + kRingBytes + warp * STAGES * kParamSlotBytes<ROWS>, a, warp * ROWS, lane, groups,
                                 rounds, steps, kBlockRows);

  const unsigned selector = (lane / 2) % 2 ? 0x3244u : 0x1044u;
  float total[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) total[r] = 0.0f;
  int task = blockIdx.x, round = 0;
  unsigned phase = 0;
  for (int j0 = 0; j0 < steps; j0 += STAGES, phase ^= 1) {
#pragma unroll
    for (int slot = 0; slot < STAGES; ++slot) {
      if (j0 + slot >= steps) break;
      __syncwarp();
      params.issue();
      wait_async_copies<STAGES - 1>();
      __syncwarp();
      bar_wait(&full[slot], phase);
      const unsigned char* stage = smem + slot * kStageBytes;
      std::uint32_t w[ROWS][kBits];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        const uint4 v = *reinterpret_cast<const uint4*>(stage + (warp * ROWS + r) * kRoundBytes + lane * 16);
        w[r][0] = v.x, w[r][1] = v.y, w[r][2] = v.z, w[r][3] = v.w;
      }
      uint2 pairs[ROWS];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) pairs[r] = params.pair(slot, r, lane);
      const uint4* digits = reinterpret_cast<const uint4*>(stage + kWeightBytes);
      unsigned dw[24];
#pragma unroll
      for (int q = 0; q < 6; ++q) {
        const uint4 v = digits[q * 32 + lane];
        dw[4 * q] = v.x, dw[4 * q + 1] = v.y, dw[4 * q + 2] = v.z, dw[4 * q + 3] = v.w;
      }
      const float4 f = reinterpret_cast<const float4*>(digits + 6 * 32)[lane];
      bar_arrive(&empty[slot]);  // every lane: its own reads are done (a lane-0 arrive after __syncwarp raced)
      const int c = lane + 32 * round;
      if (c < chunks) int_rows_compute<ROWS>(w, pairs, selector, dw, f, total);
      if (++round == rounds) {
        round = 0;
        finish_task<ROWS>(total, task * kBlockRows + warp * ROWS, lane, a);
        task += gridDim.x;
      }
    }
  }
  wait_async_copies<0>();
}

// The streaming read with the same overlap allowance (the next launch starts as blocks finish).
__global__ void overlapped_stream_kernel(const uint4* data, std::size_t count, unsigned* sink) {
  let_next_grid_start();
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldcs(data + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < count; i += stride) {
    const uint4 v = __ldcs(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  wait_for_previous_grid();
  if (acc == 0x9e3779b9u) *sink = acc;
}
float overlapped_read_us(const std::vector<std::uint8_t*>& buffers, std::size_t bytes, unsigned* sink) {
  int per_sm = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, overlapped_stream_kernel, 512, 0));
  const int grid = per_sm * prototype_sm_count();
  return median_launch_us(
      [&](int i) {
        launch_overlapping(overlapped_stream_kernel, dim3(grid), 512, 0, true, cudaStream_t(0),
                           reinterpret_cast<const uint4*>(buffers[i]), bytes / 16, sink);
      },
      int(buffers.size()));
}


// ---- the integer contract in the library kernel's own structure (no ring) ----
// qmv_family_kernel at V = 1 and 4 rows, line for line, with the f32 chain's chunk step replaced
// by int_chunk_step and x staged as digits: the register double buffer, 8 warps, 2 blocks per SM.
__global__ void __launch_bounds__(kThreads, 2) qmv_register_int_kernel(const QmvParams p) {
  extern __shared__ uint4 register_int_shared[];
  uint4* digits = register_int_shared;
  const int tile = lifted_values(int(p.k));
  float4* facts = reinterpret_cast<float4*>(digits + (tile / 32) * 6);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t row_bytes = p.k / 2, groups = p.k / kGroup;
  const std::int64_t tasks = (p.n + kRows - 1) / kRows;
  const std::int64_t warps_total = std::int64_t(gridDim.x) * kWarps;
  const std::int64_t trips = (tasks + warps_total - 1) / warps_total;
  const std::int64_t my_first_task = std::int64_t(warp) * gridDim.x + blockIdx.x;
  const int chunks = int(p.k / 32);
  let_next_grid_start();
  for (std::int64_t trip = 0; trip < trips; ++trip) {
    const std::int64_t task = my_first_task + trip * warps_total;
    const bool active = task < tasks;
    const std::int64_t row0 = task * kRows;
    const std::uint8_t* wrow[kRows];
    int prow[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const std::int64_t row = row0 + r < p.n ? row0 + r : p.n - 1;
      wrow[r] = p.packed + row * row_bytes;
      prow[r] = int(row * groups);
      asm("" : "+l"(wrow[r]), "+r"(prow[r]));
    }
    float total[kRows][1];
#pragma unroll
    for (int r = 0; r < kRows; ++r) total[r][0] = 0.0f;
    std::uint32_t wa[kRows][kBits], wb[kRows][kBits];
    std::uint32_t sa[kRows], ba[kRows], sb[kRows], bb[kRows];
    auto load = [&](int c, std::uint32_t (&w)[kRows][kBits], std::uint32_t (&sc)[kRows], std::uint32_t (&bi)[kRows]) {
      const int g = c >> 1;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        load_chunk<kBits>(wrow[r] + std::int64_t(c) * 16, w[r]);
        sc[r] = static_cast<const unsigned short*>(p.scales)[prow[r] + g];
        bi[r] = static_cast<const unsigned short*>(p.biases)[prow[r] + g];
      }
    };
    int c = active ? lane : chunks;
    if (c < chunks) load(c, wa, sa, ba);
    if (trip == 0) {
      wait_for_previous_grid();
      __syncthreads();
      stage_digits(digits, facts, static_cast<const std::uint16_t*>(p.x), int(p.k));
      __syncthreads();
    }
    auto step = [&](const std::uint32_t (&w)[kRows][kBits], const std::uint32_t (&s)[kRows],
                    const std::uint32_t (&b)[kRows], int c) {
      float sc[kRows], bi[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) sc[r] = __uint_as_float(s[r] << 16), bi[r] = __uint_as_float(b[r] << 16);
      int_chunk_step<kRows>(w, sc, bi, digits, facts, c, total);
    };
    while (c < chunks) {
      if (c + 32 < chunks) load(c + 32, wb, sb, bb);
      step(wa, sa, ba, c);
      c += 32;
      if (c >= chunks) break;
      if (c + 32 < chunks) load(c + 32, wa, sa, ba);
      step(wb, sb, bb, c);
      c += 32;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float t = total[r][0];
#pragma unroll
      for (int step = 0; step < order::kButterflySteps; ++step)
        t = order::butterfly_step(t, __shfl_xor_sync(0xffffffffu, t, order::butterfly_mask(step)));
      if (active && lane == 0 && row0 + r < p.n) store_f32(p.y, std::size_t(row0 + r), DType::bf16, t);
    }
  }
}


// ---- what the per-block staging of x costs by itself (session 11, call 12) ----
// The library kernel's first trip: wait for the previous grid, stage the K tile (stage_lifted,
// or the integer contract's stage_digits), synchronise; nothing else. Launched with the library
// kernel's grid and shared memory, its time is what a launch spends before its first chunk.
// DIGITS = 2: nothing staged at all (the launch and the wait alone, the baseline).
template <int DIGITS>
__global__ void __launch_bounds__(kThreads, 2) stage_only_kernel(const QmvParams p) {
  extern __shared__ float4 stage_only_shared[];
  float4* lifted = stage_only_shared;
  let_next_grid_start();
  wait_for_previous_grid();
  __syncthreads();
  if constexpr (DIGITS == 2) {
    if (threadIdx.x == 0) lifted[1].x = 0.0f;
  } else if constexpr (DIGITS == 1) {
    const int tile = lifted_values(int(p.k));
    stage_digits(reinterpret_cast<uint4*>(lifted), reinterpret_cast<float4*>(reinterpret_cast<uint4*>(lifted) + (tile / 32) * 6),
                 static_cast<const std::uint16_t*>(p.x), int(p.k));
  } else {
    stage_lifted<kBits, 1>(lifted, lifted + p.tile_values / 4, p.tile_values, p, 0, 0,
                           int(p.k < p.tile_values ? p.k : p.tile_values));
  }
  __syncthreads();
  if (threadIdx.x == 0 && lifted[1].x == 1.2345f) store_f32(p.y, 0, DType::bf16, 0.0f);  // keeps the staging alive
}

// ---- host ----
static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    PROTOTYPE_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    if (!f || q != cudaDriverEntryPointSuccess) std::printf("no cuTensorMapEncodeTiled\n"), std::exit(1);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// The packed weights as a 2D tensor of 32-bit words, [n][k/8], boxes of one round x block rows.
static CUtensorMap weight_map(const std::uint8_t* packed, int n, int k, int block_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(k / 8), cuuint64_t(n)};
  const cuuint64_t strides[1] = {cuuint64_t(k / 2)};
  const cuuint32_t box[2] = {kRoundBytes / 4, cuuint32_t(block_rows)};
  const cuuint32_t estrides[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, const_cast<std::uint8_t*>(packed), dims,
                                    strides, box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) std::printf("cuTensorMapEncodeTiled failed: %d\n", int(r)), std::exit(1);
  return map;
}

struct Copy {
  std::uint8_t* packed;
  std::uint16_t* scales;
  std::uint16_t* biases;
};

struct Shape {
  int n, k;
};

template <int STAGES, int CONSUMERS, int MODE, int ROWS = 4>
float time_tma(const std::vector<Copy>& copies, Shape s, const void* x, void* y, unsigned* sink, bool once = false,
               bool overlap = false) {
  auto kernel = qmv_tma_kernel<STAGES, CONSUMERS, MODE, ROWS>;
  const std::size_t smem = tma_shared_bytes<STAGES, CONSUMERS, ROWS>(s.k);
  PROTOTYPE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int per_sm = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, (CONSUMERS + 1) * 32, smem));
  if (per_sm < 1) return -1.0f;
  const int block_rows = CONSUMERS * ROWS;
  const int block_tasks = (s.n + block_rows - 1) / block_rows;
  const int grid = std::min(block_tasks, per_sm * prototype_sm_count());
  std::vector<CUtensorMap> maps;
  for (const Copy& c : copies) maps.push_back(weight_map(c.packed, s.n, s.k, block_rows));
  auto launch = [&](int i) {
    TmaArgs a{copies[i].scales, copies[i].biases, x, y, s.n, s.k, sink};
    launch_overlapping(kernel, dim3(grid), (CONSUMERS + 1) * 32, smem, overlap, cudaStream_t(0), maps[i], a);
  };
  if (once) {
    launch(0);
    PROTOTYPE_CHECK(cudaGetLastError());
    PROTOTYPE_CHECK(cudaDeviceSynchronize());
    return 0.0f;
  }
  return median_launch_us(launch, int(copies.size()));
}

template <int STAGES, int CONSUMERS, int ROWS>
float time_int(const std::vector<Copy>& copies, Shape s, const void* x, void* y, unsigned* sink, bool once = false) {
  auto kernel = qmv_int_kernel<STAGES, CONSUMERS, ROWS>;
  const std::size_t smem = int_shared_bytes<STAGES, CONSUMERS, ROWS>(s.k);
  if (smem > 227 * 1024) return -1.0f;
  PROTOTYPE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int per_sm = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, (CONSUMERS + 1) * 32, smem));
  if (per_sm < 1) return -1.0f;
  const int block_rows = CONSUMERS * ROWS;
  const int block_tasks = (s.n + block_rows - 1) / block_rows;
  const int grid = std::min(block_tasks, per_sm * prototype_sm_count());
  std::vector<CUtensorMap> maps;
  for (const Copy& c : copies) maps.push_back(weight_map(c.packed, s.n, s.k, block_rows));
  auto launch = [&](int i) {
    TmaArgs a{copies[i].scales, copies[i].biases, x, y, s.n, s.k, sink};
    kernel<<<grid, (CONSUMERS + 1) * 32, smem>>>(maps[i], a);
  };
  if (once) {
    launch(0);
    PROTOTYPE_CHECK(cudaGetLastError());
    PROTOTYPE_CHECK(cudaDeviceSynchronize());
    return 0.0f;
  }
  return median_launch_us(launch, int(copies.size()));
}

// prepared: a buffer of rounds * kRoundDigitBytes (zeroed once); with `with_prep`, each launch is
// the prep kernel and the main kernel, as a library call would be.
template <int STAGES, int CONSUMERS, int ROWS>
float time_ring(const std::vector<Copy>& copies, Shape s, const void* x, void* y, unsigned* sink, unsigned char* prepared,
                bool with_prep, bool once = false) {
  auto kernel = qmv_ring_kernel<STAGES, CONSUMERS, ROWS>;
  constexpr std::size_t smem = ring_shared_bytes<STAGES, CONSUMERS, ROWS>();
  if (smem > 227 * 1024) return -1.0f;
  PROTOTYPE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int per_sm = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, (CONSUMERS + 1) * 32, smem));
  if (per_sm < 1) return -1.0f;
  const int block_rows = CONSUMERS * ROWS;
  const int block_tasks = (s.n + block_rows - 1) / block_rows;
  const int grid = std::min(block_tasks, per_sm * prototype_sm_count());
  std::vector<CUtensorMap> maps;
  for (const Copy& c : copies) maps.push_back(weight_map(c.packed, s.n, s.k, block_rows));
  const int chunks = s.k / 32;
  auto launch = [&](int i) {
    if (with_prep || once)
      prep_digits_kernel<<<(chunks + 7) / 8, 256>>>(static_cast<const std::uint16_t*>(x), s.k, prepared);
    TmaArgs a{copies[i].scales, copies[i].biases, x, y, s.n, s.k, sink};
    kernel<<<grid, (CONSUMERS + 1) * 32, smem>>>(maps[i], a, prepared);
  };
  if (once) {
    launch(0);
    PROTOTYPE_CHECK(cudaGetLastError());
    PROTOTYPE_CHECK(cudaDeviceSynchronize());
    return 0.0f;
  }
  return median_launch_us(launch, int(copies.size()));
}

float time_register_int(const std::vector<Copy>& copies, Shape s, const void* x, void* y, bool once = false,
                        bool overlap = false) {
  const std::size_t smem = std::size_t(lifted_values(s.k) / 32) * (96 + 16);
  PROTOTYPE_CHECK(cudaFuncSetAttribute(qmv_register_int_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
  int per_sm = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, qmv_register_int_kernel, kThreads, smem));
  const std::int64_t tasks = (s.n + kRows - 1) / kRows;
  const std::int64_t resident = std::int64_t(per_sm) * prototype_sm_count();
  const unsigned grid = unsigned(tasks < resident ? tasks : resident);
  auto launch = [&](int i) {
    QmvParams p{copies[i].packed, copies[i].scales, copies[i].biases, x, y, s.n, s.k, 0, kGroup, 0, DType::bf16, 1};
    launch_overlapping(qmv_register_int_kernel, dim3(grid, 1), kThreads, smem, overlap, cudaStream_t(0), p);
  };
  if (once) {
    launch(0);
    PROTOTYPE_CHECK(cudaGetLastError());
    PROTOTYPE_CHECK(cudaDeviceSynchronize());
    return 0.0f;
  }
  return median_launch_us(launch, int(copies.size()));
}

template <int DIGITS>
float time_stage_only(Shape s, const void* x, void* y, bool overlap) {
  const int tile = family_tile(s.k, 1);
  const std::size_t smem = DIGITS == 1 ? std::size_t(lifted_values(s.k) / 32) * (96 + 16) : family_shared_bytes(1, tile);
  PROTOTYPE_CHECK(cudaFuncSetAttribute(stage_only_kernel<DIGITS>, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
  // The library kernel's grid (its occupancy: 2 blocks of 8 warps per SM at these sizes).
  const std::int64_t tasks = (s.n + kRows - 1) / kRows;
  const std::int64_t resident = 2LL * prototype_sm_count();
  const unsigned grid = unsigned(tasks < resident ? tasks : resident);
  return median_launch_us(
      [&](int) {
        QmvParams p{nullptr, nullptr, nullptr, x, y, s.n, s.k, 0, kGroup, tile, DType::bf16, 1};
        launch_overlapping(stage_only_kernel<DIGITS>, dim3(grid, 1), kThreads, smem, overlap, cudaStream_t(0), p);
      },
      4);
}

// The library's qmv kernel, launched as family_launch.cuh does for these shapes (no K split).
float time_library(const std::vector<Copy>& copies, Shape s, const void* x, void* y, bool once = false,
                   bool overlap = false) {
  auto kernel = qmv_family_kernel<kBits, 1, kRows, int(DType::bf16)>;
  const int tile = family_tile(s.k, 1);
  const std::size_t smem = family_shared_bytes(1, tile);
  const int per_sm = resident_blocks<qmv_family_kernel<kBits, 1, kRows, int(DType::bf16)>>(kThreads, smem, 100 * 1024);
  const std::int64_t tasks = (s.n + kRows - 1) / kRows;
  const std::int64_t resident = std::int64_t(per_sm) * prototype_sm_count();
  const unsigned grid = unsigned(tasks < resident ? tasks : resident);
  auto launch = [&](int i) {
    QmvParams p{copies[i].packed, copies[i].scales, copies[i].biases, x, y, s.n, s.k, 0, kGroup, tile, DType::bf16, 1};
    launch_overlapping(kernel, dim3(grid, 1), kThreads, smem, overlap, cudaStream_t(0), p);
  };
  if (once) {
    launch(0);
    PROTOTYPE_CHECK(cudaGetLastError());
    PROTOTYPE_CHECK(cudaDeviceSynchronize());
    return 0.0f;
  }
  return median_launch_us(launch, int(copies.size()));
}

static std::uint16_t bf16_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return std::uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The candidate contract on the host, literally: per sampled row, the lane chains over chunks.
static std::vector<std::uint16_t> int_reference(const std::vector<std::uint8_t>& w, const std::vector<std::uint16_t>& sc,
                                                const std::vector<std::uint16_t>& bi, const std::vector<std::uint16_t>& xb,
                                                int k, const std::vector<int>& rows, bool one_multiply) {
  const int chunks = k / 32, groups = k / kGroup;
  std::vector<float> x(k);
  for (int i = 0; i < k; ++i) x[i] = bf16_to_f32(xb[i]);
  std::vector<long long> big(k);
  std::vector<float> sum(chunks), first(chunks), second(chunks);
  for (int c = 0; c < chunks; ++c) {
    const int e = order::exact_exponent(order::chunk_max_abs_bits(&x[32 * c]));
    for (int i = 0; i < 32; ++i) big[32 * c + i] = order::exact_integer(x[32 * c + i], e);
    sum[c] = order::chunk_x_sum(&x[32 * c]), first[c] = int_unscale_first(e), second[c] = int_unscale_second(e);
  }
  std::vector<std::uint16_t> out;
  for (const int row : rows) {
    float lanes[32] = {};
    for (int c = 0; c < chunks; ++c) {
      long long dot = 0;
      for (int i = 0; i < 32; ++i) {
        const int code = (w[std::size_t(row) * (k / 2) + (32 * c + i) / 2] >> (4 * (i % 2))) & 15;
        dot += code * big[32 * c + i];
      }
      const float a = one_multiply ? order::exact_chunk_value(dot, order::exact_exponent(order::chunk_max_abs_bits(&x[32 * c])))
                                   : order::mul(order::mul(float(dot), first[c]), second[c]);
      const int g = c / (kGroup / 32);
      lanes[c % 32] = order::lane_add(lanes[c % 32], order::chunk_fold(bf16_to_f32(sc[std::size_t(row) * groups + g]),
                                                                     bf16_to_f32(bi[std::size_t(row) * groups + g]), a,
                                                                     sum[c]));
    }
    out.push_back(f32_to_bf16(order::butterfly(lanes)));
  }
  return out;
}

int main(int argc, char** argv) {
  // --only VARIANT N K: launch one variant three times and nothing else (for ncu).
  const std::string only = argc > 3 && std::string(argv[1]) == "--only" ? argv[2] : "";
  const int first_shape_arg = only.empty() ? 1 : 3;
  std::vector<Shape> shapes;
  for (int i = first_shape_arg; i + 1 < argc; i += 2) shapes.push_back({std::atoi(argv[i]), std::atoi(argv[i + 1])});
  if (shapes.empty())
    shapes = {{28672, 8192}, {262144, 3840}, {128256, 4096}, {17408, 5120}, {15360, 3840}, {14336, 4096}, {3840, 15360}};
  unsigned* sink;
  PROTOTYPE_CHECK(cudaMalloc(&sink, 4));
  // The ceiling: a streaming read of 1 GB, 4 loads in flight per thread, as read_ceiling.cu.
  std::vector<std::uint8_t*> big(2);
  const std::size_t big_bytes = std::size_t(1) << 30;
  for (auto& b : big) {
    PROTOTYPE_CHECK(cudaMalloc(&b, big_bytes));
    PROTOTYPE_CHECK(cudaMemset(b, 1, big_bytes));
  }
  const float ceiling_us = stream_read_us<4>(big, big_bytes, sink);
  const double ceiling = double(big_bytes) / ceiling_us * 1e-3;  // GB/s
  std::printf("ceiling: streaming read of 1 GB %.1f us = %.0f GB/s\n", ceiling_us, ceiling);
  for (auto& b : big) cudaFree(b);

  std::mt19937 rng(std::random_device{}());
  for (const Shape s : shapes) {
    const std::size_t wbytes = std::size_t(s.n) * s.k / 2, pcount = std::size_t(s.n) * (s.k / kGroup);
    const std::size_t bytes = wbytes + 4 * pcount + 2 * std::size_t(s.k) + 2 * std::size_t(s.n);
    const int ncopies = int(std::max<std::size_t>(2, (std::size_t(200) << 20) / bytes + 1));
    std::vector<std::uint8_t> hw(wbytes);
    std::vector<std::uint16_t> hs(pcount), hb(pcount), hx(s.k);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = 0; i < wbytes; i += 8) {
      const std::uint64_t r = (std::uint64_t(rng()) << 32) | rng();
      std::memcpy(hw.data() + i, &r, std::min<std::size_t>(8, wbytes - i));
    }
    for (auto& v : hs) v = bf16_bits(0.01f * (1.0f + 0.2f * normal(rng)));
    for (auto& v : hb) v = bf16_bits(-0.08f * (1.0f + 0.2f * normal(rng)));
    for (auto& v : hx) v = bf16_bits(normal(rng));
    std::vector<Copy> copies(ncopies);
    for (Copy& c : copies) {
      PROTOTYPE_CHECK(cudaMalloc(&c.packed, wbytes));
      PROTOTYPE_CHECK(cudaMalloc(&c.scales, 2 * pcount));
      PROTOTYPE_CHECK(cudaMalloc(&c.biases, 2 * pcount));
      PROTOTYPE_CHECK(cudaMemcpy(c.packed, hw.data(), wbytes, cudaMemcpyHostToDevice));
      PROTOTYPE_CHECK(cudaMemcpy(c.scales, hs.data(), 2 * pcount, cudaMemcpyHostToDevice));
      PROTOTYPE_CHECK(cudaMemcpy(c.biases, hb.data(), 2 * pcount, cudaMemcpyHostToDevice));
    }
    void *x, *y_lib, *y_tma;
    PROTOTYPE_CHECK(cudaMalloc(&x, 2 * s.k));
    PROTOTYPE_CHECK(cudaMalloc(&y_lib, 2 * s.n));
    PROTOTYPE_CHECK(cudaMalloc(&y_tma, 2 * s.n));
    PROTOTYPE_CHECK(cudaMemcpy(x, hx.data(), 2 * s.k, cudaMemcpyHostToDevice));
    std::vector<std::uint16_t> a(s.n), b(s.n);
    unsigned char* prepared;
    const std::size_t prepared_bytes = std::size_t((s.k / 32 + 31) / 32) * kRoundDigitBytes;
    PROTOTYPE_CHECK(cudaMalloc(&prepared, prepared_bytes));
    PROTOTYPE_CHECK(cudaMemset(prepared, 0, prepared_bytes));

    if (!only.empty()) {
      for (int i = 0; i < 3; ++i) {
        if (only == "library") time_library(copies, s, x, y_lib, true);
        if (only == "int4x16") time_tma<4, 16, kIntegerDot>(copies, s, x, y_tma, sink, true);
        if (only == "tuned4x16") time_int<4, 16, 4>(copies, s, x, y_tma, sink, true);
        if (only == "ring5x16") time_ring<5, 16, 4>(copies, s, x, y_tma, sink, prepared, true, true);
        if (only == "ring6x8") time_ring<6, 8, 4>(copies, s, x, y_tma, sink, prepared, true, true);
        if (only == "tuned3x12r8") time_int<3, 12, 8>(copies, s, x, y_tma, sink, true);
        if (only == "loads4x16") time_tma<4, 16, kLoadsOnly>(copies, s, x, y_tma, sink, true);
      }
      std::printf("ran %s three times on %d x %d\n", only.c_str(), s.n, s.k);
      continue;
    }
    std::printf("\n%d x %d (4-bit g64 bf16, %.1f MB, %d copies)\n", s.n, s.k, bytes / 1e6, ncopies);
    auto report = [&](const char* name, float us) {
      if (us < 0) return std::printf("  %-34s does not fit\n", name), void();
      std::printf("  %-34s %8.1f us  %6.0f GB/s  %5.1f %%\n", name, us, bytes / us * 1e-3,
                  100.0 * bytes / us * 1e-3 / ceiling);
    };
    time_library(copies, s, x, y_lib, true);
    PROTOTYPE_CHECK(cudaMemcpy(a.data(), y_lib, 2 * s.n, cudaMemcpyDeviceToHost));
    auto check = [&](const char* name) {
      PROTOTYPE_CHECK(cudaMemcpy(b.data(), y_tma, 2 * s.n, cudaMemcpyDeviceToHost));
      int differ = 0;
      for (int i = 0; i < s.n; ++i) differ += a[i] != b[i];
      std::printf("  %-34s %s (%d of %d outputs differ)\n", name, differ ? "DIFFERS" : "identical bytes", differ, s.n);
    };
    PROTOTYPE_CHECK(cudaMemset(y_tma, 0xff, 2 * s.n));
    time_tma<4, 8, kFloatChain>(copies, s, x, y_tma, sink, true);
    check("tma f32 chain 4 st x 8 w vs library");
    // The integer contract against a host reference on every 37th row and the last one.
    std::vector<int> sample;
    for (int row = 0; row < s.n; row += 37) sample.push_back(row);
    sample.push_back(s.n - 1);
    const std::vector<std::uint16_t> expect2 = int_reference(hw, hs, hb, hx, s.k, sample, false);
    const std::vector<std::uint16_t> expect1 = int_reference(hw, hs, hb, hx, s.k, sample, true);
    auto check_int = [&](const char* name, bool one_multiply = false) {
      const std::vector<std::uint16_t>& expect = one_multiply ? expect1 : expect2;
      PROTOTYPE_CHECK(cudaMemcpy(b.data(), y_tma, 2 * s.n, cudaMemcpyDeviceToHost));
      int differ = 0, differ_lib = 0;
      for (std::size_t i = 0; i < sample.size(); ++i) differ += b[sample[i]] != expect[i];
      for (int i = 0; i < s.n; ++i) differ_lib += a[i] != b[i];
      std::printf("  %-34s %s (%d of %zu sampled rows differ from the host reference; %d of %d differ from the "
                  "f32 chain)\n",
                  name, differ ? "DIFFERS" : "identical bytes", differ, sample.size(), differ_lib, s.n);
    };
    PROTOTYPE_CHECK(cudaMemset(y_tma, 0xff, 2 * s.n));
    PROTOTYPE_CHECK(cudaMemset(y_tma, 0xff, 2 * s.n));
    time_tma<4, 16, kIntegerDot>(copies, s, x, y_tma, sink, true);
    check_int("tma integer 4 st x 16 w");
    PROTOTYPE_CHECK(cudaMemset(y_tma, 0xff, 2 * s.n));
    time_int<4, 16, 4>(copies, s, x, y_tma, sink, true);
    check_int("tuned integer 4 st x 16 w", true);
    PROTOTYPE_CHECK(cudaMemset(y_tma, 0xff, 2 * s.n));
    time_register_int(copies, s, x, y_tma, true);
    check_int("register integer (library structure)");
    PROTOTYPE_CHECK(cudaMemset(y_tma, 0xff, 2 * s.n));
    time_ring<5, 16, 4>(copies, s, x, y_tma, sink, prepared, true, true);
    check_int("ring 5 st x 16 w", true);
    PROTOTYPE_CHECK(cudaMemset(y_tma, 0xff, 2 * s.n));
    time_ring<3, 12, 8>(copies, s, x, y_tma, sink, prepared, true, true);
    check_int("ring 8 rows 3 st x 12 w", true);

    std::vector<std::uint8_t*> packed_copies;
    for (const Copy& c : copies) packed_copies.push_back(c.packed);
    report("streaming read, same bytes", stream_read_us<4>(packed_copies,
                                                          wbytes, sink) * float(bytes) / float(wbytes));
    report("library qmv", time_library(copies, s, x, y_lib));
    report("overlapped: streaming read (weights)", overlapped_read_us(packed_copies, wbytes, sink) * float(bytes) / float(wbytes));
    report("overlapped: library qmv", time_library(copies, s, x, y_lib, false, true));
    report("empty launch, library grid, plain", time_stage_only<2>(s, x, y_tma, false));
    report("empty launch, library grid, overlapped", time_stage_only<2>(s, x, y_tma, true));
    report("x staging alone (f32 chain), plain", time_stage_only<0>(s, x, y_tma, false));
    report("x staging alone (f32 chain), overlapped", time_stage_only<0>(s, x, y_tma, true));
    report("x staging alone (digits), overlapped", time_stage_only<1>(s, x, y_tma, true));
    report("register integer (library structure)", time_register_int(copies, s, x, y_tma));
    report("overlapped: register integer", time_register_int(copies, s, x, y_tma, false, true));
    report("overlapped: tma loads only 4 st x 16 w", time_tma<4, 16, kLoadsOnly>(copies, s, x, y_tma, sink, false, true));
    report("overlapped: tma integer 4 st x 16 w", time_tma<4, 16, kIntegerDot>(copies, s, x, y_tma, sink, false, true));
    report("overlapped: tma integer 4 st x 8 w", time_tma<4, 8, kIntegerDot>(copies, s, x, y_tma, sink, false, true));
    report("overlapped: tma integer 3 st x 8 w", time_tma<3, 8, kIntegerDot>(copies, s, x, y_tma, sink, false, true));
    report("tma loads only, 4 st x 16 w", time_tma<4, 16, kLoadsOnly>(copies, s, x, y_tma, sink));
    report("tma integer (untuned), 4 st x 16 w", time_tma<4, 16, kIntegerDot>(copies, s, x, y_tma, sink));
    report("ring 5 st x 16 w, with prep", time_ring<5, 16, 4>(copies, s, x, y_tma, sink, prepared, true));
    report("ring 5 st x 16 w, main kernel only", time_ring<5, 16, 4>(copies, s, x, y_tma, sink, prepared, false));
    report("ring 4 st x 8 w (2 blocks), with prep", time_ring<4, 8, 4>(copies, s, x, y_tma, sink, prepared, true));
    for (Copy& c : copies) cudaFree(c.packed), cudaFree(c.scales), cudaFree(c.biases);
    cudaFree(x), cudaFree(y_lib), cudaFree(y_tma), cudaFree(prepared);
  }
  return 0;
}
