// Greedy generation on a Decoder: the classic decode loop (prefill, then one token per forward)
// that speculative decoding must reproduce byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "exactq/decoder.h"

namespace exactq {

enum class StopReason : std::uint8_t { eos, max_tokens, context };
std::string_view to_string(StopReason reason);

// Classic decode's checks after it reports `token`, the `generated`-th token, whose position is
// `position` (the cache holds the positions before it), in their order: a stop id, then
// max_tokens, then a full context; none where decoding goes on. Every decode loop asks this.
std::optional<StopReason> stop_after(std::int32_t token, std::int64_t generated, std::int64_t position,
                                     std::span<const std::int32_t> stop_ids, std::int64_t max_tokens,
                                     std::int64_t context);

// Picks the token of every row of logits the decoder's last forward left, the first row's token
// going to sequence position `position` and each next row's to the next position. Empty: each
// row's argmax (Decoder::greedy). A picker that depends only on a row's logits and its position
// keeps speculative decoding equal to classic decode (exactq/sampling.h).
using TokenPicker = std::function<std::vector<std::int32_t>(Decoder& decoder, std::int64_t position)>;

struct GreedyOptions {
  std::int64_t max_tokens = 128;        // tokens to generate at most (>= 1)
  std::vector<std::int32_t> stop_ids;   // generation ends after producing one of these (EOS)
  TokenPicker picker;                   // empty: greedy
};

// The picker's tokens, or the argmax where there is none.
std::vector<std::int32_t> pick_tokens(Decoder& decoder, const GreedyOptions& options, std::int64_t position);

struct GreedyResult {
  std::vector<std::int32_t> tokens;  // generated, the stop token included
  StopReason stop = StopReason::max_tokens;
  std::int64_t prompt_tokens = 0;
  double prefill_seconds = 0;  // the prompt's forward up to the first token
  double decode_seconds = 0;   // every later token
};

// greedy_decode's checks of its arguments, before anything runs: throws std::invalid_argument
// naming the value where the prompt is empty or leaves no room in the context, or max_tokens < 1.
void check_generation(const Decoder& decoder, std::span<const std::int32_t> prompt, std::int64_t max_tokens);

// Runs `prompt` from position 0 (the cache is reset), then generates greedily: each token is the
// argmax of the last row's logits (order/argmax.h). `on_token` sees each token as it is produced.
// Stops after a stop id, after max_tokens, or when the context is full. Throws
// std::invalid_argument on an empty prompt, max_tokens < 1, or a prompt that fills the context.
GreedyResult greedy_decode(Decoder& decoder, std::span<const std::int32_t> prompt, const GreedyOptions& options,
                           const std::function<void(std::int32_t)>& on_token = {});

}  // namespace exactq
