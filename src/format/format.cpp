#include <stdexcept>
#include <string>

#include "exactq/format.h"
#include "exactq/mma_layout.h"

namespace exactq {

namespace {
[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("[exactq] " + what); }
}  // namespace

// A DType or WeightLayout made from any number of its underlying type is well-defined C++, so
// each switch below lists every enumerator and ends with the refusal (no default: the compiler
// then warns where an enumerator is added and not handled).
void validate_dtype(DType t) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return;
  }
  fail("dtype value " + std::to_string(static_cast<int>(t)) + " is not a DType (f32 = 0, f16 = 1, bf16 = 2)");
}

std::string_view to_string(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  validate_dtype(t);  // throws: t is none of the above
  return {};
}

void validate_layout(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::mlx:
    case WeightLayout::mma_fragments: return;
  }
  fail("layout value " + std::to_string(static_cast<int>(layout)) +
       " is not a WeightLayout (mlx = 0, mma_fragments = 1)");
}

DType parse_dtype(std::string_view text) {
  if (text == "f32" || text == "float32") return DType::f32;
  if (text == "f16" || text == "float16") return DType::f16;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  fail("unknown dtype '" + std::string(text) + "' (expected f32, f16 or bf16)");
}

void validate_shape(std::int64_t n, std::int64_t k, int bits, int group) {
  if (!is_supported_bits(bits)) fail("bits = " + std::to_string(bits) + " is not supported (2, 3, 4, 5, 6 or 8)");
  if (!is_supported_group(group)) fail("group = " + std::to_string(group) + " is not supported (32, 64 or 128)");
  constexpr std::int64_t kMaxDim = std::int64_t(1) << 31;
  if (n < 1 || n >= kMaxDim) fail("N = " + std::to_string(n) + " is out of range [1, 2^31)");
  if (k < 1 || k >= kMaxDim) fail("K = " + std::to_string(k) + " is out of range [1, 2^31)");
  if (k % group != 0)
    fail("K = " + std::to_string(k) + " is not a multiple of the group size " + std::to_string(group));
}

QuantizedMatrix QuantizedMatrix::zeros(std::int64_t n, std::int64_t k, int bits, int group, DType dtype) {
  validate_shape(n, k, bits, group);
  validate_dtype(dtype);
  QuantizedMatrix q;
  q.n = n;
  q.k = k;
  q.bits = bits;
  q.group = group;
  q.dtype = dtype;
  q.packed.assign(std::size_t(n * packed_row_bytes(k, bits)), 0);
  q.scales.assign(std::size_t(n * (k / group)) * dtype_size(dtype), std::byte{0});
  q.biases.assign(q.scales.size(), std::byte{0});
  return q;
}

std::int64_t QuantizedMatrixView::weight_bytes() const {
  validate_dtype(dtype);
  return n * row_bytes() + 2 * n * groups_per_row() * std::int64_t(dtype_size(dtype));
}

void QuantizedMatrixView::validate() const {
  // The enums first: the sizes below depend on both.
  validate_dtype(dtype);
  validate_layout(layout);
  validate_shape(n, k, bits, group);
  // The fragment layout stores N padded to whole 16-row tasks.
  const bool fragments = layout == WeightLayout::mma_fragments;
  if (fragments) mma_layout::check_shape(n, k, bits, group);
  const std::int64_t rows = fragments ? mma_layout::padded_rows(n) : n;
  const std::size_t want_packed = std::size_t(rows * row_bytes());
  const std::size_t want_params = std::size_t(rows * groups_per_row()) * dtype_size(dtype);
  if (packed.data() == nullptr) fail("packed weights are null");
  if (scales.data() == nullptr) fail("scales are null");
  if (biases.data() == nullptr) fail("biases are null");
  if (packed.size() != want_packed)
    fail("packed weights have " + std::to_string(packed.size()) + " bytes, expected " +
         (fragments ? "(N rounded up to 16)" : "N") + "*K*bits/8 = " +
         std::to_string(want_packed));
  if (scales.size() != want_params)
    fail("scales have " + std::to_string(scales.size()) + " bytes, expected " + (fragments ? "(N rounded up to 16)" : "N") + "*(K/group)*" +
         std::to_string(dtype_size(dtype)) + " = " + std::to_string(want_params));
  if (biases.size() != want_params)
    fail("biases have " + std::to_string(biases.size()) + " bytes, expected " + (fragments ? "(N rounded up to 16)" : "N") + "*(K/group)*" +
         std::to_string(dtype_size(dtype)) + " = " + std::to_string(want_params));
}

}  // namespace exactq
