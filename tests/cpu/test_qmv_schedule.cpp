// The CUDA qmv's work schedules (src/common/qmv_schedule.h), checked on the host against a
// brute-force walk of what the kernel does with them: under trips, the busiest warp's rounds;
// under the balanced schedule, that every (task, round) is run exactly once, by a warp of the
// task's block, that each task has one owner whose segment comes where the kernel can wait for
// the parked rounds, and that the park and the busiest warp are what the launcher sizes them as.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/qmv_schedule.h"
#include "test_util.h"

namespace exactq::test {
namespace {

// Trips as the kernel runs them: task t of the whole trips to warp t % slots; with split > 1
// the partial last trip's task j to warps j * split + part, part p taking rounds
// [p * ceil(R / split), (p + 1) * ceil(R / split)) clipped to R.
std::int64_t walk_trips(std::int64_t tasks, std::int64_t rounds, std::int64_t slots, int split) {
  std::vector<std::int64_t> busy(std::size_t(slots), 0);
  const std::int64_t whole = split > 1 ? tasks / slots * slots : tasks;
  for (std::int64_t t = 0; t < whole; ++t) busy[std::size_t(t % slots)] += rounds;
  const std::int64_t part_rounds = (rounds + split - 1) / split;
  for (std::int64_t t = whole; t < tasks; ++t)
    for (int part = 0; part < split; ++part) {
      const std::int64_t begin = part * part_rounds, end = std::min(rounds, begin + part_rounds);
      busy[std::size_t((t - whole) * split + part)] += std::max<std::int64_t>(0, end - begin);
    }
  return *std::max_element(busy.begin(), busy.end());
}

TEST(QmvSchedule, TripsBusiestRoundsMatchesTheWalk) {
  for (std::uint64_t seed : seeds_with_fresh({3})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int trial = 0; trial < 2000; ++trial) {
      const std::int64_t slots = std::int64_t(rng() % 300 + 1), tasks = std::int64_t(rng() % 2000 + 1);
      const std::int64_t rounds = std::int64_t(rng() % 20 + 1);
      const int split = std::vector<int>{1, 2, 4}[rng() % 3];
      if (split > 1 && ((tasks % slots) * split > slots || rounds < split)) continue;  // the launcher's rule
      ASSERT_EQ(schedule::trips_busiest_rounds(tasks, rounds, slots, split), walk_trips(tasks, rounds, slots, split))
          << "tasks " << tasks << " rounds " << rounds << " slots " << slots << " split " << split;
    }
  }
}

TEST(QmvSchedule, BalancedRunsCoverEveryRoundOnceWithOneOwner) {
  for (std::uint64_t seed : seeds_with_fresh({4})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    std::int64_t parked = 0, waiting = 0, idle_warps = 0;
    for (int trial = 0; trial < 1500; ++trial) {
      const std::int64_t blocks = std::int64_t(rng() % 300 + 1);
      const std::int64_t tasks = blocks + std::int64_t(rng() % 3000);
      const int rounds = int(rng() % 20 + 1), warps = rng() % 2 ? 8 : 16;
      SCOPED_TRACE("tasks " + std::to_string(tasks) + " blocks " + std::to_string(blocks) + " rounds " +
                   std::to_string(rounds) + " warps " + std::to_string(warps));
      std::vector<int> runs(std::size_t(tasks * rounds), 0), owners(std::size_t(tasks), 0);
      std::int64_t busiest = 0, covered_tasks = 0;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const schedule::Range block = schedule::block_tasks(tasks, blocks, b);
        ASSERT_EQ(block.begin, covered_tasks);  // contiguous, in order, none empty
        ASSERT_GT(block.end, block.begin);
        covered_tasks = block.end;
        const std::int64_t units = (block.end - block.begin) * rounds;
        ASSERT_LE(units, schedule::max_block_units(tasks, blocks, rounds));  // fits the park
        for (int w = 0; w < warps; ++w) {
          const schedule::Range run = schedule::warp_units(units, warps, w);
          busiest = std::max(busiest, run.end - run.begin);
          idle_warps += run.end == run.begin;
          int segments = 0;
          for (std::int64_t u = run.begin; u < run.end; ++segments) {
            const schedule::Segment s = schedule::run_segment(int(u), int(run.end), rounds);
            ASSERT_LT(s.round_begin, s.round_end);
            ASSERT_EQ(s.task, u / rounds);
            if (!s.owner()) ASSERT_EQ(segments, 0) << "a segment after round 0 that is not its run's first";
            for (int r = s.round_begin; r < s.round_end; ++r) ++runs[std::size_t((block.begin + s.task) * rounds + r)];
            owners[std::size_t(block.begin + s.task)] += s.owner();
            u += s.round_end - s.round_begin;
            if (s.owner() && s.round_end < rounds) {
              ASSERT_EQ(u, run.end) << "an owner that ends its task early must be its run's last segment";
              ++waiting;
            }
            parked += s.owner() ? 0 : s.round_end - s.round_begin;
          }
        }
      }
      ASSERT_EQ(covered_tasks, tasks);
      for (int n : runs) ASSERT_EQ(n, 1);
      for (int n : owners) ASSERT_EQ(n, 1);
      ASSERT_EQ(busiest, schedule::balanced_busiest_rounds(tasks, rounds, blocks, warps));
    }
    // The data reached every case the kernel distinguishes.
    EXPECT_GT(parked, 0);
    EXPECT_GT(waiting, 0);
    EXPECT_GT(idle_warps, 0);
  }
}

// Where the launcher takes the balanced schedule (decision 0003, session 19): the counts worked
// by hand for 4-row tasks on 132 SMs with two blocks of 8 warps (2112 warps).
TEST(QmvSchedule, BalancedHelpsWhereTripsLeaveWarpsIdle) {
  // Qwen's down projection, 5120x17408: 1280 tasks of 17 rounds, no split.
  EXPECT_EQ(schedule::trips_busiest_rounds(1280, 17, 2112, 1), 17);
  EXPECT_EQ(schedule::balanced_busiest_rounds(1280, 17, 264, 8), 11);  // 5 tasks * 17 / 8
  // Llama's gate/up, 14336x4096: 3584 tasks of 4 rounds, two trips.
  EXPECT_EQ(schedule::trips_busiest_rounds(3584, 4, 2112, 1), 8);
  EXPECT_EQ(schedule::balanced_busiest_rounds(3584, 4, 264, 8), 7);  // 14 tasks * 4 / 8
  // Gemma's head, 262144x3840: 65536 tasks of 4 rounds, the last trip split 4 ways: no gain.
  EXPECT_EQ(schedule::trips_busiest_rounds(65536, 4, 2112, 4), 125);
  EXPECT_EQ(schedule::balanced_busiest_rounds(65536, 4, 264, 8), 125);  // 249 tasks * 4 / 8
}

}  // namespace
}  // namespace exactq::test
