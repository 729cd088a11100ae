#include "serve/job.h"

namespace exactq::serve {

const char* to_string(Finish finish) {
  switch (finish) {
    case Finish::stop: return "stop";
    case Finish::length: return "length";
    case Finish::cancelled: return "cancelled";
    case Finish::failed: return "error";
  }
  return "error";
}

std::string Job::wait_text(std::size_t& seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return text_.size() > seen || outcome_.has_value(); });
  std::string fresh = text_.substr(std::min(seen, text_.size()));
  seen = text_.size();
  return fresh;
}

bool Job::done() const {
  std::lock_guard lock(mutex_);
  return outcome_.has_value();
}

const Outcome& Job::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return outcome_.has_value(); });
  return *outcome_;
}

void Job::append_text(const std::string& piece) {
  {
    std::lock_guard lock(mutex_);
    text_ += piece;
  }
  changed_.notify_all();
}

void Job::finish(Outcome outcome) {
  {
    std::lock_guard lock(mutex_);
    if (outcome_) return;
    outcome_ = std::move(outcome);
  }
  changed_.notify_all();
}

}  // namespace exactq::serve
