#include "serve/serial_scheduler.h"

#include <stdexcept>

namespace exactq::serve {

SerialScheduler::SerialScheduler(Engine& engine, std::size_t max_queue) : engine_(engine), max_queue_(max_queue) {
  if (max_queue_ < 1) throw std::invalid_argument("the queue must hold at least one request");
  worker_ = std::thread([this] { work(); });
}

SerialScheduler::~SerialScheduler() { shutdown(); }

bool SerialScheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mutex_);
    if (closing_ || queue_.size() >= max_queue_) return false;
    queue_.push_back(job);
  }
  wake_.notify_one();
  return true;
}

std::size_t SerialScheduler::queue_depth() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void SerialScheduler::shutdown() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
    for (const auto& job : queue_) job->cancel();
    if (running_) running_->cancel();
  }
  wake_.notify_one();
  if (worker_.joinable()) worker_.join();
}

void SerialScheduler::work() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_ = job;
    }
    engine_.run(*job);  // a cancelled job (shutdown, a client gone) finishes at its next token
    std::lock_guard lock(mutex_);
    running_.reset();
  }
}

}  // namespace exactq::serve
