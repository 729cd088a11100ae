// The 32-lane xor butterfly of RMSNorm's and the dense mat-vec's sums (order/norm.h): after it,
// every lane holds add(add(...)) in the order the CPU mirror simulates.
#pragma once

#include "order/norm.h"

namespace exactq::cuda_detail {

__device__ __forceinline__ float warp_butterfly_sum(float acc) {
  for (int step = 0; step < order::kNormButterflySteps; ++step)
    acc = order::norm_butterfly_step(acc, __shfl_xor_sync(0xffffffffu, acc, order::norm_butterfly_mask(step)));
  return acc;
}

}  // namespace exactq::cuda_detail
