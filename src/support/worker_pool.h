// The process's worker threads for parallel_rows: started on first use and kept, so that a call
// costs a wake-up (nothing at all while the workers are still spinning from the call before)
// instead of a thread start and join, which took tens of microseconds: more than a small
// matrix's product on one core.
#pragma once

namespace exactq {

class WorkerPool {
 public:
  // The pool every parallel_rows shares: one worker per hardware thread but the caller's.
  static WorkerPool& shared();

  // Runs job(context) on the calling thread and on up to `helpers` workers at once, and returns
  // true when every run has returned. A worker that wakes after the caller's own run has returned
  // is not started: the job must take its work from a shared counter, so that any number of runs,
  // one or more, completes it. Returns false without running anything where the pool is serving
  // another call (another thread's, or the one this call is nested in): the caller then does the
  // work another way.
  bool run(unsigned helpers, void (*job)(void*), void* context);

  unsigned workers() const;

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

 private:
  explicit WorkerPool(unsigned workers);
  ~WorkerPool() = delete;  // lives until the process ends: no static destructor may outlive it
  struct State;
  State* state_;
};

}  // namespace exactq
