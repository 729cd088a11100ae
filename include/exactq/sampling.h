// Sampling that stays exact: temperature, top-k and top-p by the Gumbel-max trick, with the noise
// of each (position, token) a hash of (seed, position, token id) rather than a draw from a stream
// that advances. The token picked at a position is thus a function of that row's logits, the seed
// and the position alone, so with a width-invariant forward (the row's logits are the same bytes
// at every width) a sampled completion is the same in classic decode, in speculative decode
// (a draft is accepted iff it equals the token picked at its position) and in any batch.
// docs/sampling.md says what this guarantees and why it is not the speculative-sampling scheme.
#pragma once

#include <cstdint>
#include <span>

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

}  // namespace exactq
