#include "serve/batch_scheduler.h"

#include <algorithm>
#include <exception>
#include <stdexcept>

#include "exactq/generate.h"
#include "exactq/sampling.h"
#include "order/argmax.h"

namespace exactq::serve {

struct BatchScheduler::Running {
  std::shared_ptr<Job> job;
  std::unique_ptr<JobRun> run;
  std::int64_t sequence = 0;
  std::vector<std::int32_t> tokens;  // the prompt and every token generated
  std::vector<std::int32_t> next;    // what the next forward runs: a chunk of the prompt, then the last token and any drafts
  std::int64_t start = 0;            // the position of next's first token
  std::int64_t generated = 0;
  // Whether the forward runs a chunk of the prompt that is not its last (nothing to pick).
  bool more_prompt() const { return generated == 0 && start + std::int64_t(next.size()) < std::int64_t(tokens.size()); }
};

BatchScheduler::BatchScheduler(Decoder& decoder, const Tokenizer& tokenizer, Metrics& metrics, std::size_t max_queue,
                               BatchDrafter* drafter, std::int64_t block, std::int64_t prefill_chunk)
    : decoder_(decoder), tokenizer_(tokenizer), metrics_(metrics), max_queue_(max_queue), drafter_(drafter), block_(block),
      prefill_chunk_(prefill_chunk), stop_ids_(tokenizer.eos_ids()) {
  if (max_queue_ < 1) throw std::invalid_argument("the queue must hold at least one request");
  if (prefill_chunk_ < 1) throw std::invalid_argument("prefill chunk " + std::to_string(prefill_chunk_) + " must be at least 1");
  if (drafter_ && (block_ < kMinBlock || block_ > kMaxBlock))
    throw std::invalid_argument("block width " + std::to_string(block_) + " is outside [" + std::to_string(kMinBlock) + ", " +
                                std::to_string(kMaxBlock) + "]");
  if (drafter_ && drafter_->slots() < decoder_.sequences())
    throw std::invalid_argument("the drafter's " + std::to_string(drafter_->slots()) + " slots are fewer than the decoder's " +
                                std::to_string(decoder_.sequences()) + " sequences");
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
    r->tokens = spec.prompt;
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
    if (drafter_) drafter_->begin(r->sequence);
    {
      std::lock_guard lock(mutex_);
      admitted_.push_back(job);
    }
    running.push_back(std::move(r));
  }
  std::lock_guard lock(mutex_);
  return !running.empty() || !queue_.empty() || !closing_;
}

std::vector<BatchScheduler::Picks> BatchScheduler::run_forward(const std::vector<Running*>& jobs, Decoder::Rows rows) {
  std::vector<Picks> picks(jobs.size());
  if (jobs.empty()) return picks;
  std::vector<Decoder::Part> parts;
  for (const Running* r : jobs) parts.push_back({r->sequence, r->next, r->start});
  decoder_.forward(parts, rows);
  // The argmax on the backend where a job is greedy without log probabilities (as
  // sampling_picker leaves it), the rows on the host for the others.
  bool rows_needed = false, argmax_needed = false;
  for (const Running* r : jobs) {
    const GenerationSpec& spec = r->job->spec();
    (spec.sampling.greedy() && spec.logprobs < 0 ? argmax_needed : rows_needed) = true;
  }
  const std::vector<std::int32_t> argmax = argmax_needed ? decoder_.greedy() : std::vector<std::int32_t>();
  const std::vector<std::byte> logits = rows_needed ? decoder_.logits() : std::vector<std::byte>();
  const DType t = decoder_.dtype();
  const std::size_t vocab = std::size_t(decoder_.vocab_size());
  std::vector<float> row(vocab);
  std::size_t at = 0;  // the job's first row
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const Running& r = *jobs[j];
    const GenerationSpec& spec = r.job->spec();
    const std::size_t n = rows == Decoder::Rows::all ? r.next.size() : 1;
    if (r.more_prompt()) {
      at += n;
      continue;
    }
    // Row k's token goes to the position after the row's own.
    const std::int64_t first = r.start + std::int64_t(r.next.size() - n) + 1;
    for (std::size_t k = 0; k < n; ++k) {
      if (spec.sampling.greedy() && spec.logprobs < 0) {
        picks[j].tokens.push_back(argmax[at + k]);
        continue;
      }
      for (std::size_t i = 0; i < vocab; ++i) row[i] = load_f32(logits.data(), (at + k) * vocab + i, t);
      // Greedy with log probabilities: order::argmax, as logprob_picker picks alone.
      const std::int32_t token = spec.sampling.greedy() ? std::int32_t(order::argmax(row.data(), std::int64_t(vocab)))
                                                        : sample_token(row, spec.sampling, first + std::int64_t(k));
      picks[j].tokens.push_back(token);
      if (spec.logprobs >= 0) picks[j].logprobs.push_back(token_logprobs(row, token, spec.logprobs));
    }
    at += n;
  }
  return picks;
}

void BatchScheduler::step(std::vector<std::unique_ptr<Running>>& running) {
  std::vector<std::shared_ptr<Job>> done;
  auto end_job = [&](Running& r, std::optional<StopReason> reason, const std::string& error) {
    r.run->finish(reason, error, metrics_);
    done.push_back(r.job);
  };
  try {
    // A job cancelled in its prompt's chunks (no token yet to refuse) ends here, and any other
    // before a forward is spent on it.
    for (const auto& r : running)
      if (r->job->cancelled()) end_job(*r, std::nullopt, "");
    forget(running, done);
    if (running.empty()) return;
    // Jobs in their prompts run chunks from one budget of prefill_chunk tokens a step, in order of
    // admission, and keep their last rows (the last chunk's pick is the first token); running jobs
    // run their last token and, with a drafter, its drafts, keeping every row. A prompt in chunks
    // leaves the cache and the last row's logits as the whole prompt does (the forward is
    // width-invariant), and the jobs beside it wait a chunk, not the whole prompt.
    std::int64_t budget = prefill_chunk_;
    std::vector<Running*> last_rows, all_rows;
    for (const auto& r : running) {
      if (r->generated > 0) continue;
      const std::int64_t n = std::min(budget, std::int64_t(r->tokens.size()) - r->start);
      r->next.assign(r->tokens.begin() + r->start, r->tokens.begin() + r->start + n);
      budget -= n;
    }
    if (drafter_) {
      std::vector<BatchDrafter::Ask> asks;
      std::vector<Running*> asking;
      for (const auto& r : running) {
        if (r->generated == 0) continue;
        // The verify runs the last token at its position and the drafts after it, all inside the
        // context; drafts past the token limit could never be emitted.
        const std::int64_t position = std::int64_t(r->tokens.size()) - 1;
        const std::int64_t room = std::min({block_ - 1, decoder_.context_length() - position - 1,
                                            r->job->spec().max_tokens - r->generated - 1});
        if (room > 0) asks.push_back({r->sequence, r->tokens, room}), asking.push_back(r.get());
      }
      const std::vector<std::vector<std::int32_t>> drafts = drafter_->propose(asks);
      for (std::size_t i = 0; i < asking.size(); ++i) {
        const std::size_t n = std::min(drafts[i].size(), std::size_t(asks[i].n));
        asking[i]->next.insert(asking[i]->next.end(), drafts[i].begin(), drafts[i].begin() + std::ptrdiff_t(n));
      }
    }
    for (const auto& r : running)
      if (!r->next.empty()) (r->generated > 0 && r->next.size() > 1 ? all_rows : last_rows).push_back(r.get());
    metrics_.count_batch(std::int64_t(last_rows.size() + all_rows.size()));
    const std::vector<Picks> picks[2] = {run_forward(last_rows, Decoder::Rows::last), run_forward(all_rows, Decoder::Rows::all)};
    for (int g = 0; g < 2; ++g) {
      const std::vector<Running*>& jobs = g == 0 ? last_rows : all_rows;
      for (std::size_t j = 0; j < jobs.size(); ++j) take_picks(*jobs[j], picks[g][j], end_job);
    }
  } catch (const std::exception& e) {
    // The backend's or the drafter's failure ends every job of the step, in its words.
    const std::string error = *e.what() ? e.what() : "unknown error";
    for (const auto& r : running)
      if (std::find(done.begin(), done.end(), r->job) == done.end()) end_job(*r, std::nullopt, error);
  }
  forget(running, done);
}

template <typename EndJob>
void BatchScheduler::take_picks(Running& r, const Picks& p, EndJob& end_job) {
  const GenerationSpec& spec = r.job->spec();
  if (r.more_prompt()) {
    r.start += std::int64_t(r.next.size());
    r.next.clear();
    return;
  }
  // A verify block's drafts are next[1..]: the longest prefix equal to the picks is accepted, and
  // the pick after it (speculative_decode's rule). A prompt or a lone token: its one pick.
  const std::size_t drafted = r.generated > 0 ? r.next.size() - 1 : 0;
  std::size_t matched = 0;
  while (matched < drafted && r.next[matched + 1] == p.tokens[matched]) ++matched;
  if (drafter_ && r.generated > 0) metrics_.count_speculation(std::int64_t(drafted), std::int64_t(matched));
  for (std::size_t i = 0; i <= matched; ++i) {
    const std::int32_t token = p.tokens[i];
    r.tokens.push_back(token);
    ++r.generated;
    const std::int64_t position = std::int64_t(r.tokens.size()) - 1;
    if (spec.logprobs >= 0) (*r.run->logprobs())[position] = p.logprobs[i];
    // greedy_decode's order: the token is reported, then the reasons to stop.
    const bool more = r.run->take(token);
    const std::optional<StopReason> reason =
        more ? stop_after(token, r.generated, position, stop_ids_, spec.max_tokens, decoder_.context_length()) : std::nullopt;
    if (!more || reason) return end_job(r, reason, "");
  }
  // The cache forgets the rejected drafts, and the drafter learns what was accepted.
  if (drafter_) {
    decoder_.truncate(r.sequence, std::min(decoder_.length(r.sequence), std::int64_t(r.tokens.size()) - 1));
    drafter_->accepted(r.sequence, r.tokens);
  }
  r.next = {r.tokens.back()};
  r.start = std::int64_t(r.tokens.size()) - 1;
}

void BatchScheduler::forget(std::vector<std::unique_ptr<Running>>& running, std::vector<std::shared_ptr<Job>>& done) {
  if (done.empty()) return;
  auto finished = [&](const std::shared_ptr<Job>& job) { return std::find(done.begin(), done.end(), job) != done.end(); };
  std::erase_if(running, [&](const std::unique_ptr<Running>& r) { return finished(r->job); });
  {
    std::lock_guard lock(mutex_);
    std::erase_if(admitted_, finished);
  }
  done.clear();
}

}  // namespace exactq::serve
