// The server's counters, rendered in Prometheus' text format for GET /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace exactq::serve {

class Metrics {
 public:
  void count_response(int status);
  // A finished generation: its tokens and the seconds the worker spent on it.
  void count_generation(std::int64_t prompt_tokens, std::int64_t tokens, double seconds);
  void count_speculation(std::int64_t drafted, std::int64_t accepted);
  // A forward of the batch scheduler and the requests it ran (1 to 256).
  void count_batch(std::int64_t width);
  std::string render(std::size_t queue_depth, bool speculative) const;

 private:
  mutable std::mutex mutex_;
  std::map<int, std::int64_t> responses_;
  std::int64_t prompt_tokens_ = 0, tokens_ = 0, generations_ = 0;
  double seconds_ = 0;
  std::int64_t drafted_ = 0, accepted_ = 0;
  std::map<std::int64_t, std::int64_t> batches_;  // forwards by width
};

}  // namespace exactq::serve
