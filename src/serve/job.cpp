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

Progress Job::wait_progress(Seen& seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout,
                    [&] { return text_.size() > seen.text || tokens_.size() > seen.tokens || outcome_.has_value(); });
  Progress fresh;
  fresh.text = text_.substr(std::min(seen.text, text_.size()));
  const std::size_t from = std::min(seen.tokens, tokens_.size());
  fresh.tokens.assign(tokens_.begin() + std::ptrdiff_t(from), tokens_.end());
  if (logprobs_.size() > from) fresh.logprobs.assign(logprobs_.begin() + std::ptrdiff_t(from), logprobs_.end());
  seen = {text_.size(), tokens_.size()};
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

void Job::append(const std::string& piece, std::span<const std::int32_t> tokens, std::span<const TokenLogprobs> logprobs) {
  {
    std::lock_guard lock(mutex_);
    text_ += piece;
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    logprobs_.insert(logprobs_.end(), logprobs.begin(), logprobs.end());
  }
  changed_.notify_all();
}

void Job::finish(Outcome outcome) {
  {
    std::lock_guard lock(mutex_);
    if (outcome_) return;
    // The tokens not given yet (the one that completed a stop string, whose text is cut) come
    // with the outcome, so a consumer never sees a token past the text before the job is done.
    for (std::size_t i = tokens_.size(); i < outcome.tokens.size(); ++i) {
      tokens_.push_back(outcome.tokens[i]);
      if (i < outcome.logprobs.size() && logprobs_.size() == i) logprobs_.push_back(outcome.logprobs[i]);
    }
    outcome_ = std::move(outcome);
  }
  changed_.notify_all();
}

}  // namespace exactq::serve
