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

void Engine::run(Job& job) {
  const GenerationSpec& spec = job.spec();
  Outcome outcome;
  if (job.cancelled()) {
    outcome.finish = Finish::cancelled;
    job.finish(std::move(outcome));
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  GreedyOptions options;
  options.max_tokens = spec.max_tokens;
  options.stop_ids = stop_ids_;
  // The sampler picks by (seed, position) alone, so classic and speculative decode agree on it;
  // with logprobs the picker also records each position's, from the same logits.
  const auto logprobs = std::make_shared<std::map<std::int64_t, TokenLogprobs>>();
  options.picker = spec.logprobs >= 0 ? logprob_picker(spec.sampling, spec.logprobs, logprobs) : sampling_picker(spec.sampling);
  Tokenizer::Stream stream = tokenizer_.stream(true);
  std::string text;          // every byte decoded so far, up to a stop string
  std::size_t emitted = 0;   // the bytes of text given to the job
  std::vector<std::size_t> ends;  // per generated token, the bytes of text once its piece was in
  std::size_t released = 0;       // the tokens given to the job
  bool stopped_by_text = false;
  // The recorded log probabilities of generated tokens [from, to), where the spec asks for them.
  auto logprobs_of = [&](std::size_t from, std::size_t to) {
    std::vector<TokenLogprobs> values;
    if (spec.logprobs >= 0)
      for (std::size_t i = from; i < to; ++i) {
        const auto it = logprobs->find(std::int64_t(spec.prompt.size() + i));
        if (it != logprobs->end()) values.push_back(it->second);
      }
    return values;
  };
  // Gives the job text up to byte `safe` and the tokens whose text ends there, each with its log
  // probabilities where the spec asks for them.
  auto give = [&](std::size_t safe) {
    std::size_t upto = released;
    while (upto < outcome.tokens.size() && ends[upto] <= safe) ++upto;
    if (safe <= emitted && upto == released) return;
    job.append(safe > emitted ? text.substr(emitted, safe - emitted) : std::string(),
               std::span<const std::int32_t>(outcome.tokens).subspan(released, upto - released),
               logprobs_of(released, upto));
    emitted = std::max(emitted, safe), released = upto;
  };
  // New text in: cut at a stop string, or give the job what no stop string can take back.
  auto absorb = [&](const std::string& piece) {
    text += piece;
    const StopScan scan = scan_stops(text, spec.stop);
    std::size_t safe = text.size() - scan.hold;
    if (scan.match < text.size()) {
      text.resize(scan.match);
      safe = scan.match;
      stopped_by_text = true;
    }
    give(safe);
  };
  auto on_token = [&](std::int32_t id) {
    if (job.cancelled()) throw Halt{};
    outcome.tokens.push_back(id);
    const std::string piece = stream.step(id);
    ends.push_back(text.size() + piece.size());
    absorb(piece);
    if (stopped_by_text) throw Halt{};
  };
  std::optional<StopReason> reason;
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
    outcome.finish = Finish::failed;
    outcome.error = e.what();
  }
  if (outcome.finish != Finish::failed) {
    // The bytes held back for a stop string that never came and the stream's incomplete tail,
    // where the run ended by itself (the tokens still held come with the outcome: Job::finish).
    if (reason) absorb(stream.finish());
    give(reason && !stopped_by_text ? text.size() : emitted);
    if (stopped_by_text || reason == StopReason::eos)
      outcome.finish = Finish::stop;
    else if (reason)
      outcome.finish = Finish::length;
    else
      outcome.finish = Finish::cancelled;
  }
  outcome.text = text.substr(0, emitted);
  outcome.logprobs = logprobs_of(0, outcome.tokens.size());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.count_generation(std::int64_t(spec.prompt.size()), std::int64_t(outcome.tokens.size()), seconds);
  job.finish(std::move(outcome));
}

}  // namespace exactq::serve
