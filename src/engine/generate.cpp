// The classic greedy loop (exactq/generate.h).
#include "exactq/generate.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

namespace exactq {

std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::eos: return "eos";
    case StopReason::max_tokens: return "max_tokens";
    case StopReason::context: return "context";
  }
  return "unknown";
}

std::optional<StopReason> stop_after(std::int32_t token, std::int64_t generated, std::int64_t position,
                                     std::span<const std::int32_t> stop_ids, std::int64_t max_tokens,
                                     std::int64_t context) {
  if (std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) return StopReason::eos;
  if (generated >= max_tokens) return StopReason::max_tokens;
  if (position >= context) return StopReason::context;
  return std::nullopt;
}

std::vector<std::int32_t> pick_tokens(Decoder& decoder, const GreedyOptions& options, std::int64_t position) {
  return options.picker ? options.picker(decoder, position) : decoder.greedy();
}

void check_generation(const Decoder& decoder, std::span<const std::int32_t> prompt, std::int64_t max_tokens) {
  if (prompt.empty()) throw std::invalid_argument("[exactq] generate: the prompt has no tokens");
  if (max_tokens < 1)
    throw std::invalid_argument("[exactq] generate: max_tokens = " + std::to_string(max_tokens) + " must be at least 1");
  if (std::int64_t(prompt.size()) >= decoder.context_length())
    throw std::invalid_argument("[exactq] generate: the prompt's " + std::to_string(prompt.size()) +
                                " tokens leave no room in the context of " + std::to_string(decoder.context_length()));
}

GreedyResult greedy_decode(Decoder& decoder, std::span<const std::int32_t> prompt, const GreedyOptions& options,
                           const std::function<void(std::int32_t)>& on_token) {
  check_generation(decoder, prompt, options.max_tokens);
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  GreedyResult r;
  r.prompt_tokens = std::int64_t(prompt.size());
  const auto start = Clock::now();
  decoder.forward(prompt, 0, Decoder::Rows::last);
  std::int32_t token = pick_tokens(decoder, options, std::int64_t(prompt.size())).front();
  const auto first = Clock::now();
  r.prefill_seconds = seconds(start, first);
  for (;;) {
    r.tokens.push_back(token);
    if (on_token) on_token(token);
    if (const auto stop = stop_after(token, std::int64_t(r.tokens.size()), decoder.length(), options.stop_ids,
                                     options.max_tokens, decoder.context_length())) {
      r.stop = *stop;
      break;
    }
    decoder.forward({&token, 1}, decoder.length());
    token = pick_tokens(decoder, options, decoder.length()).front();
  }
  r.decode_seconds = seconds(first, Clock::now());
  return r;
}

}  // namespace exactq
