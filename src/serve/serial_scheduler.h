// The Scheduler of speculative decode: one worker thread owns the Engine (and through it the
// decoders) and runs the queued jobs one at a time, first in first out, each from position 0.
// Every response is thus the solo run's by construction. Classic decode batches instead
// (batch_scheduler.h).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "serve/engine.h"
#include "serve/job.h"

namespace exactq::serve {

class SerialScheduler final : public Scheduler {
 public:
  // max_queue: the jobs that may wait (the running one not counted); at least 1.
  SerialScheduler(Engine& engine, std::size_t max_queue);
  ~SerialScheduler() override;
  bool submit(const std::shared_ptr<Job>& job) override;
  std::size_t queue_depth() const override;
  void shutdown() override;

 private:
  void work();

  Engine& engine_;
  std::size_t max_queue_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::shared_ptr<Job> running_;
  bool closing_ = false;
  std::thread worker_;
};

}  // namespace exactq::serve
