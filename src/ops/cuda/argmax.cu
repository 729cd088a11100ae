// Greedy argmax on CUDA (order/argmax.h), in two kernels. argmax_better is a total order on
// (value, index), so any reduction tree gives the CPU's sequential answer:
//
//   argmax_slices  a block per (row, slice of kSlice logits; a block takes several slices in turn on
//                  a vocabulary of more than 65,535 slices): each thread keeps the best of its
//                  strided share (kUnroll loads in flight), then the warp's xor shuffles and the
//                  block's warps pick the slice's best, written to the workspace;
//   argmax_rows    a block per row picks the best of its slices' candidates the same way.
//
// The workspace (the backend's, argmax_workspace_bytes) holds one candidate per (row, slice).
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "order/argmax.h"
#include "support/dispatch.h"

namespace exactq::cuda_detail {

namespace {

constexpr int kBlock = 256;
constexpr int kUnroll = 8;
constexpr std::int64_t kSlice = std::int64_t(kBlock) * kUnroll;  // logits per slice
constexpr std::int64_t kMaxSliceBlocks = 65535;                  // a grid's y extent

struct Candidate {
  float value;
  std::int32_t index;  // -1: none (a slice of NaNs)
};

__device__ __forceinline__ Candidate better_of(Candidate a, Candidate b) {
  // argmax_better refuses a NaN and takes anything else over no candidate (index -1).
  return b.index >= 0 && order::argmax_better(b.value, b.index, a.value, a.index) ? b : a;
}

// The block's best candidate, in thread 0.
__device__ Candidate block_best(Candidate c) {
  __shared__ Candidate warps[kBlock / 32];
  for (int mask = 16; mask > 0; mask /= 2) {
    Candidate other;
    other.value = __shfl_xor_sync(0xffffffffu, c.value, mask);
    other.index = __shfl_xor_sync(0xffffffffu, c.index, mask);
    c = better_of(c, other);
  }
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = c;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kBlock / 32; ++w) c = better_of(c, warps[w]);
  return c;
}

template <DType T>
__global__ void __launch_bounds__(kBlock) argmax_slices(const void* logits, std::int64_t n, std::int64_t slices,
                                                        Candidate* candidates) {
  step_prologue();
  const std::int64_t row = blockIdx.x;
  const std::size_t base = std::size_t(row * n);
  for (std::int64_t slice = blockIdx.y; slice < slices; slice += gridDim.y) {  // uniform per block
    const std::int64_t first = slice * kSlice;
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t j = first + u * kBlock + threadIdx.x;
      v[u] = j < n ? load_f32(logits, base + std::size_t(j), T) : 0.0f;
    }
    Candidate c{0.0f, -1};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t j = first + u * kBlock + threadIdx.x;
      if (j < n) c = better_of(c, Candidate{v[u], std::int32_t(j)});
    }
    c = block_best(c);
    if (threadIdx.x == 0) candidates[row * slices + slice] = c;
    __syncthreads();  // block_best's shared memory is reused by the next slice
  }
}

__global__ void __launch_bounds__(kBlock) argmax_rows(const Candidate* candidates, std::int64_t slices,
                                                      std::int32_t* indices) {
  step_prologue();
  const std::int64_t row = blockIdx.x;
  Candidate c{0.0f, -1};
  for (std::int64_t s = threadIdx.x; s < slices; s += kBlock) c = better_of(c, candidates[row * slices + s]);
  c = block_best(c);
  if (threadIdx.x == 0) indices[row] = c.index < 0 ? 0 : c.index;
}

}  // namespace

std::size_t argmax_workspace_bytes(std::int64_t m, std::int64_t n) {
  return std::size_t(m) * std::size_t((n + kSlice - 1) / kSlice) * sizeof(Candidate);
}

void launch_argmax(const void* logits, std::int64_t m, std::int64_t n, DType t, std::int32_t* indices, void* workspace,
                   cudaStream_t stream) {
  if (m < 1) return;
  const std::int64_t slices = (n + kSlice - 1) / kSlice;
  auto* candidates = static_cast<Candidate*>(workspace);
  dispatch_value<int(DType::f32), int(DType::f16), int(DType::bf16)>(int(t), "dtype", [&]<int D>() {
    launch_step(argmax_slices<DType(D)>, dim3(unsigned(m), unsigned(slices < kMaxSliceBlocks ? slices : kMaxSliceBlocks)),
                kBlock, 0, stream, logits, n, slices, candidates);
  });
  EXACTQ_CUDA_CHECK(cudaGetLastError());
  launch_step(argmax_rows, dim3(unsigned(m)), kBlock, 0, stream, candidates, slices, indices);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
