// The speculative decode loop (exactq/speculative.h). Its prefill and its stop rules are
// greedy_decode's, applied token by token, so that wherever every verify row equals the decode
// step's row the emitted tokens and the stop are classic decode's.
#include "exactq/speculative.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

namespace exactq {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("[exactq] speculative: " + what); }

}  // namespace

bool speculation_allowed(KernelFamily family) { return is_width_invariant(family); }

double SpeculativeResult::tokens_per_round() const {
  return rounds > 0 ? double(std::int64_t(tokens.size()) - 1) / double(rounds) : 0.0;
}

double SpeculativeResult::acceptance() const { return drafted > 0 ? double(accepted) / double(drafted) : 0.0; }

SpeculativeResult speculative_decode(Decoder& target, Drafter& drafter, std::span<const std::int32_t> prompt,
                                     const GreedyOptions& options, const SpeculativeOptions& speculative,
                                     const std::function<void(std::int32_t)>& on_token) {
  if (speculative.block < kMinBlock || speculative.block > kMaxBlock)
    fail("block width " + std::to_string(speculative.block) + " is outside [" + std::to_string(kMinBlock) + ", " +
         std::to_string(kMaxBlock) + "]");
  const KernelFamily family = target.options().family;
  if (!speculative.allow_inexact && !speculation_allowed(family))
    fail("kernel family '" + std::string(to_string(family)) +
         "' is not width-invariant, so the verify forward may round differently from the decode step and the output "
         "may differ from classic decode (allow_inexact runs it anyway)");
  if (prompt.empty()) throw std::invalid_argument("[exactq] generate: the prompt has no tokens");
  if (options.max_tokens < 1)
    throw std::invalid_argument("[exactq] generate: max_tokens = " + std::to_string(options.max_tokens) + " must be at least 1");
  const std::int64_t context = target.context_length();
  if (std::int64_t(prompt.size()) >= context)
    throw std::invalid_argument("[exactq] generate: the prompt's " + std::to_string(prompt.size()) +
                                " tokens leave no room in the context of " + std::to_string(context));

  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  SpeculativeResult r;
  r.prompt_tokens = std::int64_t(prompt.size());
  std::vector<std::int32_t> sequence(prompt.begin(), prompt.end());  // the prompt and every emitted token
  bool stopped = false;
  // Classic decode's checks after each token, in its order. The target's cache then holds every
  // position but the last token's, as classic decode's does.
  auto emit = [&](std::int32_t token) {
    r.tokens.push_back(token);
    sequence.push_back(token);
    if (on_token) on_token(token);
    const auto stop = stop_after(token, std::int64_t(r.tokens.size()), std::int64_t(sequence.size()) - 1,
                                 options.stop_ids, options.max_tokens, context);
    if (!stop) return;
    r.stop = *stop;
    stopped = true;
  };

  const auto start = Clock::now();
  target.forward(prompt, 0, Decoder::Rows::last);
  const std::int32_t first_token = pick_tokens(target, options, std::int64_t(prompt.size())).front();
  const auto first = Clock::now();
  r.prefill_seconds = seconds(start, first);
  drafter.begin(prompt);
  emit(first_token);
  std::int64_t width = speculative.block;
  while (!stopped) {
    // The verify runs the last token at position sequence.size() - 1 and the drafts after it, all
    // inside the context; drafts past the token limit could never be emitted.
    const std::int64_t position = std::int64_t(sequence.size()) - 1;
    const std::int64_t room = std::min({width - 1, context - position - 1,
                                        options.max_tokens - std::int64_t(r.tokens.size()) - 1});
    std::vector<std::int32_t> block{sequence.back()};
    if (room > 0) {
      std::vector<std::int32_t> drafts = drafter.propose(sequence, room);
      if (std::int64_t(drafts.size()) > room) drafts.resize(std::size_t(room));
      block.insert(block.end(), drafts.begin(), drafts.end());
    }
    const std::int64_t drafted = std::int64_t(block.size()) - 1;
    target.forward(block, position, Decoder::Rows::all);
    // Row i's token goes to position + 1 + i, where classic decode would pick it too.
    const std::vector<std::int32_t> argmax = pick_tokens(target, options, position + 1);
    ++r.rounds;
    r.drafted += drafted;
    std::int64_t matched = 0;
    while (matched < drafted && block[std::size_t(matched) + 1] == argmax[std::size_t(matched)]) ++matched;
    r.accepted += matched;
    if (speculative.adaptive) width = std::clamp(matched + 2, kMinBlock, speculative.block);
    // argmax[0 .. matched] are the accepted drafts and the target's own next token.
    for (std::int64_t i = 0; i <= matched && !stopped; ++i) emit(argmax[std::size_t(i)]);
    const std::int64_t valid = std::min(target.length(), std::int64_t(sequence.size()) - 1);
    target.truncate(valid);
    drafter.accepted(sequence);
  }
  r.decode_seconds = seconds(first, Clock::now());
  return r;
}

}  // namespace exactq
