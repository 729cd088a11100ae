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
  // The fused norm's epilogue (family_epilogue.cuh; Backend's LinearEpilogue): y as stored
  // (kStore), or the rows taken in pairs (row a, row a + pair_run) over the first paired_rows rows,
  // each pair by one warp: kGated writes the gated activation of the pair (gate, up) to y [m, n/2];
  // kRopeWrite rotates the pairs of q and k (the first paired_rows rows) and writes the k and v
  // rows (from q_rows on) to keys and values at the vector's position as well.
  int epilogue = 0;
  int pair_run = 0, pair_shift = 0;  // pair_shift: log2(pair_run) where it is a power of two
  std::int64_t paired_rows = 0;
  int activation = 0;                       // kGated
  std::int64_t q_rows = 0, head_dim = 0;    // kRopeWrite: heads * head_dim, and head_dim
  bool interleaved = false;
  const std::int32_t* positions = nullptr;  // one per vector
  const std::int32_t* cache_at = nullptr;   // one per vector: its cache row (Backend::rope_write's cache_rows)
  const std::uint64_t* steps = nullptr;     // head_dim / 2 phase steps
  void* keys = nullptr;
  void* values = nullptr;
  std::int64_t cache_rows = 0;              // rows that keys and values hold
};

enum QmvEpilogueKind : int { kStore = 0, kGated = 1, kRopeWrite = 2 };

}  // namespace exactq::cuda_detail
