// Continuous batching for classic decode: one worker thread runs every admitted job in the same
// forward, each in its own sequence of the decoder's cache (Decoder::forward over parts). Jobs
// are admitted at step boundaries as sequences free up; a step runs each new job's prompt and
// each running job's last token, then picks every job's next token from its own row.
//
// Every row's logits are the bytes its sequence gets alone (the forward is width-invariant and a
// row reads only its own sequence's cache), and a token is picked from its row and position alone
// (greedy: the argmax; sampled: sample_token by (seed, position)), through the same JobRun as
// Engine::run: each response is the solo run's, byte for byte, whatever else runs beside it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "exactq/decoder.h"
#include "exactq/tokenizer.h"
#include "serve/engine.h"
#include "serve/job.h"
#include "serve/metrics.h"

namespace exactq::serve {

class BatchScheduler final : public Scheduler {
 public:
  // Up to decoder.sequences() jobs at once; max_queue jobs may wait (at least 1).
  BatchScheduler(Decoder& decoder, const Tokenizer& tokenizer, Metrics& metrics, std::size_t max_queue);
  ~BatchScheduler() override;
  bool submit(const std::shared_ptr<Job>& job) override;
  std::size_t queue_depth() const override;
  void shutdown() override;

 private:
  struct Running;
  void work();
  // Admits queued jobs into free sequences; false where the worker should end.
  bool admit(std::vector<std::unique_ptr<Running>>& running);
  void step(std::vector<std::unique_ptr<Running>>& running);

  Decoder& decoder_;
  const Tokenizer& tokenizer_;
  Metrics& metrics_;
  std::size_t max_queue_;
  std::vector<std::int32_t> stop_ids_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> admitted_;  // the running jobs, for shutdown's cancel
  bool closing_ = false;
  std::thread worker_;
};

}  // namespace exactq::serve
