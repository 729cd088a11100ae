// Sampling that stays exact: temperature, top-k and top-p by the Gumbel-max trick, with the noise
// of each (position, token) a hash of (seed, position, token id) rather than a draw from a stream
// that advances. The token picked at a position is thus a function of that row's logits, the seed
// and the position alone, so with a width-invariant forward (the row's logits are the same bytes
// at every width) a sampled completion is the same in classic decode, in speculative decode
// (a draft is accepted iff it equals the token picked at its position) and in any batch.
// docs/sampling.md says what this guarantees and why it is not the speculative-sampling scheme.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "exactq/generate.h"

namespace exactq {

struct SamplingOptions {
  double temperature = 0;  // 0: greedy (the argmax); else > 0
  std::int64_t top_k = 0;  // 0: every token; else only the k most likely
  double top_p = 1;        // in (0, 1]: only the most likely tokens whose probabilities reach p
  std::uint64_t seed = 0;
  bool greedy() const { return temperature == 0; }
};

// Throws std::invalid_argument naming the value: a temperature that is negative or not finite,
// top_k < 0, top_p outside (0, 1].
void validate(const SamplingOptions& options);

// The noise of `token` at `position`: a uniform in (0, 1), from a hash of the three.
double sampling_uniform(std::uint64_t seed, std::int64_t position, std::int32_t token);

// The token at `position` from one row of logits: among the candidates (top_k, then top_p of the
// softmax at the temperature), the argmax of logit / temperature + Gumbel noise, ties to the
// lower id; the argmax of the logits where options.greedy(). Throws std::invalid_argument on an
// empty row.
std::int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, std::int64_t position);

// A picker for GreedyOptions that samples each row of the decoder's logits at its position (an
// empty picker, the argmax on the backend, where options.greedy()).
TokenPicker sampling_picker(const SamplingOptions& options);

// A token's log probability under the model's distribution (the softmax of the row's logits at
// temperature 1; a NaN logit has probability 0), and the `top` most likely tokens with theirs
// (ties to the lower id). Each is logit - max - log(sum of exp(logit - max)), in double, the sum
// over the ids in increasing order: a function of the row's bytes alone.
struct TokenLogprobs {
  double logprob = 0;
  std::vector<std::pair<std::int32_t, double>> top;
};
TokenLogprobs token_logprobs(std::span<const float> logits, std::int32_t token, int top);

// sampling_picker's tokens (the argmax of order/argmax.h where options.greedy(), as the backend's
// argmax), with each picked row's token_logprobs written to `into` under its position (a position
// picked again, in a later verify block, gets the same bytes and so the same entry).
TokenPicker logprob_picker(const SamplingOptions& options, int top,
                           std::shared_ptr<std::map<std::int64_t, TokenLogprobs>> into);

}  // namespace exactq
