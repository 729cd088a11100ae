// Affine quantization, MLX's rule (docs/design.md §1). All arithmetic in f32, each operation
// rounded on its own (this file builds with -ffp-contract=off like the rest).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

#include "exactq/quantize.h"

namespace exactq {

namespace {

struct GroupParams {
  float scale;
  float bias;
};

GroupParams group_params(const float* v, int count, float levels, QuantRule rule) {
  float lo = FLT_MAX;
  float hi = rule == QuantRule::mlx_gpu ? 0.0f : -FLT_MAX;  // the GPU kernel starts max at 0
  for (int i = 0; i < count; ++i) {
    lo = std::min(lo, v[i]);
    hi = std::max(hi, v[i]);
  }
  float scale = std::max((hi - lo) / levels, 1e-7f);
  const bool lo_is_edge = std::fabs(lo) > std::fabs(hi);
  if (!lo_is_edge) scale = -scale;
  const float edge = lo_is_edge ? lo : hi;
  const float ratio = edge / scale;
  const float q0 = rule == QuantRule::mlx_gpu ? std::round(ratio) : std::rint(ratio);
  if (q0 != 0.0f) return {edge / q0, edge};
  return {scale, 0.0f};
}

std::uint32_t code_of(float v, GroupParams p, float levels, QuantRule rule) {
  const float ratio = (v - p.bias) / p.scale;
  const float q = rule == QuantRule::mlx_gpu ? std::round(ratio) : std::rint(ratio);
  // MLX's GPU rule clamps only from above because the ratio cannot be negative; the lower clamp
  // is kept for safety and never changes a code.
  return std::uint32_t(std::clamp(q, 0.0f, levels));
}

}  // namespace

void validate_quant_rule(QuantRule rule) {
  switch (rule) {
    case QuantRule::mlx_gpu:
    case QuantRule::mlx_cpu: return;
  }
  throw std::invalid_argument("[exactq] quant rule value " + std::to_string(static_cast<int>(rule)) +
                              " is not a QuantRule (mlx_gpu = 0, mlx_cpu = 1)");
}

QuantizedMatrix quantize(std::span<const float> w, std::int64_t n, std::int64_t k, int bits, int group,
                         DType dtype, QuantRule rule) {
  validate_shape(n, k, bits, group);
  validate_dtype(dtype);
  // group_params and code_of read any rule but mlx_gpu as mlx_cpu: refuse the others here.
  validate_quant_rule(rule);
  if (w.size() != std::size_t(n * k))
    throw std::invalid_argument("[exactq] quantize: weights have " + std::to_string(w.size()) +
                                " elements, expected N*K = " + std::to_string(n * k));
  QuantizedMatrix q = QuantizedMatrix::zeros(n, k, bits, group, dtype);
  const std::int64_t groups = k / group;
  const float levels = float((1 << bits) - 1);
  for (std::int64_t r = 0; r < n; ++r) {
    std::uint8_t* row = q.packed.data() + r * packed_row_bytes(k, bits);
    for (std::int64_t g = 0; g < groups; ++g) {
      const float* v = w.data() + r * k + g * group;
      for (int i = 0; i < group; ++i)
        if (!std::isfinite(v[i]))
          throw std::invalid_argument("[exactq] quantize: weight [" + std::to_string(r) + ", " +
                                      std::to_string(g * group + i) + "] = " + std::to_string(v[i]) +
                                      " is not finite");
      const GroupParams p = group_params(v, group, levels, rule);
      store_f32(q.scales.data(), std::size_t(r * groups + g), dtype, p.scale);
      store_f32(q.biases.data(), std::size_t(r * groups + g), dtype, p.bias);
      for (int i = 0; i < group; ++i) pack_code(row, g * group + i, bits, code_of(v[i], p, levels, rule));
    }
  }
  return q;
}

std::vector<float> dequantize(const QuantizedMatrixView& w) {
  w.validate();
  std::vector<float> out(std::size_t(w.n * w.k));
  const std::int64_t groups = w.groups_per_row();
  for (std::int64_t r = 0; r < w.n; ++r) {
    const std::uint8_t* row = w.packed.data() + r * w.row_bytes();
    for (std::int64_t k = 0; k < w.k; ++k) {
      const std::size_t p = std::size_t(r * groups + k / w.group);
      const float s = load_f32(w.scales.data(), p, w.dtype);
      const float b = load_f32(w.biases.data(), p, w.dtype);
      out[std::size_t(r * w.k + k)] = s * float(unpack_code(row, k, w.bits)) + b;
    }
  }
  return out;
}

}  // namespace exactq
