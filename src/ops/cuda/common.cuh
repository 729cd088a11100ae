// Device-side pieces shared by the CUDA kernels: exact code decoding, weight loads, the
// activation staging layout, error checks. The arithmetic of each kernel lives in
// src/order/ and is called from here, never re-typed.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "order/qmv.h"
#include "order/qmv_mma.h"
#include "order/qmv_wide.h"
#include "ops/cuda/launch.h"
#include "exactq/dtype.h"
#include "exactq/format.h"

#define EXACTQ_CUDA_CHECK(call)                                                                          \
  do {                                                                                                   \
    const cudaError_t exactq_err_ = (call);                                                              \
    if (exactq_err_ != cudaSuccess)                                                                      \
      throw std::runtime_error(std::string("[exactq] CUDA error: ") + cudaGetErrorString(exactq_err_) + \
                               " at " + __FILE__ + ":" + std::to_string(__LINE__) + " (" #call ")");     \
  } while (0)

namespace exactq::cuda_detail {

inline constexpr int kThreads = 256;  // 8 warps per block
inline constexpr int kWarps = kThreads / 32;

// ---- exact integer codes as floats -----------------------------------------------------------
// Code at stream bit S of a chunk held in 32-bit words, returned as the exact float q. The cheap
// path ORs the masked bits under the exponent of 2^23 (one LOP3: 2^23 + q*2^s, exact because
// q*2^s < 2^16) and removes both the 2^23 and the 2^s with one exact fma. No rounding happens
// anywhere, so the result is the same float as float(q): no order of docs/design.md changes.
inline constexpr std::uint32_t kMagic = 0x4B000000u;  // 2^23

template <int BITS, int S>
__device__ __forceinline__ float code_at(const std::uint32_t* words) {
  constexpr int word = S / 32, s = S % 32;
  constexpr std::uint32_t mask = (1u << BITS) - 1u;
  // Compile-time constants (forced, so no division is ever left for run time).
  constexpr int shift = s >= 16 ? s - 16 : s;
  constexpr float unscale = 1.0f / float(1u << shift);
  constexpr float unmagic = -8388608.0f / float(1u << shift);
  if constexpr (s + BITS <= 16 || (s >= 16 && s + BITS <= 32)) {
    // The code's 16-bit half goes under the magic exponent once (PRMT, shared by all codes of
    // that half); then one AND per code keeps the exponent and the code's bits.
    const std::uint32_t half = __byte_perm(words[word], kMagic, s >= 16 ? 0x7632 : 0x7610);
    const std::uint32_t f = half & (0xFF000000u | (mask << shift));
    return __fmaf_rn(__uint_as_float(f), unscale, unmagic);
  } else {
    std::uint32_t v;
    if constexpr (s + BITS <= 32) {
      v = words[word] >> s;
    } else {
      v = __funnelshift_r(words[word], words[word + 1], s);  // a code crossing two words
    }
    return __fadd_rn(__uint_as_float((v & mask) | kMagic), -8388608.0f);
  }
}

// Codes FIRST .. FIRST+COUNT-1 of a chunk.
template <int BITS, int FIRST, int COUNT>
__device__ __forceinline__ void decode_codes(const std::uint32_t* words, float* q) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((q[I] = code_at<BITS, (FIRST + I) * BITS>(words)), ...);
  }(std::make_integer_sequence<int, COUNT>{});
}

// ---- exact integer dots (the qmv family, docs/design.md §3) --------------------------------------
// Code I of a chunk as an integer: one shift and one AND (a funnel shift for a code crossing two
// words), both folded away where the code starts at bit 0 or ends at bit 32.
template <int BITS, int I>
__device__ __forceinline__ std::uint32_t code_value(const std::uint32_t* words) {
  constexpr int bit = I * BITS, word = bit / 32, s = bit % 32;
  constexpr std::uint32_t mask = (1u << BITS) - 1u;
  if constexpr (s + BITS <= 32) {
    return (words[word] >> s) & mask;
  } else {
    return __funnelshift_r(words[word], words[word + 1], s) & mask;
  }
}

// c + the dot of four unsigned bytes of a with four signed bytes of b (exact: no rounding, and
// the callers keep every sum far below 2^31).
__device__ __forceinline__ int byte_dot(std::uint32_t a, std::uint32_t b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// ---- weight loads ----------------------------------------------------------------------------
// One chunk is 4*BITS bytes = BITS words, aligned to its own size within a row (rows are whole
// numbers of chunks), so 4- and 8-bit chunks load as 16-byte vectors, 2- and 6-bit as 8-byte
// ones, 3- and 5-bit as words. Streaming loads: weights are read once, keep them out of L1.
template <int BITS>
__device__ __forceinline__ void load_chunk(const std::uint8_t* p, std::uint32_t (&w)[BITS]) {
  if constexpr (BITS % 4 == 0) {
#pragma unroll
    for (int i = 0; i < BITS / 4; ++i) {
      const uint4 v = __ldcs(reinterpret_cast<const uint4*>(p) + i);
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
  } else if constexpr (BITS % 2 == 0) {
#pragma unroll
    for (int i = 0; i < BITS / 2; ++i) {
      const uint2 v = __ldcs(reinterpret_cast<const uint2*>(p) + i);
      w[2 * i] = v.x, w[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < BITS; ++i) w[i] = __ldcs(reinterpret_cast<const unsigned int*>(p) + i);
  }
}

// ---- overlap with the neighbours on the stream (sm_90) -----------------------------------------
// Programmatic dependent launch: a kernel launched with the attribute may start while the kernel
// before it on the stream is still running. Until wait_for_previous_grid() returns it may read
// only what that kernel cannot write (the weights, which the API declares immutable while in
// use); x and y come after. Without the attribute both are no-ops.
__device__ __forceinline__ void wait_for_previous_grid() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void let_next_grid_start() { asm volatile("griddepcontrol.launch_dependents;\n"); }

// Launches kernel(args...), optionally as a programmatic dependent launch
// (QmvOptions::overlap_launch): it may then start while the previous kernel on the stream runs.
template <typename... Params, typename... Args>
void launch_overlapping(void (*kernel)(Params...), dim3 grid, int threads, std::size_t smem, bool overlap,
                        cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(unsigned(threads));
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = overlap ? 1 : 0;
  EXACTQ_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// The decoder's own kernels (norms, RoPE, the cache write, attention, the elementwise ops, the
// embedding, argmax) are all launched by launch_step and begin with step_prologue(): the next
// kernel on the stream may be scheduled at once (its blocks take SM slots as this grid frees them,
// so a launch's latency and a matrix's first loads hide behind the kernel before), and this one
// waits until the kernel before it has finished and its writes are visible. Before the wait a
// kernel reads only what no kernel of the step writes: the weights (the norm copies its weight row
// then) and the rows' positions (rope_write makes its cos and sin), which are in place before the
// step's first kernel. Every kernel waits, so a kernel's completion implies that of all before it,
// and no byte can depend on the overlap.
__device__ __forceinline__ void step_prologue() {
  let_next_grid_start();
  wait_for_previous_grid();
}
template <typename... Params, typename... Args>
void launch_step(void (*kernel)(Params...), dim3 grid, int threads, std::size_t smem, cudaStream_t stream,
                 Args&&... args) {
  launch_overlapping(kernel, grid, threads, smem, true, stream, std::forward<Args>(args)...);
}

// ---- asynchronous copies into a shared-memory ring (qmv_mma.cu) ----------------------------------
// Bytes in flight decide the bandwidth of a streaming kernel (Little's law: ~4.6 TB/s times about
// a microsecond of loaded HBM latency is several MB, tens of KB per SM). Held in registers they
// cost occupancy; cp.async puts them in shared memory instead. 4, 8 or 16 bytes (16 bypasses L1:
// .cg), issued only where `pred` holds: a predicated instruction, not a branch (a branch around
// copies costs a reconvergence barrier per stage in a loop).
template <int BYTES>
__device__ __forceinline__ void copy_async_if(bool pred, void* shared, const void* global) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  if constexpr (BYTES == 16)
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16;\n}\n" ::"r"(to),
                 "l"(global), "r"(int(pred)));
  else
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.ca.shared.global [%0], [%1], %3;\n}\n" ::"r"(to),
                 "l"(global), "r"(int(pred)), "n"(BYTES));
}
__device__ __forceinline__ void commit_async_copies() { asm volatile("cp.async.commit_group;\n" ::); }
// `bytes` (a multiple of 16) from `from` to `to` in shared memory, 16-byte cp.async by the block's
// threads, as one commit group: a norm's weight row, copied before its kernel waits.
__device__ __forceinline__ void copy_row_async(std::byte* to, const void* from, std::int64_t bytes) {
  for (std::int64_t j = threadIdx.x; j < bytes / 16; j += blockDim.x)
    copy_async_if<16>(true, to + 16 * j, static_cast<const std::byte*>(from) + 16 * j);
  commit_async_copies();
}
template <int PENDING>
__device__ __forceinline__ void wait_async_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}
// Widening on the device with the hardware conversions: the same values as dtype.h's (every
// f16/bf16 value is exact in f32), without branches in the inner loops.
__device__ __forceinline__ float widen_half(unsigned raw16, DType dtype) {
  return dtype == DType::bf16 ? __uint_as_float(raw16 << 16) : __half2float(__ushort_as_half((unsigned short)raw16));
}

// Group parameters with the dtype known at compile time where speed needs it (PARAM = the
// DType's value), or read at run time (PARAM = kRuntimeDtype), for kernels that amortise it. In two
// steps, for software pipelines: the raw bits now (load_param_bits), the value where it is used
// (param_value). Widening right after a prefetch makes the warp wait for that load there, before
// the work the prefetch was meant to overlap (in qmv it drew 30 % of the stall samples).
inline constexpr int kRuntimeDtype = -1;
template <int PARAM>
__device__ __forceinline__ std::uint32_t load_param_bits(const void* base, std::int64_t i, DType dtype) {
  const DType t = PARAM == kRuntimeDtype ? dtype : DType(PARAM);
  if (t == DType::f32) return static_cast<const std::uint32_t*>(base)[i];
  return static_cast<const unsigned short*>(base)[i];
}
// The same with an L2 fetch-size hint (PTX ld.global.L2::128B; FETCH = 0: none): the load brings
// the 128 bytes around the parameter into L2, where the next rounds' loads of the same row find
// them (at group 64 a round reads 32 of a row's parameter bytes).
template <int PARAM, int FETCH>
__device__ __forceinline__ std::uint32_t load_param_bits_fetch(const void* base, std::int64_t i, DType dtype) {
  if constexpr (FETCH == 0) {
    return load_param_bits<PARAM>(base, i, dtype);
  } else {
    static_assert(FETCH == 128, "the L2 fetch size used is 128 bytes");
    const DType t = PARAM == kRuntimeDtype ? dtype : DType(PARAM);
    std::uint32_t v;
    if (t == DType::f32) {
      asm("ld.global.L2::128B.u32 %0, [%1];" : "=r"(v) : "l"(static_cast<const std::uint32_t*>(base) + i));
    } else {
      asm("ld.global.L2::128B.u16 %0, [%1];" : "=r"(v) : "l"(static_cast<const unsigned short*>(base) + i));
    }
    return v;
  }
}
template <int PARAM>
__device__ __forceinline__ float param_value(std::uint32_t bits, DType dtype) {
  const DType t = PARAM == kRuntimeDtype ? dtype : DType(PARAM);
  return t == DType::f32 ? __uint_as_float(bits) : widen_half(bits, t);
}

EXACTQ_HD int ceil_div(std::int64_t a, std::int64_t b) { return int((a + b - 1) / b); }

// Largest tile of K (a multiple of 1024 values, at least 1024) whose f32 copy for V vectors,
// plus `extra_per_value` floats per value, fits `budget` bytes of shared memory.
inline int k_tile(std::int64_t k, int vectors, double extra_per_value, double budget) {
  int tile = int(budget / (vectors * 4.0 * (1.0 + extra_per_value)) / 1024) * 1024;
  tile = tile < 1024 ? 1024 : tile;
  const std::int64_t k_rounded = (k + 1023) / 1024 * 1024;
  return int(k_rounded < tile ? k_rounded : tile);
}

// Blocks of KERNEL resident per SM with `smem` bytes of dynamic shared memory (at least 1), after
// raising the kernel's dynamic shared-memory limit to `max_smem` (at most the device's) once per kernel.
template <auto KERNEL>
int resident_blocks(int threads, std::size_t smem, int max_smem) {
  // The kernel's opt-in, at most what the device allows one block.
  const int allowed = shared_memory_limits().per_block;
  if (smem > std::size_t(allowed))
    throw std::invalid_argument("[exactq] a block would need " + std::to_string(smem) +
                                " bytes of shared memory; this device allows " + std::to_string(allowed));
  static const bool raised = [&] {
    EXACTQ_CUDA_CHECK(cudaFuncSetAttribute(KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           max_smem < allowed ? max_smem : allowed));
    return true;
  }();
  (void)raised;
  int blocks = 0;
  EXACTQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, KERNEL, threads, smem));
  return blocks < 1 ? 1 : blocks;
}

}  // namespace exactq::cuda_detail
