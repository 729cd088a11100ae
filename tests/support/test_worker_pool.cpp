// The shared workers behind parallel_rows: every row exactly once, whoever calls, however often,
// from however many threads, nested or not.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "support/parallel.h"
#include "support/worker_pool.h"
#include "test_util.h"

namespace exactq::test {
namespace {

// Counts how often each of n rows was visited by one parallel_rows call.
std::vector<int> visits(std::int64_t n, int threads) {
  std::vector<std::atomic<int>> seen(std::size_t(n > 0 ? n : 0));
  parallel_rows<3>(n, threads, [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t r = first; r < end; ++r) seen[std::size_t(r)].fetch_add(1);
  });
  std::vector<int> out;
  for (auto& s : seen) out.push_back(s.load());
  return out;
}

bool each_once(const std::vector<int>& v) {
  for (int c : v)
    if (c != 1) return false;
  return true;
}

TEST(WorkerPool, EveryRowOnceOverManyCalls) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int call = 0; call < 2000; ++call) {
    const std::int64_t n = std::int64_t(rng() % 200);
    const int threads = int(rng() % 9);  // 0: every core
    ASSERT_TRUE(each_once(visits(n, threads))) << "call " << call << ": n " << n << ", threads " << threads;
  }
}

TEST(WorkerPool, RunsTheJobOnTheCallerAndReturnsAfterEveryRun) {
  WorkerPool& pool = WorkerPool::shared();
  EXPECT_EQ(pool.workers() + 1, std::max(1u, std::thread::hardware_concurrency()));
  struct Work {
    std::atomic<std::int64_t> next{0}, done{0};
    std::int64_t tasks = 0;
  };
  for (std::int64_t tasks : {0, 1, 7, 1000}) {
    Work w;
    w.tasks = tasks;
    auto job = [](void* c) {
      Work& k = *static_cast<Work*>(c);
      for (std::int64_t t; (t = k.next.fetch_add(1)) < k.tasks;) k.done.fetch_add(1);
    };
    ASSERT_TRUE(pool.run(8, job, &w));
    EXPECT_EQ(w.done.load(), tasks) << "every task ran before run returned";
  }
  // The control: a job that takes no tasks from the counter leaves them undone.
  Work idle;
  idle.tasks = 5;
  ASSERT_TRUE(pool.run(1, [](void*) {}, &idle));
  EXPECT_EQ(idle.done.load(), 0);
}

TEST(WorkerPool, ConcurrentAndNestedCallersEachGetEveryRowOnce) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      std::mt19937_64 rng(seed + std::uint64_t(c));
      for (int call = 0; call < 200; ++call) {
        const std::int64_t n = 1 + std::int64_t(rng() % 64);
        // Nested: each outer row runs an inner parallel_rows, which finds the pool taken.
        std::vector<std::atomic<int>> inner(std::size_t(n * 5));
        parallel_rows<1>(n, 0, [&](std::int64_t first, std::int64_t end) {
          for (std::int64_t r = first; r < end; ++r)
            parallel_rows<1>(5, 2, [&](std::int64_t a, std::int64_t b) {
              for (std::int64_t i = a; i < b; ++i) inner[std::size_t(r * 5 + i)].fetch_add(1);
            });
        });
        for (auto& v : inner) bad += v.load() != 1;
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace exactq::test
