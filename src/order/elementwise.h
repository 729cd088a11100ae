// The decoder's elementwise steps: each output element depends on the same elements of its
// inputs only, is computed in f32 from the stored values widened exactly, and is rounded once to
// the activation type T (store_f32). docs/op-contract.md §6 is the prose.
//
//   embedding row of a quantized table:   e_i   = fma(scale_g, float(q_i), bias_g)   g = i / group
//   gated MLP:                            y_i   = mul(act(gate_i), up_i)   act: silu or gelu_tanh
//   residual add, bias add:               y_i   = add(a_i, b_i)
//   constant scale (Gemma's embedding):   y_i   = mul(x_i, c)    c = T(sqrt(hidden)), set on the host
#pragma once

#include <cstdint>

#include "order/math.h"

namespace exactq::order {

EXACTQ_HD float dequantize(float scale, std::uint32_t code, float bias) { return fma(scale, float(code), bias); }

// act: 0 silu, 1 gelu_tanh (exactq::Activation's values).
EXACTQ_HD float gated(float gate, float up, int act) { return mul(act == 0 ? silu(gate) : gelu_tanh(gate), up); }

EXACTQ_HD float residual(float a, float b) { return add(a, b); }

EXACTQ_HD float scaled(float x, float c) { return mul(x, c); }

}  // namespace exactq::order
