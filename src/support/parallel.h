// Row-parallel loops, for work whose rows are independent (the CPU kernels, the layout
// conversion): how rows are spread over threads cannot change any output byte.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

#include "support/worker_pool.h"

namespace exactq {

// Runs body(first_row, end_row) over [0, n) in blocks of kRowsPerTask rows, on `threads` workers
// (0 = all cores; at most the cores, where the shared pool runs them). Rows that are each a large
// piece of work take kRowsPerTask = 1.
template <std::int64_t kRowsPerTask = 16, typename Body>
void parallel_rows(std::int64_t n, int threads, Body&& body) {
  unsigned workers = threads > 0 ? unsigned(threads) : std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t tasks = (n + kRowsPerTask - 1) / kRowsPerTask;
  if (std::int64_t(workers) > tasks) workers = unsigned(std::max<std::int64_t>(1, tasks));
  std::atomic<std::int64_t> next{0};
  auto work = [&] {
    for (std::int64_t t; (t = next.fetch_add(1)) < tasks;)
      body(t * kRowsPerTask, std::min(n, (t + 1) * kRowsPerTask));
  };
  if (workers <= 1) return work();
  // The shared workers where they are free; else (another thread's call holds them, or this call
  // runs inside one of theirs) threads of its own.
  if (WorkerPool::shared().run(workers - 1, [](void* w) { (*static_cast<decltype(work)*>(w))(); }, &work)) return;
  std::vector<std::thread> pool;
  // Where the system refuses a thread (its limit reached), the workers already started and this
  // one share all the tasks: fewer threads, the same rows, the same bytes.
  try {
    for (unsigned i = 1; i < workers; ++i) pool.emplace_back(work);
  } catch (const std::system_error&) {
  }
  work();
  for (auto& t : pool) t.join();
}

}  // namespace exactq
