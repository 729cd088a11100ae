#include "serve/engine.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <memory>

#include "exactq/generate.h"

namespace exactq::serve {

namespace {

// Thrown from the token callback to end a run at a token boundary: the decode loops have no other
// way to stop early, and unwinding leaves the decoder as a later run expects it (every run starts
// from position 0).
struct Halt {};

}  // namespace

StopScan scan_stops(const std::string& text, const std::vector<std::string>& stops) {
  StopScan scan{text.size(), 0};
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    const std::size_t at = text.find(stop);
    if (at != std::string::npos) scan.match = std::min(scan.match, at);
    // The longest proper prefix of the stop that ends the text.
    for (std::size_t n = std::min(stop.size() - 1, text.size()); n > scan.hold; --n)
      if (text.compare(text.size() - n, n, stop, 0, n) == 0) {
        scan.hold = n;
        break;
      }
  }
  return scan;
}

Engine::Engine(Decoder& decoder, Drafter* drafter, const Tokenizer& tokenizer, EngineOptions options, Metrics& metrics)
    : decoder_(decoder), drafter_(drafter), tokenizer_(tokenizer), options_(std::move(options)), metrics_(metrics),
      stop_ids_(tokenizer.eos_ids()) {
  if (options_.speculative && drafter_ == nullptr) options_.speculative.reset();
}

JobRun::JobRun(Job& job, const Tokenizer& tokenizer)
    : job_(job),
      spec_(job.spec()),
      logprobs_(std::make_shared<std::map<std::int64_t, TokenLogprobs>>()),
      stream_(tokenizer.stream(true)),
      start_(std::chrono::steady_clock::now()) {}

// The recorded log probabilities of generated tokens [from, to), where the spec asks for them.
std::vector<TokenLogprobs> JobRun::logprobs_of(std::size_t from, std::size_t to) const {
  std::vector<TokenLogprobs> values;
  if (spec_.logprobs >= 0)
    for (std::size_t i = from; i < to; ++i) {
      const auto it = logprobs_->find(std::int64_t(spec_.prompt.size() + i));
      if (it != logprobs_->end()) values.push_back(it->second);
    }
  return values;
}

// Gives the job text up to byte `safe` and the tokens whose text ends there, each with its log
// probabilities where the spec asks for them.
void JobRun::give(std::size_t safe) {
  std::size_t upto = released_;
  while (upto < outcome_.tokens.size() && ends_[upto] <= safe) ++upto;
  if (safe <= emitted_ && upto == released_) return;
  job_.append(safe > emitted_ ? text_.substr(emitted_, safe - emitted_) : std::string(),
              std::span<const std::int32_t>(outcome_.tokens).subspan(released_, upto - released_),
              logprobs_of(released_, upto));
  emitted_ = std::max(emitted_, safe), released_ = upto;
}

// New text in: cut at a stop string, or give the job what no stop string can take back.
void JobRun::absorb(const std::string& piece) {
  text_ += piece;
  const StopScan scan = scan_stops(text_, spec_.stop);
  std::size_t safe = text_.size() - scan.hold;
  if (scan.match < text_.size()) {
    text_.resize(scan.match);
    safe = scan.match;
    stopped_by_text_ = true;
  }
  give(safe);
}

bool JobRun::take(std::int32_t token) {
  if (job_.cancelled()) return false;
  outcome_.tokens.push_back(token);
  const std::string piece = stream_.step(token);
  ends_.push_back(text_.size() + piece.size());
  absorb(piece);
  return !stopped_by_text_;
}

void JobRun::finish(std::optional<StopReason> reason, const std::string& error, Metrics& metrics) {
  if (!error.empty()) {
    outcome_.finish = Finish::failed;
    outcome_.error = error;
  } else {
    // The bytes held back for a stop string that never came and the stream's incomplete tail,
    // where the run ended by itself (the tokens still held come with the outcome: Job::finish).
    if (reason) absorb(stream_.finish());
    give(reason && !stopped_by_text_ ? text_.size() : emitted_);
    if (stopped_by_text_ || reason == StopReason::eos)
      outcome_.finish = Finish::stop;
    else if (reason)
      outcome_.finish = Finish::length;
    else
      outcome_.finish = Finish::cancelled;
  }
  outcome_.text = text_.substr(0, emitted_);
  outcome_.logprobs = logprobs_of(0, outcome_.tokens.size());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  metrics.count_generation(std::int64_t(spec_.prompt.size()), std::int64_t(outcome_.tokens.size()), seconds);
  job_.finish(std::move(outcome_));
}

void Engine::run(Job& job) {
  const GenerationSpec& spec = job.spec();
  if (job.cancelled()) {
    Outcome outcome;
    outcome.finish = Finish::cancelled;
    job.finish(std::move(outcome));
    return;
  }
  JobRun run(job, tokenizer_);
  GreedyOptions options;
  options.max_tokens = spec.max_tokens;
  options.stop_ids = stop_ids_;
  // The sampler picks by (seed, position) alone, so classic and speculative decode agree on it;
  // with logprobs the picker also records each position's, from the same logits.
  options.picker = spec.logprobs >= 0 ? logprob_picker(spec.sampling, spec.logprobs, run.logprobs())
                                      : sampling_picker(spec.sampling);
  auto on_token = [&](std::int32_t id) {
    if (!run.take(id)) throw Halt{};
  };
  std::optional<StopReason> reason;
  std::string error;
  try {
    if (options_.speculative) {
      const SpeculativeResult r = speculative_decode(decoder_, *drafter_, spec.prompt, options, *options_.speculative, on_token);
      metrics_.count_speculation(r.drafted, r.accepted);
      reason = r.stop;
    } else {
      reason = greedy_decode(decoder_, spec.prompt, options, on_token).stop;
    }
  } catch (const Halt&) {
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "unknown error";
  }
  run.finish(reason, error, metrics_);
}

}  // namespace exactq::serve
