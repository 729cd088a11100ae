// Greedy decoding's choice: the index of the largest logit. docs/op-contract.md §5.
//
// - A NaN never wins; if every value is NaN (or n == 0) the answer is 0.
// - Ties go to the lowest index (+0 and -0 tie; -inf is an ordinary value).
// The rule is a total order on (value, index) pairs, so any reduction tree gives the same index:
// a GPU may reduce lanes, warps and blocks in any shape with argmax_better.
#pragma once

#include <cstdint>

#include "order/math.h"

namespace exactq::order {

// Whether candidate (v, i) beats the current best (best_v, best_i); best_i < 0: none yet.
EXACTQ_HD bool argmax_better(float v, std::int64_t i, float best_v, std::int64_t best_i) {
  if (is_nan(v)) return false;
  if (best_i < 0) return true;
  return v > best_v || (v == best_v && i < best_i);
}

EXACTQ_HD std::int64_t argmax(const float* x, std::int64_t n) {
  float best_v = 0.0f;
  std::int64_t best_i = -1;
  for (std::int64_t i = 0; i < n; ++i)
    if (argmax_better(x[i], i, best_v, best_i)) {
      best_v = x[i];
      best_i = i;
    }
  return best_i < 0 ? 0 : best_i;
}

}  // namespace exactq::order
