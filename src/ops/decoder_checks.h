// Argument checks of the decoder's ops (Backend's second half), shared by both backends so that
// each op refuses the same arguments with the same words on either side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "exactq/backend.h"

namespace exactq::checks {

// Throws std::invalid_argument("[exactq] <op>: <what>").
[[noreturn]] void fail(const char* op, const std::string& what);

// `count` elements of `element` bytes; throws where count is negative or the size overflows.
std::size_t bytes_of(const char* op, std::int64_t count, std::size_t element);
// Throws where `buffer` holds fewer than `need` bytes, naming the operand.
void holds(const char* op, const char* operand, const Buffer& buffer, std::size_t need);
// Throws where `value` is outside [low, high], naming it.
void in_range(const char* op, const char* name, std::int64_t value, std::int64_t low, std::int64_t high);

void load_dense(DType t, std::int64_t n, std::int64_t k, std::span<const std::byte> weight);
void gated_activation(const Buffer& gate, const Buffer& up, std::int64_t count, Activation act, DType t,
                      const Buffer& out);
void dense_mv(const DenseMatrix& w, const Buffer& x, std::int64_t m, const Buffer& y);
// A view's range within its buffer.
void view(const Buffer& b, std::size_t offset, std::size_t bytes);
void copy(const Buffer& from, std::size_t from_offset, const Buffer& to, std::size_t to_offset, std::size_t bytes);
void copy_rows(const Buffer& from, std::size_t from_offset, std::size_t from_pitch, const Buffer& to,
               std::size_t to_offset, std::size_t to_pitch, std::size_t row_bytes, std::int64_t rows);
void embed(std::int64_t n, std::int64_t k, DType t, const Buffer& tokens, std::int64_t m, const Buffer& out);
void rmsnorm(const Buffer& x, const Buffer& weight, std::int64_t rows, std::int64_t h, DType t, float eps,
             const Buffer& y);
// rmsnorm's checks, add's on the row block, and y apart from h and delta.
void add_rmsnorm(const Buffer& h, const Buffer& delta, const Buffer& weight, std::int64_t rows, std::int64_t width,
                 DType t, float eps, const Buffer& y);
void rope(const Buffer& x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t, const Buffer& positions,
          const Buffer& steps);
void write_rows(const Buffer& rows, const Buffer& positions, std::int64_t m, std::size_t row_bytes, const Buffer& cache);
// rope's checks on q and k, write_rows' on k and v at cache_rows.
void rope_write(const Buffer& q, const Buffer& k, const Buffer& v, std::int64_t m, std::int64_t heads,
                std::int64_t kv_heads, std::int64_t head_dim, DType t, const Buffer& positions,
                const Buffer& cache_rows, const Buffer& steps, const Buffer& keys, const Buffer& values);
void attention(const Buffer& q, const Buffer& keys, const Buffer& values, std::int64_t m, const Buffer& positions,
               const Buffer& cache_rows, std::int64_t max_position, const AttentionShape& shape, DType t,
               const Buffer& out);
// On the host (the CPU backend): every positions[i] in [0, high], naming the first that is not.
void positions_in_range(const char* op, const std::int32_t* positions, std::int64_t m, std::int64_t high);
// On the host: every row's sequence inside the cache's `rows` rows, positions[i] <= cache_rows[i]
// <= rows - 1 (its position 0 at cache row cache_rows[i] - positions[i] >= 0), naming the first
// row that is not.
void cache_rows_in_range(const char* op, const std::int32_t* positions, const std::int32_t* cache_rows, std::int64_t m,
                         std::int64_t rows);
void elementwise(const char* op, std::int64_t count, DType t, std::initializer_list<const Buffer*> operands);
void add_bias(const Buffer& y, const Buffer& bias, std::int64_t m, std::int64_t n, DType t);
void argmax(const Buffer& logits, std::int64_t m, std::int64_t n, DType t, const Buffer& indices);

}  // namespace exactq::checks
