// Host-side launchers of the decoder's CUDA kernels, one file per op (dense_mv.cu, embed.cu,
// rmsnorm.cu, rope.cu, attention.cu, elementwise.cu, argmax.cu), mirroring src/ops/cpu/ name for
// name. Arguments are device pointers that the backend has checked (ops/decoder_checks.h); each
// kernel computes the order of src/order/ for its rows, so its bytes are the CPU mirror's.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "exactq/backend.h"

namespace exactq::cuda_detail {

void launch_dense_mv(const void* w, std::int64_t n, std::int64_t k, DType t, const void* x, std::int64_t m, void* y,
                     cudaStream_t stream);
void launch_embed_quantized(const QuantizedMatrixView& table, const std::int32_t* tokens, std::int64_t m, void* out,
                            cudaStream_t stream);
void launch_embed_dense(const void* table, std::int64_t n, std::int64_t k, DType t, const std::int32_t* tokens,
                        std::int64_t m, void* out, cudaStream_t stream);
void launch_rmsnorm(const void* x, const void* weight, std::int64_t rows, std::int64_t h, DType t, float eps,
                    bool one_plus_weight, void* y, cudaStream_t stream);
// h = h + delta, then y = rmsnorm(h), in one kernel (rmsnorm.cu).
void launch_add_rmsnorm(void* h, const void* delta, const void* weight, std::int64_t rows, std::int64_t width, DType t,
                        float eps, bool one_plus_weight, void* y, cudaStream_t stream);
// Positions are device memory (std::int32_t per row): see Backend::rope.
void launch_rope(void* x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t,
                 const std::int32_t* positions, const std::uint64_t* steps, bool interleaved, cudaStream_t stream);
void launch_write_rows(const void* rows, const std::int32_t* positions, std::int64_t m, std::size_t row_bytes,
                       void* cache, std::int64_t cache_rows, cudaStream_t stream);
// rope(q), rope(k), write_rows(k, keys), write_rows(v, values) in one kernel (rope.cu): row i
// rotated at positions[i], cached at row cache_at[i]; cache_rows is the smaller cache's row count.
void launch_rope_write(void* q, void* k, const void* v, std::int64_t m, std::int64_t heads, std::int64_t kv_heads,
                       std::int64_t head_dim, DType t, const std::int32_t* positions, const std::int32_t* cache_at,
                       const std::uint64_t* steps, bool interleaved, void* keys, void* values, std::int64_t cache_rows,
                       cudaStream_t stream);
// Attention runs split over key chunks (attention.cu): the chunks' statistics go through
// `workspace`, device memory the caller owns. attention_workspace_bytes is what a call needs for
// all its rows at once, at most kAttentionWorkspaceCap unless one row alone needs more; with less
// (but at least one row's share) launch_attention runs the rows in slices, with the same bytes.
// `counters` holds attention_counter_count(m, shape) zeros, which the call leaves at zero: they
// elect the block that folds each group's chunks.
inline constexpr std::size_t kAttentionWorkspaceCap = std::size_t(256) << 20;
std::size_t attention_workspace_bytes(std::int64_t m, std::int64_t max_position, const AttentionShape& shape);
std::size_t attention_counter_count(std::int64_t m, const AttentionShape& shape);
// Row i reads its sequence's rows from cache row cache_at[i] - positions[i] on (Backend::attention);
// cache_rows is the smaller cache's row count, within which every read stays.
void launch_attention(const void* q, const void* keys, const void* values, std::int64_t m,
                      const std::int32_t* positions, const std::int32_t* cache_at, std::int64_t cache_rows,
                      std::int64_t max_position, const AttentionShape& shape, DType t, void* out, void* workspace,
                      std::size_t workspace_bytes, unsigned* counters, cudaStream_t stream);
void launch_gated_activation(const void* gate, const void* up, std::int64_t count, Activation act, DType t, void* out,
                             cudaStream_t stream);
void launch_add(const void* a, const void* b, std::int64_t count, DType t, void* out, cudaStream_t stream);
void launch_add_bias(void* y, const void* bias, std::int64_t m, std::int64_t n, DType t, cudaStream_t stream);
void launch_scale(void* x, std::int64_t count, float factor, DType t, cudaStream_t stream);
// Argmax runs in two kernels (argmax.cu) with a workspace of argmax_workspace_bytes between them.
std::size_t argmax_workspace_bytes(std::int64_t m, std::int64_t n);
void launch_argmax(const void* logits, std::int64_t m, std::int64_t n, DType t, std::int32_t* indices, void* workspace,
                   cudaStream_t stream);

// Blocks for `count` items at `per_block` items a block.
inline unsigned blocks_for(std::int64_t count, std::int64_t per_block) {
  return unsigned((count + per_block - 1) / per_block);
}

}  // namespace exactq::cuda_detail
