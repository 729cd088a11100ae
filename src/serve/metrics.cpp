#include "serve/metrics.h"

#include <fmt/format.h>

namespace exactq::serve {

void Metrics::count_response(int status) {
  std::lock_guard lock(mutex_);
  ++responses_[status];
}

void Metrics::count_generation(std::int64_t prompt_tokens, std::int64_t tokens, double seconds) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt_tokens;
  tokens_ += tokens;
  seconds_ += seconds;
  ++generations_;
}

void Metrics::count_speculation(std::int64_t drafted, std::int64_t accepted) {
  std::lock_guard lock(mutex_);
  drafted_ += drafted;
  accepted_ += accepted;
}

void Metrics::count_batch(std::int64_t width) {
  std::lock_guard lock(mutex_);
  ++batches_[width];
}

std::string Metrics::render(std::size_t queue_depth, bool speculative) const {
  std::lock_guard lock(mutex_);
  std::string out;
  out += "# HELP exactq_requests_total HTTP responses by status code.\n# TYPE exactq_requests_total counter\n";
  for (const auto& [status, n] : responses_) out += fmt::format("exactq_requests_total{{status=\"{}\"}} {}\n", status, n);
  out += fmt::format("# HELP exactq_generations_total Generations the worker ran to their end or cancellation.\n"
                     "# TYPE exactq_generations_total counter\nexactq_generations_total {}\n", generations_);
  out += fmt::format("# HELP exactq_prompt_tokens_total Prompt tokens prefilled.\n"
                     "# TYPE exactq_prompt_tokens_total counter\nexactq_prompt_tokens_total {}\n", prompt_tokens_);
  out += fmt::format("# HELP exactq_generated_tokens_total Tokens generated.\n"
                     "# TYPE exactq_generated_tokens_total counter\nexactq_generated_tokens_total {}\n", tokens_);
  out += fmt::format("# HELP exactq_generation_seconds_total Seconds the worker spent generating.\n"
                     "# TYPE exactq_generation_seconds_total counter\nexactq_generation_seconds_total {:.6f}\n", seconds_);
  out += fmt::format("# HELP exactq_tokens_per_second Generated tokens per second of generation, over the server's life.\n"
                     "# TYPE exactq_tokens_per_second gauge\nexactq_tokens_per_second {:.3f}\n",
                     seconds_ > 0 ? double(tokens_) / seconds_ : 0.0);
  out += fmt::format("# HELP exactq_queue_depth Requests waiting for the worker.\n"
                     "# TYPE exactq_queue_depth gauge\nexactq_queue_depth {}\n", queue_depth);
  out += "# HELP exactq_batch_width Requests run in each step of the batch scheduler (a step: one forward, or two with verify blocks).\n"
         "# TYPE exactq_batch_width histogram\n";
  std::int64_t count = 0, sum = 0;
  for (const auto& [width, n] : batches_) count += n, sum += width * n;
  for (std::int64_t le = 1; le <= 256; le *= 2) {
    std::int64_t below = 0;
    for (const auto& [width, n] : batches_) below += width <= le ? n : 0;
    out += fmt::format("exactq_batch_width_bucket{{le=\"{}\"}} {}\n", le, below);
  }
  out += fmt::format("exactq_batch_width_bucket{{le=\"+Inf\"}} {}\nexactq_batch_width_sum {}\nexactq_batch_width_count {}\n",
                     count, sum, count);
  if (speculative) {
    out += fmt::format("# HELP exactq_draft_tokens_total Draft tokens proposed.\n"
                       "# TYPE exactq_draft_tokens_total counter\nexactq_draft_tokens_total {}\n", drafted_);
    out += fmt::format("# HELP exactq_draft_accepted_total Draft tokens accepted.\n"
                       "# TYPE exactq_draft_accepted_total counter\nexactq_draft_accepted_total {}\n", accepted_);
    out += fmt::format("# HELP exactq_draft_acceptance Accepted over proposed draft tokens.\n"
                       "# TYPE exactq_draft_acceptance gauge\nexactq_draft_acceptance {:.4f}\n",
                       drafted_ > 0 ? double(accepted_) / double(drafted_) : 0.0);
  }
  return out;
}

}  // namespace exactq::serve
