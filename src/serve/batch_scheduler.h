// Continuous batching: one worker thread runs every admitted job in the same forward, each in its
// own sequence of the decoder's cache (Decoder::forward over parts). Jobs are admitted at step
// boundaries as sequences free up. A step runs a chunk of each new job's prompt and each running
// job's last token, or, with a drafter, its last token and its drafts (a verify block), then picks
// every job's tokens from its own rows; a verify block keeps the longest prefix of drafts equal to
// the picks, plus the next pick, as speculative_decode does.
//
// Every row's logits are the bytes its sequence gets alone (the forward is width-invariant and a
// row reads only its own sequence's cache), and a token is picked from its row and position alone
// (greedy: the argmax; sampled: sample_token by (seed, position)), through the same JobRun as
// Engine::run: each response is the solo run's, byte for byte, whatever else runs beside it and
// whatever was drafted.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "exactq/decoder.h"
#include "exactq/speculative.h"
#include "exactq/tokenizer.h"
#include "serve/engine.h"
#include "serve/job.h"
#include "serve/metrics.h"

namespace exactq::serve {

class BatchScheduler final : public Scheduler {
 public:
  // Up to decoder.sequences() jobs at once; max_queue jobs may wait (at least 1). With a drafter
  // (slots at least the decoder's sequences), verify blocks of up to `block` tokens
  // ([kMinBlock, kMaxBlock]). Prompts run in chunks: up to prefill_chunk prompt tokens (at least
  // 1) a step, over all the jobs in their prompts. Throws std::invalid_argument naming the value
  // otherwise.
  BatchScheduler(Decoder& decoder, const Tokenizer& tokenizer, Metrics& metrics, std::size_t max_queue,
                 BatchDrafter* drafter = nullptr, std::int64_t block = 4, std::int64_t prefill_chunk = 512);
  ~BatchScheduler() override;
  bool submit(const std::shared_ptr<Job>& job) override;
  std::size_t queue_depth() const override;
  void shutdown() override;

 private:
  struct Running;
  struct Picks {
    std::vector<std::int32_t> tokens;     // a row's token each
    std::vector<TokenLogprobs> logprobs;  // each token's, where the job asks for them
  };
  void work();
  // Admits queued jobs into free sequences; false where the worker should end.
  bool admit(std::vector<std::unique_ptr<Running>>& running);
  void step(std::vector<std::unique_ptr<Running>>& running);
  // One forward over the given jobs' `next` tokens (none: no forward), each job's picks, one per
  // row kept (none for a chunk of a prompt that is not its last).
  std::vector<Picks> run_forward(const std::vector<Running*>& jobs, Decoder::Rows rows);
  // A job's picks into its tokens: the accepted ones reported and checked for a stop (end_job
  // then), the cache and the drafter brought to what was accepted.
  template <typename EndJob>
  void take_picks(Running& r, const Picks& p, EndJob& end_job);
  // Drops the `done` jobs from `running` and from the admitted list, and clears `done`.
  void forget(std::vector<std::unique_ptr<Running>>& running, std::vector<std::shared_ptr<Job>>& done);

  Decoder& decoder_;
  const Tokenizer& tokenizer_;
  Metrics& metrics_;
  std::size_t max_queue_;
  BatchDrafter* drafter_;
  std::int64_t block_;
  std::int64_t prefill_chunk_;
  std::vector<std::int32_t> stop_ids_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> admitted_;  // the running jobs, for shutdown's cancel
  bool closing_ = false;
  std::thread worker_;
};

}  // namespace exactq::serve
