// The CPU mirror of the decoder's ops, one file per op (dense_mv.cpp, embed.cpp, rmsnorm.cpp,
// rope.cpp, attention.cpp, elementwise.cpp, argmax.cpp), on host bytes whose sizes the backend
// has checked (ops/decoder_checks.h). Rows are spread over `threads` workers; a row's bytes do not
// depend on that spread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "exactq/backend.h"

namespace exactq::cpu {

struct DenseWeights {
  std::span<const std::byte> bytes;
  std::int64_t n = 0, k = 0;
  DType dtype = DType::bf16;
};

void dense_mv(const DenseWeights& w, const std::byte* x, std::int64_t m, std::byte* y, int threads);
void embed_quantized(const QuantizedMatrixView& table, const std::int32_t* tokens, std::int64_t m, std::byte* out,
                     int threads);
void embed_dense(const DenseWeights& table, const std::int32_t* tokens, std::int64_t m, std::byte* out);
void rmsnorm(const std::byte* x, const std::byte* weight, std::int64_t rows, std::int64_t h, DType t, float eps,
             bool one_plus_weight, std::byte* y, int threads);
// The cache write: row i of `rows` to row positions[i] of `cache` (positions checked by the backend).
void write_rows(const std::byte* rows, const std::int32_t* positions, std::int64_t m, std::size_t row_bytes,
                std::byte* cache);
// Row i at positions[i] (checked by the backend).
void rope(std::byte* x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t,
          const std::int32_t* positions, const std::uint64_t* steps, bool interleaved, int threads);
// Row i reads its sequence's cache rows from cache_rows[i] - positions[i] (checked by the backend).
void attention(const std::byte* q, const std::byte* keys, const std::byte* values, std::int64_t m,
               const std::int32_t* positions, const std::int32_t* cache_rows, const AttentionShape& shape, DType t,
               std::byte* out, int threads);
void gated_activation(const std::byte* gate, const std::byte* up, std::int64_t count, Activation act, DType t,
                      std::byte* out, int threads);
void add(const std::byte* a, const std::byte* b, std::int64_t count, DType t, std::byte* out);
void add_bias(std::byte* y, const std::byte* bias, std::int64_t m, std::int64_t n, DType t);
void scale(std::byte* x, std::int64_t count, float factor, DType t);
void argmax(const std::byte* logits, std::int64_t m, std::int64_t n, DType t, std::int32_t* indices);

}  // namespace exactq::cpu
