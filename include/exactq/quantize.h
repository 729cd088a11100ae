// Affine quantization, byte-compatible with MLX (`mx.quantize(w, group_size, bits)`).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exactq/format.h"

namespace exactq {

// MLX has two scale/bias rules (../shared/reference/mlx-format-and-kernels.md §1.3 and
// docs/design.md §1). Both take the extreme of larger magnitude as the bias and snap the scale
// so that 0 lies on the grid; they differ only in how the range and the codes are rounded.
enum class QuantRule {
  // The Metal/CUDA quantize kernel, which made most published checkpoints: the max starts at 0,
  // round half away from zero, codes clamped from above only. The default.
  mlx_gpu,
  // MLX's CPU quantizer: true min/max, round half to even (rint), codes clamped to [0, 2^bits-1].
  mlx_cpu,
};
// Throws std::invalid_argument naming the value when `rule` is none of the enumerators.
void validate_quant_rule(QuantRule rule);

// Quantizes a row-major [n, k] f32 matrix. Source weights in bf16/f16 widen to f32 exactly, so
// nothing is lost by taking f32 here. Scales and biases are stored in `dtype` (round to nearest
// even); the codes are computed with the unrounded f32 scale and bias, as MLX does.
// Throws std::invalid_argument on an invalid shape, dtype or rule, a size mismatch or a
// non-finite weight.
QuantizedMatrix quantize(std::span<const float> w, std::int64_t n, std::int64_t k, int bits, int group,
                         DType dtype, QuantRule rule = QuantRule::mlx_gpu);

// w = scale*q + bias per element, as an f32 multiply then an f32 add (no fma), row-major [n, k].
std::vector<float> dequantize(const QuantizedMatrixView& w);

}  // namespace exactq
