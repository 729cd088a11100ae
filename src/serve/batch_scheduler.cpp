#include "serve/batch_scheduler.h"

#include <algorithm>
#include <exception>
#include <stdexcept>

#include "exactq/generate.h"
#include "exactq/sampling.h"

namespace exactq::serve {

struct BatchScheduler::Running {
  std::shared_ptr<Job> job;
  std::unique_ptr<JobRun> run;
  std::int64_t sequence = 0;
  std::vector<std::int32_t> next;  // what the next forward runs: the prompt, then the last token
  std::int64_t start = 0;          // the position of next's first token
  std::int64_t generated = 0;
};

BatchScheduler::BatchScheduler(Decoder& decoder, const Tokenizer& tokenizer, Metrics& metrics, std::size_t max_queue)
    : decoder_(decoder), tokenizer_(tokenizer), metrics_(metrics), max_queue_(max_queue), stop_ids_(tokenizer.eos_ids()) {
  if (max_queue_ < 1) throw std::invalid_argument("the queue must hold at least one request");
  worker_ = std::thread([this] { work(); });
}

BatchScheduler::~BatchScheduler() { shutdown(); }

bool BatchScheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mutex_);
    if (closing_ || queue_.size() >= max_queue_) return false;
    queue_.push_back(job);
  }
  wake_.notify_one();
  return true;
}

std::size_t BatchScheduler::queue_depth() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void BatchScheduler::shutdown() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
    for (const auto& job : queue_) job->cancel();
    for (const auto& job : admitted_) job->cancel();
  }
  wake_.notify_one();
  if (worker_.joinable()) worker_.join();
}

void BatchScheduler::work() {
  std::vector<std::unique_ptr<Running>> running;
  while (admit(running)) step(running);
}

bool BatchScheduler::admit(std::vector<std::unique_ptr<Running>>& running) {
  std::vector<std::shared_ptr<Job>> taken;
  {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] { return closing_ || !queue_.empty() || !running.empty(); });
    const std::size_t room = std::size_t(decoder_.sequences()) - running.size();
    // Once closing, every queued job is taken to be finished as cancelled.
    while (!queue_.empty() && (closing_ || taken.size() < room)) {
      taken.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  std::vector<bool> used(std::size_t(decoder_.sequences()), false);
  for (const auto& r : running) used[std::size_t(r->sequence)] = true;
  for (auto& job : taken) {
    if (job->cancelled()) {  // as Engine::run finishes a job cancelled before it starts
      Outcome outcome;
      outcome.finish = Finish::cancelled;
      job->finish(std::move(outcome));
      continue;
    }
    const GenerationSpec& spec = job->spec();
    auto r = std::make_unique<Running>();
    r->job = job;
    r->run = std::make_unique<JobRun>(*job, tokenizer_);
    r->sequence = std::find(used.begin(), used.end(), false) - used.begin();
    r->next = spec.prompt;
    // The checks greedy_decode and the decoder's forward make before running, in their words.
    try {
      check_generation(decoder_, spec.prompt, spec.max_tokens);
      const Decoder::Part part{r->sequence, spec.prompt, 0};
      decoder_.check(std::span(&part, 1));
    } catch (const std::exception& e) {
      r->run->finish(std::nullopt, e.what(), metrics_);
      continue;
    }
    used[std::size_t(r->sequence)] = true;
    {
      std::lock_guard lock(mutex_);
      admitted_.push_back(job);
    }
    running.push_back(std::move(r));
  }
  std::lock_guard lock(mutex_);
  return !running.empty() || !queue_.empty() || !closing_;
}

void BatchScheduler::step(std::vector<std::unique_ptr<Running>>& running) {
  if (running.empty()) return;
  std::vector<Decoder::Part> parts;
  for (const auto& r : running) parts.push_back({r->sequence, r->next, r->start});
  std::vector<std::int32_t> argmax;
  std::vector<std::byte> logits;
  metrics_.count_batch(std::int64_t(parts.size()));
  try {
    decoder_.forward(parts, Decoder::Rows::last);
    // The argmax on the backend where a job is greedy without log probabilities (as
    // sampling_picker leaves it), the rows on the host for the others.
    bool rows_needed = false, argmax_needed = false;
    for (const auto& r : running) {
      const GenerationSpec& spec = r->job->spec();
      (spec.sampling.greedy() && spec.logprobs < 0 ? argmax_needed : rows_needed) = true;
    }
    if (argmax_needed) argmax = decoder_.greedy();
    if (rows_needed) logits = decoder_.logits();
  } catch (const std::exception& e) {
    for (auto& r : running) r->run->finish(std::nullopt, e.what(), metrics_);
    running.clear();
    std::lock_guard lock(mutex_);
    admitted_.clear();
    return;
  }
  const DType t = decoder_.dtype();
  const std::size_t vocab = std::size_t(decoder_.vocab_size());
  std::vector<float> row(vocab);
  std::vector<std::shared_ptr<Job>> done;
  for (std::size_t j = 0; j < running.size(); ++j) {
    Running& r = *running[j];
    const GenerationSpec& spec = r.job->spec();
    const std::int64_t position = r.start + std::int64_t(r.next.size());
    std::int32_t token = 0;
    if (spec.sampling.greedy() && spec.logprobs < 0) {
      token = argmax[j];
    } else {
      for (std::size_t i = 0; i < vocab; ++i) row[i] = load_f32(logits.data(), j * vocab + i, t);
      token = sample_token(row, spec.sampling, position);
      if (spec.logprobs >= 0) (*r.run->logprobs())[position] = token_logprobs(row, token, spec.logprobs);
    }
    ++r.generated;
    // greedy_decode's order: the token is reported, then the reasons to stop.
    const bool more = r.run->take(token);
    const std::optional<StopReason> reason =
        more ? stop_after(token, r.generated, position, stop_ids_, spec.max_tokens, decoder_.context_length())
             : std::nullopt;
    if (!more || reason) {
      r.run->finish(reason, "", metrics_);
      done.push_back(r.job);
      continue;
    }
    r.next = {token};
    r.start = position;
  }
  std::erase_if(running, [&](const std::unique_ptr<Running>& r) {
    return std::find(done.begin(), done.end(), r->job) != done.end();
  });
  std::lock_guard lock(mutex_);
  std::erase_if(admitted_, [&](const std::shared_ptr<Job>& job) { return std::find(done.begin(), done.end(), job) != done.end(); });
}

}  // namespace exactq::serve
