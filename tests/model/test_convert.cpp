// convert: a Hugging Face checkpoint (built here, dense weights) to MLX's layout, loaded back and
// dequantized by the test's own code (scale * q + bias), compared element by element with the
// original weights within the quantization error bound.
//
// The bound. MLX's rule (exactq/quantize.h) per group: step s = (hi - lo) / n, n = 2^bits - 1,
// snapped to s' = edge / round(edge / s) so that 0 is a grid point; codes q = round((w - b) / s')
// clamped to [0, n], with b = edge (exact). A code that was not clamped is off by at most half a
// step: |w - (s' q + b)| <= |s'| / 2. The snap can shrink the step so that the far end of the group
// lands past code n, by at most 0.5 (hi - lo) / |edge| <= 1 step: a clamped code is off by at most
// |s'|. The file stores s_b = s' rounded to the model dtype (relative error <= u, 2^-8 for bf16,
// 2^-11 for f16), and q <= n, so dequantizing with s_b adds at most n u |s'|. Hence, with
// |s'| <= |s_b| (1 + u):
//     |w - (s_b q + b)| <= |s_b| (1 + u) (1 + n u)          for every element, and
//     |w - (s_b q + b)| <= |s_b| (1 + u) (1/2 + n u)        for every element not clamped.
// A tiny absolute slack covers the f32 rounding of (w - b) / s' and groups of equal values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "checkpoint_fixture.h"
#include "exactq/checkpoint_writer.h"
#include "exactq/model.h"

namespace exactq::test {
namespace {

struct Errors {
  std::int64_t elements = 0, over_half_step = 0, over_bound = 0;  // over_half_step: codes below n only
};

// Compares a quantized view with the original [n, k] weights (in dtype `from`, cast to the
// view's dtype first, as convert does).
Errors compare(const QuantizedMatrixView& q, const TensorToWrite& original, DType from) {
  Errors e;
  const double u = q.dtype == DType::bf16 ? 0x1p-8 : q.dtype == DType::f16 ? 0x1p-11 : 0.0;
  const double levels = double((1 << q.bits) - 1);
  const std::int64_t row_bytes = q.k * q.bits / 8;
  for (std::int64_t r = 0; r < q.n; ++r)
    for (std::int64_t c = 0; c < q.k; ++c) {
      const std::size_t g = std::size_t(r * (q.k / q.group) + c / q.group);
      const double s = ref_load(q.scales.data(), g, q.dtype), b = ref_load(q.biases.data(), g, q.dtype);
      const std::uint32_t code = ref_unpack(q.packed.data() + r * row_bytes, c, q.bits);
      const double deq = s * code + b;
      const double w = ref_round_to(ref_load(original.data.data(), std::size_t(r * q.k + c), from), q.dtype);
      const double err = std::fabs(w - deq), slack = 1e-6 * std::fabs(s) + 1e-7;
      ++e.elements;
      // Past half a step only where the code was clamped at the far end (code n).
      e.over_half_step += code != std::uint32_t(levels) && err > std::fabs(s) * (1 + u) * (0.5 + levels * u) + slack;
      e.over_bound += err > std::fabs(s) * (1 + u) * (1 + levels * u) + slack;
    }
  return e;
}

struct Case {
  std::string type;
  DType stored;         // the HF tensors' dtype
  const char* torch;    // config's torch_dtype ("" for none)
  std::int64_t inter;   // 96: down_proj's K does not divide by 64 and stays dense
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.type << " stored " << dtype_name(c.stored) << " torch_dtype '" << c.torch << "' intermediate " << c.inter;
}

class ConvertRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(ConvertRoundTrip, DequantizesWithinTheBound) {
  const Case p = GetParam();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Tiny s;
  s.model_type = p.type;
  s.quantized = false;
  s.dtype = p.stored;
  s.inter = p.inter;
  Fixture f = tiny_fixture(s, rng);
  if (*p.torch) (f.config.contains("text_config") ? f.config["text_config"] : f.config)["torch_dtype"] = p.torch;
  TempDir dir;
  write_fixture(dir.path, f, 2);
  const ConvertResult r = convert_hf(dir.path.string(), (dir.path / "mlx").string(), {});
  const Checkpoint c = Checkpoint::open((dir.path / "mlx").string());
  const DType model = *p.torch ? (std::string(p.torch) == "bfloat16" ? DType::bf16 : DType::f16) : p.stored;
  EXPECT_EQ(c.dtype(), model);
  std::int64_t quantized = 0;
  for (const LinearView* l : c.linears()) {
    const TensorToWrite& original = f.at(l->path + ".weight");
    if (l->k % 64 != 0) {
      // Left dense in the model dtype, as MLX leaves it.
      ASSERT_FALSE(l->quantized) << l->path;
      EXPECT_EQ(l->weight.dtype, model);
      for (std::int64_t i = 0; i < l->n * l->k; i += 7)
        EXPECT_EQ(ref_load(l->weight.bytes.data(), std::size_t(i), model),
                  ref_round_to(ref_load(original.data.data(), std::size_t(i), p.stored), model));
      continue;
    }
    ASSERT_TRUE(l->quantized) << l->path;
    ++quantized;
    const Errors e = compare(l->q, original, p.stored);
    if (quantized == 1) {
      // The comparison can fail: against the original's rows rotated by one, most elements do.
      TensorToWrite rotated = original;
      const std::size_t row = rotated.data.size() / std::size_t(l->n);
      std::rotate(rotated.data.begin(), rotated.data.begin() + std::ptrdiff_t(row), rotated.data.end());
      EXPECT_GT(compare(l->q, rotated, p.stored).over_bound * 2, e.elements) << l->path;
    }
    EXPECT_EQ(e.over_bound, 0) << l->path << ": " << e.over_bound << " of " << e.elements << " past the bound";
    EXPECT_EQ(e.over_half_step, 0) << l->path << ": " << e.over_half_step << " unclamped codes off by more than half a step";
  }
  EXPECT_EQ(quantized, r.quantized_modules);
  // Norms and biases: the cast of the original, value for value.
  const DenseView& norm = c.final_norm();
  const TensorToWrite& norm0 = f.at(f.prefix + "model.norm.weight");
  for (std::size_t i = 0; i < std::size_t(s.hidden); ++i)
    EXPECT_EQ(ref_load(norm.bytes.data(), i, model), ref_round_to(ref_load(norm0.data.data(), i, p.stored), model));
  if (p.type == "qwen2") {
    ASSERT_TRUE(c.layers()[0].q_proj.bias.has_value());
  }
}

INSTANTIATE_TEST_SUITE_P(All, ConvertRoundTrip,
                         ::testing::Values(Case{"llama", DType::bf16, "bfloat16", 192}, Case{"qwen2", DType::f16, "", 192},
                                           Case{"qwen3", DType::f32, "bfloat16", 96}, Case{"gemma3", DType::bf16, "", 192},
                                           Case{"mistral", DType::f32, "float16", 96}),
                         [](const auto& info) { return info.param.type + "_" + std::to_string(info.index); });

TEST(Convert, RefusesWhatMlxLmWouldNotConvert) {
  std::mt19937_64 rng(fresh_seed());
  Tiny s;
  s.quantized = false;
  const Fixture f = tiny_fixture(s, rng);
  TempDir good;
  write_fixture(good.path, f);
  ASSERT_NO_THROW(convert_hf(good.path.string(), (good.path / "out").string(), {}));
  EXPECT_THROW(convert_hf(good.path.string(), (good.path / "out").string(), {}), std::invalid_argument);  // not empty
  ConvertOptions bad;
  bad.bits = 7;
  expect_invalid([&] { convert_hf(good.path.string(), (good.path / "o2").string(), bad); }, "7");

  Fixture extra = f;
  extra.tensors.push_back({"model.layers.0.mlp.extra.weight", StDType::BF16, {2}, std::vector<std::byte>(4)});
  TempDir a;
  write_fixture(a.path, extra);
  expect_invalid([&] { convert_hf(a.path.string(), (a.path / "out").string(), {}); }, "model.layers.0.mlp.extra.weight");
  Fixture missing = f;
  missing.erase("model.layers.1.self_attn.v_proj.weight");
  TempDir b;
  write_fixture(b.path, missing);
  expect_invalid([&] { convert_hf(b.path.string(), (b.path / "out").string(), {}); }, "model.layers.1.self_attn.v_proj.weight");
  Tiny q;
  const Fixture already = tiny_fixture(q, rng);
  TempDir d;
  write_fixture(d.path, already);
  expect_invalid([&] { convert_hf(d.path.string(), (d.path / "out").string(), {}); }, "already quantized");
}

}  // namespace
}  // namespace exactq::test
