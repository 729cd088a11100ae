// The elementwise ops on CUDA: a thread per element (order/elementwise.h).
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "order/elementwise.h"

namespace exactq::cuda_detail {

namespace {

__global__ void gated_kernel(const void* gate, const void* up, std::int64_t count, int act, DType t, void* out) {
  step_prologue();
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) store_f32(out, std::size_t(i), t, order::gated(load_f32(gate, std::size_t(i), t), load_f32(up, std::size_t(i), t), act));
}

__global__ void add_kernel(const void* a, const void* b, std::int64_t count, DType t, void* out) {
  step_prologue();
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) store_f32(out, std::size_t(i), t, order::residual(load_f32(a, std::size_t(i), t), load_f32(b, std::size_t(i), t)));
}

__global__ void add_bias_kernel(void* y, const void* bias, std::int64_t m, std::int64_t n, DType t) {
  step_prologue();
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < m * n) store_f32(y, std::size_t(i), t, order::residual(load_f32(y, std::size_t(i), t), load_f32(bias, std::size_t(i % n), t)));
}

__global__ void scale_kernel(void* x, std::int64_t count, float factor, DType t) {
  step_prologue();
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) store_f32(x, std::size_t(i), t, order::scaled(load_f32(x, std::size_t(i), t), factor));
}

}  // namespace

void launch_gated_activation(const void* gate, const void* up, std::int64_t count, Activation act, DType t, void* out,
                             cudaStream_t stream) {
  launch_step(gated_kernel, dim3(blocks_for(count, kThreads)), kThreads, 0, stream, gate, up, count, int(act), t, out);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

void launch_add(const void* a, const void* b, std::int64_t count, DType t, void* out, cudaStream_t stream) {
  launch_step(add_kernel, dim3(blocks_for(count, kThreads)), kThreads, 0, stream, a, b, count, t, out);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

void launch_add_bias(void* y, const void* bias, std::int64_t m, std::int64_t n, DType t, cudaStream_t stream) {
  launch_step(add_bias_kernel, dim3(blocks_for(m * n, kThreads)), kThreads, 0, stream, y, bias, m, n, t);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

void launch_scale(void* x, std::int64_t count, float factor, DType t, cudaStream_t stream) {
  launch_step(scale_kernel, dim3(blocks_for(count, kThreads)), kThreads, 0, stream, x, count, factor, t);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
