// Embedding lookup on CUDA: a thread per output value; a quantized row is dequantized
// (order/elementwise.h), a dense row copied. A token outside the table gives zeros (the caller
// checks tokens on the host: a device-side refusal would cost a synchronization).
#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "order/elementwise.h"

namespace exactq::cuda_detail {

namespace {

__global__ void embed_quantized_kernel(const std::uint8_t* packed, const void* scales, const void* biases,
                                       std::int64_t n, std::int64_t k, int bits, int group, DType t,
                                       const std::int32_t* tokens, std::int64_t m, void* out) {
  step_prologue();
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * k) return;
  const std::int64_t v = i / k, col = i % k, row = tokens[v];
  if (row < 0 || row >= n) {
    store_f32(out, std::size_t(i), t, 0.0f);
    return;
  }
  const std::size_t g = std::size_t(row * (k / group) + col / group);
  const std::uint32_t code = unpack_code(packed + row * packed_row_bytes(k, bits), col, bits);
  store_f32(out, std::size_t(i), t, order::dequantize(load_f32(scales, g, t), code, load_f32(biases, g, t)));
}

__global__ void embed_dense_kernel(const void* table, std::int64_t n, std::int64_t k, DType t,
                                   const std::int32_t* tokens, std::int64_t m, void* out) {
  step_prologue();
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * k) return;
  const std::int64_t v = i / k, col = i % k, row = tokens[v];
  store_f32(out, std::size_t(i), t, row < 0 || row >= n ? 0.0f : load_f32(table, std::size_t(row * k + col), t));
}

}  // namespace

void launch_embed_quantized(const QuantizedMatrixView& w, const std::int32_t* tokens, std::int64_t m, void* out,
                            cudaStream_t stream) {
  launch_step(embed_quantized_kernel, dim3(blocks_for(m * w.k, kThreads)), kThreads, 0, stream,
              w.packed.data(), w.scales.data(), w.biases.data(), w.n, w.k, w.bits, w.group, w.dtype, tokens, m, out);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

void launch_embed_dense(const void* table, std::int64_t n, std::int64_t k, DType t, const std::int32_t* tokens,
                        std::int64_t m, void* out, cudaStream_t stream) {
  launch_step(embed_dense_kernel, dim3(blocks_for(m * k, kThreads)), kThreads, 0, stream, table, n, k, t, tokens, m, out);
  EXACTQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace exactq::cuda_detail
