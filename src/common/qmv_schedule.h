// How the CUDA qmv spreads a launch's work over its warps: the arithmetic the launcher and the
// kernel share, kept here so the host can test it (tests/cpu/test_qmv_schedule.cpp). No value
// depends on it: every schedule adds each lane's chunks into its chain in increasing order.
//
// Work comes in tasks (ROWS rows) of `rounds` rounds (a chunk per lane per round).
// - Trips (the default): task t goes to warp t % slots, so warps run ceil(tasks / slots) tasks;
//   with a split, a partial last trip's tasks are cut into `split` runs of rounds.
// - Balanced (EXACTQ_QMV_BALANCED): block b takes the contiguous tasks block_tasks(b), and its
//   warps take equal runs of the block's (task, round) units, warp_units(w), in increasing order.
//   A run is walked in segments of one task each (run_segment). The warp whose segment holds a
//   task's round 0 owns the task; the other segments park their values for the owner. Only a
//   run's first segment can start after round 0, and only its last can end a task early.
#pragma once

#include <cstdint>

#include "exactq/dtype.h"  // EXACTQ_HD

namespace exactq::schedule {

struct Range {
  std::int64_t begin, end;
};

// Rounds of the busiest warp under trips: whole trips of `slots` tasks, then, with split > 1, the
// partial last trip's tasks each cut into split runs of ceil(rounds / split) rounds.
EXACTQ_HD std::int64_t trips_busiest_rounds(std::int64_t tasks, std::int64_t rounds, std::int64_t slots, int split) {
  if (split > 1) return tasks / slots * rounds + (tasks % slots > 0 ? (rounds + split - 1) / split : 0);
  return (tasks + slots - 1) / slots * rounds;
}

// Balanced: the tasks of block b of `blocks` (blocks <= tasks, so every block has one).
EXACTQ_HD Range block_tasks(std::int64_t tasks, std::int64_t blocks, std::int64_t b) {
  return {b * tasks / blocks, (b + 1) * tasks / blocks};
}
// The most units a block holds: what its park is sized for.
EXACTQ_HD std::int64_t max_block_units(std::int64_t tasks, std::int64_t blocks, std::int64_t rounds) {
  return (tasks + blocks - 1) / blocks * rounds;
}
// Warp w's run of a block's `units` (block-local unit u: task u / rounds, round u % rounds).
EXACTQ_HD Range warp_units(std::int64_t units, int warps, int w) { return {w * units / warps, (w + 1) * units / warps}; }
// Rounds of the busiest warp under the balanced schedule.
EXACTQ_HD std::int64_t balanced_busiest_rounds(std::int64_t tasks, std::int64_t rounds, std::int64_t blocks, int warps) {
  return (max_block_units(tasks, blocks, rounds) + warps - 1) / warps;
}

// The segment of a run that starts at unit u and ends before run_end: one task's rounds
// [round_begin, round_end). Block-local units fit an int (the park holds them all), and the
// kernel walks them in 32-bit arithmetic: 64-bit divisions there cost registers (spills).
struct Segment {
  int task;  // block-local
  int round_begin, round_end;
  EXACTQ_HD bool owner() const { return round_begin == 0; }
};
EXACTQ_HD Segment run_segment(int u, int run_end, int rounds) {
  const int begin = u % rounds, end = begin + (run_end - u);
  return {u / rounds, begin, end < rounds ? end : rounds};
}

}  // namespace exactq::schedule
