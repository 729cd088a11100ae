// Out-of-range enum values (a DType, WeightLayout or QuantRule made by static_cast from a number
// that names no enumerator) at every entry point of the format layer that takes one: each must
// throw std::invalid_argument naming the value, where an unchecked switch would quietly read the
// value as some enumerator (bf16, MLX's layout, MLX's CPU rule). Every refusal has a control: the
// same call with a valid value goes through. The device-side helpers (dtype_size, load_f32,
// store_f32) take the dtype unchecked by design; the checks here are at the boundaries that
// every caller of those passes through.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "exactq/dtype.h"
#include "exactq/format.h"
#include "exactq/mma_layout.h"
#include "exactq/quantize.h"
#include "test_util.h"

namespace exactq::test {
namespace {

// Just past the last enumerator, a value well past it, and the far end of the underlying type.
constexpr int kBadDtypes[] = {3, 7, 255};  // DType is a std::uint8_t
constexpr int kBadLayouts[] = {2, 7, -1};
constexpr int kBadRules[] = {2, 7, -1};
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

std::string value_note(const char* what, int v) { return std::string(what) + " value " + std::to_string(v); }

std::vector<float> normal_weights(std::size_t count, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(count);
  for (float& v : w) v = normal(rng);
  return w;
}

TEST(EnumValues, DtypeValidationAndNames) {
  const char* names[] = {"f32", "f16", "bf16"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NO_THROW(validate_dtype(kDtypes[i]));
    EXPECT_EQ(to_string(kDtypes[i]), names[i]);
  }
  for (int v : kBadDtypes) {
    expect_invalid([&] { validate_dtype(static_cast<DType>(v)); }, value_note("dtype", v));
    expect_invalid([&] { (void)to_string(static_cast<DType>(v)); }, value_note("dtype", v));
  }
}

TEST(EnumValues, LayoutAndRuleValidation) {
  for (WeightLayout layout : {WeightLayout::mlx, WeightLayout::mma_fragments}) EXPECT_NO_THROW(validate_layout(layout));
  for (QuantRule rule : {QuantRule::mlx_gpu, QuantRule::mlx_cpu}) EXPECT_NO_THROW(validate_quant_rule(rule));
  for (int v : kBadLayouts) expect_invalid([&] { validate_layout(static_cast<WeightLayout>(v)); }, value_note("layout", v));
  for (int v : kBadRules) expect_invalid([&] { validate_quant_rule(static_cast<QuantRule>(v)); }, value_note("quant rule", v));
}

TEST(EnumValues, ZerosRefusesABadDtype) {
  for (DType t : kDtypes) {
    const QuantizedMatrix z = QuantizedMatrix::zeros(3, 128, 4, 64, t);
    EXPECT_EQ(z.scales.size(), 3u * 2u * ref_size(t));
  }
  for (int v : kBadDtypes)
    expect_invalid([&] { QuantizedMatrix::zeros(3, 128, 4, 64, static_cast<DType>(v)); }, value_note("dtype", v));
}

// The bad dtype is set on a bf16 view whose buffers are bf16-sized, so a size check reading the
// bad value as 2 bytes would pass it: only the dtype check can refuse it.
TEST(EnumValues, ViewValidateAndWeightBytesRefuseABadDtypeOrLayout) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::int64_t n = 1 + std::int64_t(rng() % 40), k = 256 * (1 + std::int64_t(rng() % 3));
  const QuantizedMatrix w = random_matrix(n, k, 4, 64, DType::bf16, rng);
  const QuantizedMatrix f = to_mma_fragments(w.view());
  for (const QuantizedMatrix* m : {&w, &f}) {
    EXPECT_NO_THROW(m->view().validate());  // control
    // Padding rows of the fragment layout are not read as weights: both count the N real rows.
    EXPECT_EQ(m->view().weight_bytes(), std::int64_t(w.packed.size() + w.scales.size() + w.biases.size()));
    for (int v : kBadDtypes) {
      QuantizedMatrixView bad = m->view();
      bad.dtype = static_cast<DType>(v);
      expect_invalid([&] { bad.validate(); }, value_note("dtype", v));
      expect_invalid([&] { (void)bad.weight_bytes(); }, value_note("dtype", v));
    }
    for (int v : kBadLayouts) {
      QuantizedMatrixView bad = m->view();
      bad.layout = static_cast<WeightLayout>(v);
      expect_invalid([&] { bad.validate(); }, value_note("layout", v));
    }
  }
}

TEST(EnumValues, QuantizeRefusesABadDtypeOrRule) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::vector<float> w = normal_weights(4 * 128, rng);
  for (DType t : kDtypes)
    for (QuantRule rule : {QuantRule::mlx_gpu, QuantRule::mlx_cpu}) EXPECT_NO_THROW(quantize(w, 4, 128, 4, 64, t, rule));
  for (int v : kBadDtypes)
    expect_invalid([&] { quantize(w, 4, 128, 4, 64, static_cast<DType>(v)); }, value_note("dtype", v));
  for (int v : kBadRules)
    expect_invalid([&] { quantize(w, 4, 128, 4, 64, DType::bf16, static_cast<QuantRule>(v)); }, value_note("quant rule", v));
}

TEST(EnumValues, DequantizeRefusesABadDtypeOrLayout) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const QuantizedMatrix w = random_matrix(5, 128, 4, 64, DType::f16, rng);
  EXPECT_EQ(dequantize(w.view()).size(), 5u * 128u);  // control
  for (int v : kBadDtypes) {
    QuantizedMatrixView bad = w.view();
    bad.dtype = static_cast<DType>(v);
    expect_invalid([&] { dequantize(bad); }, value_note("dtype", v));
  }
  for (int v : kBadLayouts) {
    QuantizedMatrixView bad = w.view();
    bad.layout = static_cast<WeightLayout>(v);
    expect_invalid([&] { dequantize(bad); }, value_note("layout", v));
  }
}

TEST(EnumValues, LayoutConversionsRefuseABadDtypeOrLayout) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const QuantizedMatrix w = random_matrix(17, 256, 3, 64, DType::bf16, rng);
  const QuantizedMatrix f = to_mma_fragments(w.view());  // control, both ways
  EXPECT_EQ(to_mlx_layout(f.view()).packed, w.packed);
  for (int v : kBadDtypes) {
    QuantizedMatrixView bad_w = w.view(), bad_f = f.view();
    bad_w.dtype = bad_f.dtype = static_cast<DType>(v);
    expect_invalid([&] { to_mma_fragments(bad_w); }, value_note("dtype", v));
    expect_invalid([&] { to_mlx_layout(bad_f); }, value_note("dtype", v));
  }
  for (int v : kBadLayouts) {
    QuantizedMatrixView bad_w = w.view(), bad_f = f.view();
    bad_w.layout = bad_f.layout = static_cast<WeightLayout>(v);
    expect_invalid([&] { to_mma_fragments(bad_w); }, value_note("layout", v));
    expect_invalid([&] { to_mlx_layout(bad_f); }, value_note("layout", v));
  }
}

}  // namespace
}  // namespace exactq::test
