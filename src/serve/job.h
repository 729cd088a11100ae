// One request's generation as the scheduler sees it, and the seam between the HTTP layer and
// whatever runs the model.
//
// The HTTP thread builds a Job, hands it to a Scheduler and then only reads it: the text produced
// so far (for streaming) and, once done, the outcome. The scheduler's worker only writes it.
// BatchScheduler admits jobs at step boundaries and runs many at once, each with its own position
// and cache; Engine::run runs one alone (the solo reference). Both report through the same Job calls.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exactq/sampling.h"

namespace exactq::serve {

struct GenerationSpec {
  std::vector<std::int32_t> prompt;  // run from position 0, as `exactq generate` runs it
  std::int64_t max_tokens = 16;
  std::vector<std::string> stop;  // the text ends before the first occurrence of any of these
  SamplingOptions sampling;       // greedy by default
  // -1: none; else each generated token's log probability and this many most likely alternatives
  // (token_logprobs), reported in Outcome::logprobs.
  int logprobs = -1;
};

enum class Finish : std::uint8_t { stop, length, cancelled, failed };
const char* to_string(Finish finish);  // OpenAI's finish_reason: "stop", "length", ...

struct Outcome {
  std::vector<std::int32_t> tokens;  // generated (a stop id included, as `exactq generate` reports it)
  std::string text;                  // their text, special tokens skipped, cut before a stop string
  Finish finish = Finish::length;
  std::string error;  // where finish is failed
  std::vector<TokenLogprobs> logprobs;  // one per token, where the spec asks for them
};

// What a job has made final since a consumer last looked: text, and the generated tokens whose
// text it completes (all of them once the job is done), each with its log probabilities where the
// spec asks for them.
struct Progress {
  std::string text;
  std::vector<std::int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
};

class Job {
 public:
  explicit Job(GenerationSpec spec) : spec_(std::move(spec)) {}
  const GenerationSpec& spec() const { return spec_; }

  // The consumer's side. cancel() asks the worker to stop at its next token (or not to start).
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  // What the consumer has taken so far: bytes of text and tokens.
  struct Seen {
    std::size_t text = 0, tokens = 0;
  };
  // Waits until there is text or a token past `seen`, the job is done, or `timeout` passes;
  // returns what is new and advances `seen`.
  Progress wait_progress(Seen& seen, std::chrono::milliseconds timeout);
  bool done() const;
  // Blocks until the job is done.
  const Outcome& wait();

  // The worker's side: text that is final (never taken back) and the tokens whose text it
  // completes, in order, then the outcome, once (with it, any of its tokens not given yet).
  void append(const std::string& piece, std::span<const std::int32_t> tokens = {},
              std::span<const TokenLogprobs> logprobs = {});
  void finish(Outcome outcome);

 private:
  GenerationSpec spec_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string text_;
  std::vector<std::int32_t> tokens_;
  std::vector<TokenLogprobs> logprobs_;
  std::optional<Outcome> outcome_;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Queues the job; false where the queue is full or the scheduler is shutting down (the job is
  // not touched then).
  virtual bool submit(const std::shared_ptr<Job>& job) = 0;
  virtual std::size_t queue_depth() const = 0;
  // Stops taking jobs, cancels the queued and the running ones (each finishes as cancelled) and
  // waits for the worker. Idempotent.
  virtual void shutdown() = 0;
};

}  // namespace exactq::serve
