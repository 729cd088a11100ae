// The CPU attention's per-chunk steps on each instruction set (attention_scalar.cpp,
// attention_avx2.cpp, attention_avx512.cpp); attention.cpp runs the order's chunk loop
// (order/attention.h) and calls these for the work that is wide. Every step keeps each of the
// order's chains as it is and puts independent chains side by side: a key's eight score partials
// in eight lanes (several keys per register), one output dim per lane for o_c and the fold, one
// key per lane for e_j. The query heads of a GQA group share every K and V row loaded.
#pragma once

#include <cstddef>

#include "exactq/dtype.h"
#include "exactq/qmv.h"

namespace exactq::cpu {

inline constexpr int kAttentionHeads = 8;  // query heads per call, at most

struct AttentionKernels {
  // s[h * kAttentionChunk + j] = order::attention_score of key row j (keys + j * stride bytes)
  // with the scaled query q[h * q_stride ...], for h < heads, j < count.
  void (*scores)(const float* q, std::size_t q_stride, int heads, const std::byte* keys, std::size_t stride,
                 int count, int d, DType t, float* s);
  // s_j = order::attention_weight(s_j, m) for j < count, in place.
  void (*weights)(float* s, int count, float m);
  // o[h * o_stride + i] = sum over j < count of e[h * kAttentionChunk + j] v_j,i as order's chain
  // (fma from +0, j increasing), for h < heads, i < d; v_j at values + j * stride bytes.
  void (*weighted_values)(const float* e, int heads, const std::byte* values, std::size_t stride, int count, int d,
                          DType t, float* o, std::size_t o_stride);
  // o_i = order::attention_fold_value(o_i, o_c,i, {_, a, b}) for i < n.
  void (*fold)(float* o, const float* o_c, int n, float a, float b);
};

// The kernels of an instruction set this CPU has (isa_available).
const AttentionKernels& attention_kernels(Isa isa);

namespace attention_detail {
extern const AttentionKernels scalar, avx2, avx512;
}

}  // namespace exactq::cpu
