#include "support/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace exactq {

namespace {
// How long a worker keeps watching for the next call before it sleeps: a decode step's ops follow
// each other within microseconds, so the workers stay awake through a step and sleep between
// requests. Spinning costs a core only while calls keep coming.
constexpr auto kSpin = std::chrono::microseconds(200);

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Returns once done(a's value) holds: spinning for kSpin, then sleeping until a changes.
template <typename T, typename Done>
void await(const std::atomic<T>& a, Done done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int spins = 0;; ++spins) {
    const T value = a.load(std::memory_order_acquire);
    if (done(value)) return;
    if (spins % 64 == 63 && std::chrono::steady_clock::now() > until)
      a.wait(value, std::memory_order_acquire);
    else
      relax();
  }
}
}  // namespace

struct WorkerPool::State {
  std::mutex serving;  // held by the caller for a whole run: one call at a time
  std::mutex control;  // guards the fields below
  void (*job)(void*) = nullptr;
  void* context = nullptr;
  unsigned open = 0;     // runs still to be claimed by workers
  unsigned claimed = 0;  // runs workers have claimed
  std::atomic<std::uint64_t> generation{0};  // a new call
  std::atomic<unsigned> finished{0};         // claimed runs that have returned
  std::vector<std::thread> threads;

  void work() {
    std::uint64_t seen = generation.load(std::memory_order_acquire);
    for (;;) {
      await(generation, [seen](std::uint64_t g) { return g != seen; });
      void (*mine)(void*) = nullptr;
      void* with = nullptr;
      {
        std::lock_guard<std::mutex> lock(control);
        seen = generation.load(std::memory_order_relaxed);
        if (open > 0) --open, ++claimed, mine = job, with = context;
      }
      if (mine) {
        mine(with);
        finished.fetch_add(1, std::memory_order_release);
        finished.notify_all();
      }
    }
  }
};

WorkerPool::WorkerPool(unsigned workers) : state_(new State) {
  // Where the system refuses a thread, the pool keeps the workers it has: fewer runs, the same
  // rows, the same bytes.
  try {
    for (unsigned i = 0; i < workers; ++i) state_->threads.emplace_back([s = state_] { s->work(); });
  } catch (const std::system_error&) {
  }
  for (auto& t : state_->threads) t.detach();
}

WorkerPool& WorkerPool::shared() {
  static WorkerPool* pool = new WorkerPool(std::max(1u, std::thread::hardware_concurrency()) - 1);
  return *pool;
}

unsigned WorkerPool::workers() const { return unsigned(state_->threads.size()); }

bool WorkerPool::run(unsigned helpers, void (*job)(void*), void* context) {
  State& s = *state_;
  std::unique_lock<std::mutex> serving(s.serving, std::try_to_lock);
  if (!serving.owns_lock()) return false;
  {
    std::lock_guard<std::mutex> lock(s.control);
    s.job = job, s.context = context;
    s.open = std::min(helpers, workers()), s.claimed = 0;
    s.finished.store(0, std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_release);
  }
  s.generation.notify_all();
  job(context);
  unsigned claimed = 0;
  {
    std::lock_guard<std::mutex> lock(s.control);
    s.open = 0;  // a worker waking now finds nothing to claim
    claimed = s.claimed;
  }
  await(s.finished, [claimed](unsigned done) { return done >= claimed; });
  return true;
}

}  // namespace exactq
