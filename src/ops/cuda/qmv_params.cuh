// The launch parameters of the qmv family (qmv, qmv_streamed) and of qmv_wide.
#pragma once

#include <cstdint>

#include "exactq/dtype.h"

namespace exactq::cuda_detail {

struct QmvParams {
  const std::uint8_t* packed;
  const void* scales;
  const void* biases;
  const void* x;
  void* y;
  std::int64_t n, k;
  std::int64_t vector_offset;  // first vector of this launch
  int group;
  int tile_values;  // K tile staged at a time (multiple of 1024)
  DType dtype;
  // qmv, one K tile: warps per task of the last trip (1 to 4, a divisor of the block's warps), K
  // cut into that many runs of rounds.
  int split;
  int l2_prefetch_rounds;  // qmv: rows' bytes this many rounds beyond the register prefetch go to L2 (0: none)
  // qmv with the norm in its staging (family_norm.cuh): x is the residual h, these the rest.
  const void* norm_weight = nullptr;
  const void* delta = nullptr;  // null: x = h
  void* h_out = nullptr;        // where h + delta goes (null: nowhere)
  float eps = 0.0f;
  bool one_plus_weight = false;
};

}  // namespace exactq::cuda_detail
