// The fused norm's epilogue (Backend::norm_qmv's LinearEpilogue): the op after the linear, done on
// its rows as they are stored, with the bytes of that op run on y afterwards.
//
// The op takes rows in pairs: the gated activation pairs gate row j with up row I + j; RoPE pairs
// row a of a q or k head with row a + head_dim / 2 (row a + 1 when interleaved). Each pair must be
// in one warp, so the kernel's tasks are made of pairs: a task's first ROWS / 2 rows are the first
// rows of ROWS / 2 consecutive pairs and its last ROWS / 2 their second rows (task_row). Which
// rows a task takes moves no bit: every row's chain is its own (docs/design.md §3). After the
// butterfly the lanes of row i hold its total, and row i + ROWS / 2's total is 16 lanes away; the
// first lane of row i rounds both as y would hold them and applies the op to the two values.
//
// Rows past the paired ones (v of a stacked q/k/v) are tasks of ROWS consecutive rows, stored as
// they are (and written to the value cache).
#pragma once

#include "ops/cuda/common.cuh"
#include "ops/cuda/family_butterfly.cuh"
#include "ops/cuda/qmv_params.cuh"
#include "order/elementwise.h"
#include "order/rope.h"

namespace exactq::cuda_detail {

// Whether the epilogue's pairs tile the tasks of ROWS rows: n and the paired rows whole tasks, the
// paired rows whole runs of pairs, a run either all of them (gated) or a power of two (RoPE's
// head_dim / 2, or 1 interleaved), so that task_row needs no division.
template <int ROWS>
inline bool epilogue_fits(const QmvParams& p, std::int64_t n) {
  if (p.epilogue == kStore) return true;
  if (ROWS % 2 != 0 || p.pair_run < 1 || n % ROWS != 0 || n >= (std::int64_t(1) << 30)) return false;
  if (p.paired_rows % (2 * p.pair_run) != 0 || p.paired_rows > n) return false;
  if (p.paired_rows != 2 * std::int64_t(p.pair_run) && (p.pair_run & (p.pair_run - 1)) != 0) return false;
  if (p.epilogue == kGated) return p.paired_rows == n;
  return p.epilogue == kRopeWrite && p.q_rows <= p.paired_rows && p.head_dim > 0 && p.positions && p.cache_at &&
         p.steps;
}

// The row that row r of task `task` computes: with an epilogue, pairs first (see above). Pair j's
// first row is j in a single run, else j's run (j / pair_run, a shift) times 2 pair_run plus j's
// place in it.
template <int ROWS>
__device__ __forceinline__ std::int64_t task_row(const QmvParams& p, std::int64_t task, int r) {
  if (p.epilogue == kStore) return task * ROWS + r;
  const int paired_tasks = int(p.paired_rows / ROWS), t = int(task);
  if (t >= paired_tasks) return p.paired_rows + std::int64_t(t - paired_tasks) * ROWS + r;
  constexpr int kHalf = ROWS / 2;
  const int pair = t * kHalf + (r % kHalf), run = p.pair_run;
  const int first = pair < run ? pair : ((pair >> p.pair_shift) << (p.pair_shift + 1)) + (pair & (run - 1));
  return r < kHalf ? first : first + run;
}

// A float as a stored T holds it.
__device__ __forceinline__ float stored_value(float v, DType t) {
  std::uint32_t bits = 0;
  store_f32(&bits, 0, t, v);
  return load_f32(&bits, 0, t);
}

// The store of a V = 1 task's ROWS totals (held[r] for task row r) through the epilogue, for
// vector v0. Called by every lane of the warp (it shuffles).
template <int ROWS>
__device__ __forceinline__ void epilogue_store(const float (&held)[ROWS], const QmvParams& p, std::int64_t v0,
                                               std::int64_t task, int lane, bool active, int part) {
  constexpr int kShift = kScatterShift<ROWS>, kHalf = ROWS / 2;
  static_assert(kShift >= 0 && ROWS % 2 == 0 && 16 >> kShift == kHalf, "row i + ROWS / 2 is 16 lanes away");
  const float mine = butterfly_scatter<ROWS>(held, lane);  // total lane >> kShift
  const float value = stored_value(mine, p.dtype);
  const float second = __shfl_xor_sync(0xffffffffu, value, 16);
  const int i = lane >> kShift;
  if (!active || part != 0 || (lane & ((1 << kShift) - 1)) != 0) return;
  const std::int64_t row = task_row<ROWS>(p, task, i);
  const std::int64_t kv_row = p.paired_rows - p.q_rows;  // rope_write: a cache row's values
  const std::int64_t position = p.epilogue == kRopeWrite ? p.positions[v0] : 0;
  const std::int64_t cache_row = p.epilogue == kRopeWrite ? p.cache_at[v0] : 0;
  const bool cached = cache_row >= 0 && cache_row < p.cache_rows;
  if (row >= p.paired_rows) {  // a v row
    store_f32(p.y, std::size_t(v0 * p.n + row), p.dtype, mine);
    if (cached) store_f32(p.values, std::size_t(cache_row * kv_row + row - p.paired_rows), p.dtype, mine);
    return;
  }
  if (i >= kHalf) return;  // the pair's first row's lane stores the pair
  const std::int64_t partner = row + p.pair_run;
  if (p.epilogue == kGated) {
    store_f32(p.y, std::size_t(v0 * (p.n / 2) + row), p.dtype, order::gated(value, second, p.activation));
    return;
  }
  const std::int64_t in_head = row % p.head_dim, pair = p.interleaved ? in_head / 2 : in_head;
  const order::CosSin cs = order::cos_sin_of_phase(order::rope_phase(std::uint64_t(position < 0 ? 0 : position), p.steps[pair]));
  float y1, y2;
  order::rope_rotate_pair(value, second, cs, y1, y2);
  store_f32(p.y, std::size_t(v0 * p.n + row), p.dtype, y1);
  store_f32(p.y, std::size_t(v0 * p.n + partner), p.dtype, y2);
  if (row >= p.q_rows && cached) {
    const std::int64_t at = cache_row * kv_row - p.q_rows;
    store_f32(p.keys, std::size_t(at + row), p.dtype, y1);
    store_f32(p.keys, std::size_t(at + partner), p.dtype, y2);
  }
}

}  // namespace exactq::cuda_detail
