// The arithmetic contract's primitives: every floating-point step of every op is one of these,
// rounded to nearest even in f32. The CPU side builds with -ffp-contract=off and calls std::fma and
// plain + and *; the CUDA side calls the _rn intrinsics. Nothing is left to the compiler to contract,
// so host and device give the same bytes (docs/design.md §0).
#pragma once

#include <cmath>

#include "exactq/dtype.h"

namespace exactq::order {

EXACTQ_HD float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
EXACTQ_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
EXACTQ_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
// Division and square root, each correctly rounded (IEEE 754), so they are as reproducible as
// add and mul: __fdiv_rn and __fsqrt_rn on the GPU (never the approximate a/b or sqrtf that
// -use_fast_math or -prec-div=false would give), / and std::sqrt on the CPU.
EXACTQ_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
EXACTQ_HD float sqrt(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

}  // namespace exactq::order
