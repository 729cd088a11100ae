// The order of a dense (unquantized) mat-vec: y_n = sum_k W[n, k] x_k for the linears a checkpoint
// keeps unquantized. cuBLAS and BLAS choose their reduction by shape and by M, so the engine does
// not call them; this sequence is the same whatever M is. docs/op-contract.md §6 is the prose.
//
//   acc[l] = +0 for l = 0..31
//   for k = l, l + 32, l + 64, ... < K (increasing):   acc[l] = fma(W[n, k], x_k, acc[l])
//   xor butterfly over the 32 lanes, masks 16, 8, 4, 2, 1:  acc[l] = add(acc[l], acc[l ^ mask])
//   y_n = T(acc[0])
//
// A warp per output row computes it as written (lane l reads W[n, l + 32 t], coalesced), the
// same shape as RMSNorm's sum of squares (norm.h). W and x are the stored values widened exactly.
#pragma once

#include <cstddef>

#include "order/norm.h"

namespace exactq::order {

inline constexpr int kDenseLanes = 32;

EXACTQ_HD float dense_lane_step(float acc, float w, float x) { return fma(w, x, acc); }

// One output of the CPU reference: row `n` of w (type wt, row length k) against x (k f32 values).
inline float dense_dot(const void* w, DType wt, std::int64_t n, const float* x, std::int64_t k) {
  float acc[kDenseLanes];
  const std::size_t row = std::size_t(n) * std::size_t(k);
  for (int l = 0; l < kDenseLanes; ++l) {
    acc[l] = 0.0f;
    for (std::int64_t i = l; i < k; i += kDenseLanes) acc[l] = dense_lane_step(acc[l], load_f32(w, row + std::size_t(i), wt), x[i]);
  }
  for (int step = 0; step < kNormButterflySteps; ++step) {
    const int mask = norm_butterfly_mask(step);
    float next[kDenseLanes];
    for (int l = 0; l < kDenseLanes; ++l) next[l] = norm_butterfly_step(acc[l], acc[l ^ mask]);
    for (int l = 0; l < kDenseLanes; ++l) acc[l] = next[l];
  }
  return acc[0];
}

}  // namespace exactq::order
