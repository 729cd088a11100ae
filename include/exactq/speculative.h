// Speculative greedy decoding whose output is classic greedy decode's, byte for byte.
//
// A round: a Drafter proposes up to bs - 1 tokens; the target runs one forward of width
// 1 + drafts over the last accepted token and the drafts at their positions; the longest prefix of
// drafts equal to the target's per-row argmax is accepted, plus the target's own next token; the
// caches forget the rejected tail. With a width-invariant kernel family every verify row is the
// decode step's row at that position (docs/op-contract.md §7), so each accepted token is the token
// classic decode produces there, and the stop rules are applied token by token as classic decode
// applies them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exactq/decoder.h"
#include "exactq/generate.h"

namespace exactq {

// Whether speculative decoding with this family gives classic decode's bytes. Today a static rule
// (the width-invariant families); an exactness probe that runs the model's verify forward against
// its chain of single steps can take its place.
bool speculation_allowed(KernelFamily family);

// The verify width bs: the last accepted token plus up to bs - 1 drafts.
inline constexpr std::int64_t kMinBlock = 2;
inline constexpr std::int64_t kMaxBlock = 64;

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // A new generation starts from `prompt` (before any proposal).
  virtual void begin(std::span<const std::int32_t> prompt) { (void)prompt; }
  // Up to n (>= 1) tokens to follow `sequence` (the prompt and every accepted token; its last token
  // is the one the next verify starts from). Fewer, or none, where the drafter has no guess.
  virtual std::vector<std::int32_t> propose(std::span<const std::int32_t> sequence, std::int64_t n) = 0;
  // After a round: `sequence` is what was accepted. A drafter with state forgets what it guessed
  // past the accepted prefix.
  virtual void accepted(std::span<const std::int32_t> sequence) { (void)sequence; }
};

// A smaller model of the same vocabulary drafting greedily with its own forward pass and KV cache.
// Its cache holds the longest prefix of the accepted sequence it has run; a proposal first runs
// the accepted tokens it has not seen (one forward), then one token per draft.
class DraftModelDrafter final : public Drafter {
 public:
  // Throws std::invalid_argument naming both sizes where the vocabularies differ.
  DraftModelDrafter(Decoder& draft, const Decoder& target);
  std::string name() const override;
  void begin(std::span<const std::int32_t> prompt) override;
  std::vector<std::int32_t> propose(std::span<const std::int32_t> sequence, std::int64_t n) override;
  void accepted(std::span<const std::int32_t> sequence) override;

 private:
  Decoder& draft_;
  std::vector<std::int32_t> cached_;  // the tokens at the draft cache's positions
};

// Prompt lookup: the longest n-gram (n from max_ngram down to 1) ending at the sequence's end that
// also occurs earlier in it; the tokens that followed its most recent earlier occurrence.
class PromptLookupDrafter final : public Drafter {
 public:
  // Throws std::invalid_argument naming max_ngram where it is below 1.
  explicit PromptLookupDrafter(std::int64_t max_ngram);
  std::string name() const override;
  std::vector<std::int32_t> propose(std::span<const std::int32_t> sequence, std::int64_t n) override;

 private:
  std::int64_t max_ngram_;
};

// A benchmark instrument, not a drafter for real use: it proposes a known reference continuation
// (classic decode's own output) with each token replaced, at `rate`, by another token chosen from
// `seed` and the token's output position. Acceptance thus becomes a controlled variable, and the
// replacements are the same whatever the block width or round boundaries.
class ReplayDrafter final : public Drafter {
 public:
  // Throws std::invalid_argument naming the value: rate outside [0, 1], vocab < 2, a reference
  // token outside [0, vocab).
  ReplayDrafter(std::vector<std::int32_t> reference, double rate, std::uint64_t seed, std::int64_t vocab);
  std::string name() const override;
  void begin(std::span<const std::int32_t> prompt) override;
  std::vector<std::int32_t> propose(std::span<const std::int32_t> sequence, std::int64_t n) override;
  // The token proposed at output position i (i < reference size).
  std::int32_t proposal(std::size_t i) const;

 private:
  std::vector<std::int32_t> reference_;
  double rate_;
  std::uint64_t seed_;
  std::int64_t vocab_;
  std::size_t prompt_size_ = 0;
};

// Drafting for several sequences at once: a server's batch, each request in its own slot (the
// target decoder's sequence of the same number). Every slot's proposals are those of the
// single-sequence drafter of the same kind for that slot's sequence alone.
class BatchDrafter {
 public:
  virtual ~BatchDrafter() = default;
  virtual std::string name() const = 0;
  virtual std::int64_t slots() const = 0;
  // A new generation starts in `slot`.
  virtual void begin(std::int64_t slot) { (void)slot; }
  struct Ask {
    std::int64_t slot = 0;
    std::span<const std::int32_t> sequence;  // the prompt and every accepted token
    std::int64_t n = 0;                      // tokens wanted, >= 1
  };
  // Each ask's proposals (up to n tokens, possibly none), in the asks' order; slots distinct.
  // Throws std::invalid_argument naming the value for a slot outside [0, slots()) or a repeated one.
  virtual std::vector<std::vector<std::int32_t>> propose(std::span<const Ask> asks) = 0;
  // After a round: `sequence` is what the slot accepted.
  virtual void accepted(std::int64_t slot, std::span<const std::int32_t> sequence) { (void)slot, (void)sequence; }
};

// Prompt lookup (PromptLookupDrafter) for every slot; no state.
std::unique_ptr<BatchDrafter> make_lookup_batch_drafter(std::int64_t max_ngram, std::int64_t slots);
// DraftModelDrafter for every slot, in one forward of the draft decoder a draft: its slots are
// the draft decoder's sequences. Throws std::invalid_argument naming both sizes where the
// vocabularies differ, or both counts where the draft decoder holds fewer sequences than the target.
std::unique_ptr<BatchDrafter> make_draft_model_batch_drafter(Decoder& draft, const Decoder& target);

struct SpeculativeOptions {
  std::int64_t block = 4;      // bs, in [kMinBlock, kMaxBlock]; with adaptive, the largest width
  bool allow_inexact = false;  // run even where speculation_allowed(family) is false
  // An adaptive width: the first round verifies `block` tokens, each later one the previous
  // round's accepted drafts + 2, within [kMinBlock, block]: one draft more after a round whose
  // drafts were all accepted, back to just past the accepted prefix otherwise. The width follows
  // from what was accepted alone, and a width-invariant family gives the same bytes at every
  // width, so the output is classic decode's still.
  bool adaptive = false;
};

struct SpeculativeResult : GreedyResult {
  std::int64_t rounds = 0;    // verify forwards
  std::int64_t drafted = 0;   // tokens the drafter proposed
  std::int64_t accepted = 0;  // proposed tokens equal to the target's argmax at their position
  // Tokens after the first (which comes from the prefill) per round, and accepted / drafted.
  double tokens_per_round() const;
  double acceptance() const;
};

// Prefills `prompt` from position 0 as greedy_decode does, then decodes in rounds. The output and
// the stop (a stop id, max_tokens, a full context) are greedy_decode's wherever
// speculation_allowed(target's family); no token past a stop is emitted even where a verify
// accepted more. Throws std::invalid_argument naming the value: greedy_decode's refusals, a block
// outside [kMinBlock, kMaxBlock], a family speculation_allowed refuses (unless allow_inexact).
SpeculativeResult speculative_decode(Decoder& target, Drafter& drafter, std::span<const std::int32_t> prompt,
                                     const GreedyOptions& options, const SpeculativeOptions& speculative,
                                     const std::function<void(std::int32_t)>& on_token = {});

}  // namespace exactq
