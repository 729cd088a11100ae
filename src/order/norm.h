// RMSNorm's order: one row of H values, the same sequence whatever the number of rows (M), the
// row's place in the batch or the threads that compute it. docs/op-contract.md §2 is the prose.
//
//   acc[l] = +0 for l = 0..31
//   for i = l, l + 32, l + 64, ... < H (increasing):   acc[l] = fma(x_i, x_i, acc[l])
//   xor butterfly over the 32 lanes, masks 16, 8, 4, 2, 1:  acc[l] = add(acc[l], acc[l ^ mask])
//   S     = acc[0]                       (every lane holds the same value: add commutes)
//   r     = rsqrt(add(div(S, float(H)), eps))    rsqrt = div(1, sqrt(.)), math.h
//   w'_i  = w_i, or add(1, w_i) where the model scales by (1 + w) (Gemma)
//   y_i   = mul(mul(x_i, r), w'_i)                then rounded once to the output type T
//
// A warp computes it as written: lane l loads x[l], x[l + 32], ... (coalesced), keeps one
// accumulator, and __shfl_xor_sync with the masks gives the butterfly, as qmv's (qmv.h). eps is
// the config's value rounded to f32 once, on the host (float(rms_norm_eps)); H is exact in f32
// for H < 2^24. x, w are the stored values widened exactly (dtype.h load_f32); y is rounded to T
// by store_f32 (nearest even, NaN canonical).
//
// Accuracy: every term of S is >= 0, so S's relative error is at most (H/32 + 5) 2^-24 (a
// chain of H/32 fmas, then 5 adds); r adds at most 1.5 ulp and the two multiplies 1 ulp.
// tests/order/test_norm_rope_attention.cpp checks y against float64 within that bound.
#pragma once

#include <cstddef>

#include "order/math.h"

namespace exactq::order {

inline constexpr int kNormLanes = 32;
inline constexpr int kNormButterflySteps = 5;
EXACTQ_HD constexpr int norm_butterfly_mask(int step) { return 16 >> step; }  // 16, 8, 4, 2, 1

EXACTQ_HD float norm_lane_step(float acc, float x) { return fma(x, x, acc); }
EXACTQ_HD float norm_butterfly_step(float own, float partner) { return add(own, partner); }
EXACTQ_HD float norm_inverse_rms(float sum_of_squares, int h, float eps) {
  return rsqrt(add(div(sum_of_squares, float(h)), eps));
}
EXACTQ_HD float norm_weight(float w, bool one_plus_w) { return one_plus_w ? add(1.0f, w) : w; }
EXACTQ_HD float norm_apply(float x, float inv_rms, float weight) { return mul(mul(x, inv_rms), weight); }

// S for one row, the 32 lanes simulated in the order above (the CPU mirror's definition).
inline float norm_sum_of_squares(const float* x, int h) {
  float acc[kNormLanes];
  for (int l = 0; l < kNormLanes; ++l) {
    acc[l] = 0.0f;
    for (int i = l; i < h; i += kNormLanes) acc[l] = norm_lane_step(acc[l], x[i]);
  }
  for (int step = 0; step < kNormButterflySteps; ++step) {
    const int mask = norm_butterfly_mask(step);
    float next[kNormLanes];
    for (int l = 0; l < kNormLanes; ++l) next[l] = norm_butterfly_step(acc[l], acc[l ^ mask]);
    for (int l = 0; l < kNormLanes; ++l) acc[l] = next[l];
  }
  return acc[0];
}

// The CPU reference on f32 values: y[i] before the rounding to T.
inline void rmsnorm_row(const float* x, const float* w, int h, float eps, bool one_plus_w, float* y) {
  const float r = norm_inverse_rms(norm_sum_of_squares(x, h), h, eps);
  for (int i = 0; i < h; ++i) y[i] = norm_apply(x[i], r, norm_weight(w[i], one_plus_w));
}

// The same on stored rows: x in type xt, w in type wt, y written in type yt (store_f32 rounds).
// `scratch` holds h floats.
inline void rmsnorm_row_stored(const void* x, DType xt, const void* w, DType wt, int h, float eps, bool one_plus_w,
                               void* y, DType yt, float* scratch) {
  for (int i = 0; i < h; ++i) scratch[i] = load_f32(x, std::size_t(i), xt);
  const float r = norm_inverse_rms(norm_sum_of_squares(scratch, h), h, eps);
  for (int i = 0; i < h; ++i)
    store_f32(y, std::size_t(i), yt, norm_apply(scratch[i], r, norm_weight(load_f32(w, std::size_t(i), wt), one_plus_w)));
}

}  // namespace exactq::order
