// The decoder ops' argument checks (decoder_checks.h).
#include "ops/decoder_checks.h"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "order/attention.h"

namespace exactq::checks {

namespace {
constexpr std::int64_t kMaxRows = std::int64_t(1) << 24;
constexpr std::int64_t kMaxDim = std::int64_t(1) << 24;
constexpr std::int64_t kMaxPosition = std::numeric_limits<std::int32_t>::max();  // positions are std::int32_t
}  // namespace

void fail(const char* op, const std::string& what) { throw std::invalid_argument(std::string("[exactq] ") + op + ": " + what); }

std::size_t bytes_of(const char* op, std::int64_t count, std::size_t element) {
  if (count < 0 || std::uint64_t(count) > std::numeric_limits<std::size_t>::max() / element)
    fail(op, std::to_string(count) + " elements is out of range");
  return std::size_t(count) * element;
}

void holds(const char* op, const char* operand, const Buffer& buffer, std::size_t need) {
  if (buffer.size() < need)
    fail(op, std::string(operand) + " holds " + std::to_string(buffer.size()) + " bytes, " + std::to_string(need) +
                 " are needed");
}

void in_range(const char* op, const char* name, std::int64_t value, std::int64_t low, std::int64_t high) {
  if (value < low || value > high)
    fail(op, std::string(name) + " = " + std::to_string(value) + " is out of range [" + std::to_string(low) + ", " +
                 std::to_string(high) + "]");
}

void load_dense(DType t, std::int64_t n, std::int64_t k, std::span<const std::byte> weight) {
  validate_dtype(t);
  in_range("load_dense", "n", n, 1, kMaxDim);
  in_range("load_dense", "k", k, 1, kMaxDim);
  if (weight.size() != bytes_of("load_dense", n * k, dtype_size(t)))
    fail("load_dense", std::to_string(weight.size()) + " bytes for a " + std::to_string(n) + "x" + std::to_string(k) +
                           " matrix");
}

void gated_activation(const Buffer& gate, const Buffer& up, std::int64_t count, Activation act, DType t,
                      const Buffer& out) {
  elementwise("gated_activation", count, t, {&gate, &up, &out});
  if (act != Activation::silu && act != Activation::gelu_tanh)
    fail("gated_activation", "activation value " + std::to_string(int(act)) + " is not an Activation");
}

void dense_mv(const DenseMatrix& w, const Buffer& x, std::int64_t m, const Buffer& y) {
  in_range("dense_mv", "M", m, 1, kMaxRows);
  const std::size_t e = dtype_size(w.dtype());
  holds("dense_mv", "x", x, bytes_of("dense_mv", m * w.k(), e));
  holds("dense_mv", "y", y, bytes_of("dense_mv", m * w.n(), e));
}

void view(const Buffer& b, std::size_t offset, std::size_t bytes) {
  if (offset > b.size() || bytes > b.size() - offset)
    fail("view", "[" + std::to_string(offset) + ", +" + std::to_string(bytes) + ") exceeds the buffer's " +
                     std::to_string(b.size()) + " bytes");
}

void copy(const Buffer& from, std::size_t from_offset, const Buffer& to, std::size_t to_offset, std::size_t bytes) {
  if (from_offset > from.size() || bytes > from.size() - from_offset)
    fail("copy", "source range [" + std::to_string(from_offset) + ", +" + std::to_string(bytes) + ") exceeds its " +
                     std::to_string(from.size()) + " bytes");
  if (to_offset > to.size() || bytes > to.size() - to_offset)
    fail("copy", "destination range [" + std::to_string(to_offset) + ", +" + std::to_string(bytes) + ") exceeds its " +
                     std::to_string(to.size()) + " bytes");
  const std::uintptr_t source = reinterpret_cast<std::uintptr_t>(from.bytes().data()) + from_offset;
  const std::uintptr_t destination = reinterpret_cast<std::uintptr_t>(to.bytes().data()) + to_offset;
  if (bytes > 0 && source < destination + bytes && destination < source + bytes)  // views may share memory
    fail("copy", "source and destination ranges overlap");
}

void copy_rows(const Buffer& from, std::size_t from_offset, std::size_t from_pitch, const Buffer& to,
               std::size_t to_offset, std::size_t to_pitch, std::size_t row_bytes, std::int64_t rows) {
  in_range("copy_rows", "rows", rows, 1, kMaxRows);
  if (from_pitch < row_bytes || to_pitch < row_bytes)
    fail("copy_rows", "a pitch (" + std::to_string(from_pitch) + ", " + std::to_string(to_pitch) + ") is below the row's " +
                          std::to_string(row_bytes) + " bytes");
  // The last row's end; the rows before it lie below it.
  const std::size_t span_from = bytes_of("copy_rows", rows - 1, from_pitch) + row_bytes;
  const std::size_t span_to = bytes_of("copy_rows", rows - 1, to_pitch) + row_bytes;
  if (from_offset > from.size() || span_from > from.size() - from_offset)
    fail("copy_rows", "the source rows end past its " + std::to_string(from.size()) + " bytes");
  if (to_offset > to.size() || span_to > to.size() - to_offset)
    fail("copy_rows", "the destination rows end past its " + std::to_string(to.size()) + " bytes");
  const std::uintptr_t source = reinterpret_cast<std::uintptr_t>(from.bytes().data()) + from_offset;
  const std::uintptr_t destination = reinterpret_cast<std::uintptr_t>(to.bytes().data()) + to_offset;
  if (source < destination + span_to && destination < source + span_from)
    fail("copy_rows", "source and destination overlap");
}

void embed(std::int64_t n, std::int64_t k, DType t, const Buffer& tokens, std::int64_t m, const Buffer& out) {
  in_range("embed", "M", m, 1, kMaxRows);
  holds("embed", "tokens", tokens, bytes_of("embed", m, sizeof(std::int32_t)));
  holds("embed", "out", out, bytes_of("embed", m * k, dtype_size(t)));
  (void)n;
}

void rmsnorm(const Buffer& x, const Buffer& weight, std::int64_t rows, std::int64_t h, DType t, float eps,
             const Buffer& y) {
  validate_dtype(t);
  in_range("rmsnorm", "rows", rows, 1, kMaxRows * 256);
  in_range("rmsnorm", "h", h, 1, kMaxDim);
  if (!(eps >= 0.0f) || eps == std::numeric_limits<float>::infinity())
    fail("rmsnorm", "eps = " + std::to_string(eps) + " must be finite and >= 0");
  const std::size_t e = dtype_size(t);
  holds("rmsnorm", "x", x, bytes_of("rmsnorm", rows * h, e));
  holds("rmsnorm", "weight", weight, bytes_of("rmsnorm", h, e));
  holds("rmsnorm", "y", y, bytes_of("rmsnorm", rows * h, e));
}

void add_rmsnorm(const Buffer& h, const Buffer& delta, const Buffer& weight, std::int64_t rows, std::int64_t width,
                 DType t, float eps, const Buffer& y) {
  rmsnorm(h, weight, rows, width, t, eps, y);
  elementwise("add_rmsnorm", rows * width, t, {&h, &delta});
  const std::size_t bytes = std::size_t(rows * width) * dtype_size(t);
  auto overlaps = [bytes](const Buffer& a, const Buffer& b) {
    const auto x = reinterpret_cast<std::uintptr_t>(a.bytes().data()), z = reinterpret_cast<std::uintptr_t>(b.bytes().data());
    return x < z + bytes && z < x + bytes;
  };
  if (overlaps(y, h) || overlaps(y, delta)) fail("add_rmsnorm", "y overlaps h or delta");
}

void rope(const Buffer& x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t, const Buffer& positions,
          const Buffer& steps) {
  validate_dtype(t);
  in_range("rope", "M", m, 1, kMaxRows);
  in_range("rope", "heads", heads, 1, 1 << 16);
  in_range("rope", "head_dim", head_dim, 2, order::kMaxHeadDim);
  if (head_dim % 2 != 0) fail("rope", "head_dim = " + std::to_string(head_dim) + " is odd");
  holds("rope", "positions", positions, bytes_of("rope", m, sizeof(std::int32_t)));
  holds("rope", "x", x, bytes_of("rope", m * heads * head_dim, dtype_size(t)));
  holds("rope", "steps", steps, bytes_of("rope", head_dim / 2, sizeof(std::uint64_t)));
}

void write_rows(const Buffer& rows, const Buffer& positions, std::int64_t m, std::size_t row_bytes, const Buffer& cache) {
  in_range("write_rows", "M", m, 1, kMaxRows);
  in_range("write_rows", "row bytes", std::int64_t(row_bytes), 1, kMaxDim * 4);
  holds("write_rows", "rows", rows, bytes_of("write_rows", m, row_bytes));
  holds("write_rows", "positions", positions, bytes_of("write_rows", m, sizeof(std::int32_t)));
  if (cache.size() < row_bytes) fail("write_rows", "the cache holds no row of " + std::to_string(row_bytes) + " bytes");
}

void rope_write(const Buffer& q, const Buffer& k, const Buffer& v, std::int64_t m, std::int64_t heads,
                std::int64_t kv_heads, std::int64_t head_dim, DType t, const Buffer& positions,
                const Buffer& cache_rows, const Buffer& steps, const Buffer& keys, const Buffer& values) {
  rope(q, m, heads, head_dim, t, positions, steps);
  rope(k, m, kv_heads, head_dim, t, positions, steps);
  const std::size_t row = std::size_t(kv_heads * head_dim) * dtype_size(t);
  write_rows(k, cache_rows, m, row, keys);
  write_rows(v, cache_rows, m, row, values);
}

void positions_in_range(const char* op, const std::int32_t* positions, std::int64_t m, std::int64_t high) {
  for (std::int64_t i = 0; i < m; ++i)
    if (positions[i] < 0 || positions[i] > high)
      fail(op, "positions[" + std::to_string(i) + "] = " + std::to_string(positions[i]) + " is out of range [0, " +
                   std::to_string(high) + "]");
}

void cache_rows_in_range(const char* op, const std::int32_t* positions, const std::int32_t* cache_rows, std::int64_t m,
                         std::int64_t rows) {
  for (std::int64_t i = 0; i < m; ++i)
    if (cache_rows[i] < positions[i] || cache_rows[i] > rows - 1)
      fail(op, "cache_rows[" + std::to_string(i) + "] = " + std::to_string(cache_rows[i]) + " is out of range [" +
                   std::to_string(positions[i]) + " (its position), " + std::to_string(rows - 1) +
                   "] (the cache's rows)");
}

void attention(const Buffer& q, const Buffer& keys, const Buffer& values, std::int64_t m, const Buffer& positions,
               const Buffer& cache_rows, std::int64_t max_position, const AttentionShape& s, DType t,
               const Buffer& out) {
  validate_dtype(t);
  in_range("attention", "M", m, 1, kMaxRows);
  in_range("attention", "max_position", max_position, 0, kMaxPosition);
  holds("attention", "positions", positions, bytes_of("attention", m, sizeof(std::int32_t)));
  holds("attention", "cache_rows", cache_rows, bytes_of("attention", m, sizeof(std::int32_t)));
  in_range("attention", "kv_heads", s.kv_heads, 1, 1 << 16);
  in_range("attention", "heads", s.heads, s.kv_heads, 1 << 16);
  if (s.heads % s.kv_heads != 0)
    fail("attention", "heads = " + std::to_string(s.heads) + " is not a multiple of kv_heads = " + std::to_string(s.kv_heads));
  in_range("attention", "head_dim", s.head_dim, order::kDotPartials, order::kMaxHeadDim);
  if (s.head_dim % order::kDotPartials != 0)
    fail("attention", "head_dim = " + std::to_string(s.head_dim) + " is not a multiple of 8");
  in_range("attention", "window", s.window, 0, kMaxPosition);
  if (!(s.scale > 0.0f) || s.scale == std::numeric_limits<float>::infinity())
    fail("attention", "scale = " + std::to_string(s.scale) + " must be finite and positive");
  const std::size_t e = dtype_size(t);
  holds("attention", "q", q, bytes_of("attention", m * s.heads * s.head_dim, e));
  holds("attention", "out", out, bytes_of("attention", m * s.heads * s.head_dim, e));
  const std::int64_t rows = max_position + 1;
  holds("attention", "keys", keys, bytes_of("attention", rows * s.kv_heads * s.head_dim, e));
  holds("attention", "values", values, bytes_of("attention", rows * s.kv_heads * s.head_dim, e));
}

void elementwise(const char* op, std::int64_t count, DType t, std::initializer_list<const Buffer*> operands) {
  validate_dtype(t);
  in_range(op, "count", count, 1, kMaxRows * kMaxDim);
  const std::size_t need = bytes_of(op, count, dtype_size(t));
  for (const Buffer* b : operands) holds(op, "an operand", *b, need);
}

void add_bias(const Buffer& y, const Buffer& bias, std::int64_t m, std::int64_t n, DType t) {
  validate_dtype(t);
  in_range("add_bias", "M", m, 1, kMaxRows);
  in_range("add_bias", "N", n, 1, kMaxDim);
  holds("add_bias", "y", y, bytes_of("add_bias", m * n, dtype_size(t)));
  holds("add_bias", "bias", bias, bytes_of("add_bias", n, dtype_size(t)));
}

void argmax(const Buffer& logits, std::int64_t m, std::int64_t n, DType t, const Buffer& indices) {
  validate_dtype(t);
  in_range("argmax", "M", m, 1, kMaxRows);
  in_range("argmax", "N", n, 1, std::int64_t(1) << 31);
  holds("argmax", "logits", logits, bytes_of("argmax", m * n, dtype_size(t)));
  holds("argmax", "indices", indices, bytes_of("argmax", m, sizeof(std::int32_t)));
}

}  // namespace exactq::checks
