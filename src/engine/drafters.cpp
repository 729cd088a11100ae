// The drafters of speculative decoding (exactq/speculative.h): a draft model, prompt lookup, the
// replay instrument for benchmarks, and the first two for several sequences at once.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "exactq/speculative.h"

namespace exactq {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("[exactq] speculative: " + what); }

// The length of the common prefix of two token sequences.
std::size_t common_prefix(std::span<const std::int32_t> a, std::span<const std::int32_t> b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// splitmix64's finalizer: a well-mixed 64-bit function of its input.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Equal head sizes are the least a shared vocabulary needs: the target must be able to run every
// id the draft can propose, and a size difference means the tokenizers differ.
void check_vocabularies(const Decoder& draft, const Decoder& target) {
  if (draft.vocab_size() != target.vocab_size() || draft.config().vocab_size != target.config().vocab_size)
    fail("the draft model's vocabulary of " + std::to_string(draft.vocab_size()) + " tokens (config vocab_size " +
         std::to_string(draft.config().vocab_size) + ") differs from the target's " + std::to_string(target.vocab_size()) +
         " (config vocab_size " + std::to_string(target.config().vocab_size) + ")");
}

}  // namespace

DraftModelDrafter::DraftModelDrafter(Decoder& draft, const Decoder& target) : draft_(draft) { check_vocabularies(draft, target); }

std::string DraftModelDrafter::name() const { return "draft-model " + draft_.config().model_type; }

void DraftModelDrafter::begin(std::span<const std::int32_t> prompt) {
  (void)prompt;
  cached_.clear();
  draft_.truncate(0);
}

std::vector<std::int32_t> DraftModelDrafter::propose(std::span<const std::int32_t> sequence, std::int64_t n) {
  // Positions run: the sequence, then every draft but the last.
  n = std::min(n, draft_.context_length() - std::int64_t(sequence.size()) + 1);
  if (n < 1 || sequence.empty()) return {};
  // The last token of the sequence always runs: its logits give the first draft.
  const std::size_t keep = std::min(common_prefix(cached_, sequence), sequence.size() - 1);
  cached_.resize(keep);
  draft_.forward(sequence.subspan(keep), std::int64_t(keep), Decoder::Rows::last);
  cached_.insert(cached_.end(), sequence.begin() + std::ptrdiff_t(keep), sequence.end());
  std::vector<std::int32_t> drafts{draft_.greedy().front()};
  while (std::int64_t(drafts.size()) < n) {
    const std::int32_t last = drafts.back();
    draft_.forward({&last, 1}, std::int64_t(cached_.size()), Decoder::Rows::last);
    cached_.push_back(last);
    drafts.push_back(draft_.greedy().front());
  }
  return drafts;
}

void DraftModelDrafter::accepted(std::span<const std::int32_t> sequence) {
  cached_.resize(common_prefix(cached_, sequence));
  draft_.truncate(std::int64_t(cached_.size()));
}

PromptLookupDrafter::PromptLookupDrafter(std::int64_t max_ngram) : max_ngram_(max_ngram) {
  if (max_ngram < 1) fail("lookup n-gram length " + std::to_string(max_ngram) + " must be at least 1");
}

std::string PromptLookupDrafter::name() const { return "lookup " + std::to_string(max_ngram_); }

std::vector<std::int32_t> PromptLookupDrafter::propose(std::span<const std::int32_t> sequence, std::int64_t n) {
  const std::size_t length = sequence.size();
  if (n < 1 || length < 2) return {};
  for (std::size_t g = std::size_t(std::min<std::int64_t>(max_ngram_, std::int64_t(length) - 1)); g >= 1; --g) {
    const auto tail = sequence.subspan(length - g);
    for (std::size_t s = length - g; s-- > 0;) {  // most recent earlier occurrence first
      if (!std::equal(tail.begin(), tail.end(), sequence.begin() + std::ptrdiff_t(s))) continue;
      const std::size_t from = s + g, count = std::min<std::size_t>(std::size_t(n), length - from);
      return {sequence.begin() + std::ptrdiff_t(from), sequence.begin() + std::ptrdiff_t(from + count)};
    }
  }
  return {};
}

ReplayDrafter::ReplayDrafter(std::vector<std::int32_t> reference, double rate, std::uint64_t seed, std::int64_t vocab)
    : reference_(std::move(reference)), rate_(rate), seed_(seed), vocab_(vocab) {
  if (!(rate >= 0.0 && rate <= 1.0)) fail("replay rate " + std::to_string(rate) + " is outside [0, 1]");
  if (vocab < 2) fail("replay vocabulary of " + std::to_string(vocab) + " tokens leaves no other token to replace with");
  for (std::size_t i = 0; i < reference_.size(); ++i)
    if (reference_[i] < 0 || reference_[i] >= vocab)
      fail("replay reference token " + std::to_string(reference_[i]) + " (at " + std::to_string(i) +
           ") is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

std::string ReplayDrafter::name() const { return "replay (instrument) rate " + std::to_string(rate_); }

void ReplayDrafter::begin(std::span<const std::int32_t> prompt) { prompt_size_ = prompt.size(); }

std::int32_t ReplayDrafter::proposal(std::size_t i) const {
  const std::uint64_t h = mix(seed_ ^ mix(std::uint64_t(i)));
  const double u = double(h >> 11) * 0x1p-53;  // uniform in [0, 1)
  if (u >= rate_) return reference_.at(i);
  const std::uint64_t shift = 1 + mix(h) % std::uint64_t(vocab_ - 1);  // in [1, vocab): never the same token
  return std::int32_t((std::uint64_t(reference_.at(i)) + shift) % std::uint64_t(vocab_));
}

std::vector<std::int32_t> ReplayDrafter::propose(std::span<const std::int32_t> sequence, std::int64_t n) {
  // The next token's output position: the sequence is the prompt and every earlier output token.
  if (n < 1 || sequence.size() < prompt_size_) return {};
  std::vector<std::int32_t> drafts;
  for (std::size_t i = sequence.size() - prompt_size_; i < reference_.size() && std::int64_t(drafts.size()) < n; ++i)
    drafts.push_back(proposal(i));
  return drafts;
}

namespace {

void check_slot(std::int64_t slot, std::int64_t slots) {
  if (slot < 0 || slot >= slots) fail("draft slot " + std::to_string(slot) + " is outside [0, " + std::to_string(slots) + ")");
}

void check_asks(std::span<const BatchDrafter::Ask> asks, std::int64_t slots) {
  std::vector<bool> seen(std::size_t(slots), false);
  for (const auto& a : asks) {
    check_slot(a.slot, slots);
    if (seen[std::size_t(a.slot)]) fail("draft slot " + std::to_string(a.slot) + " is asked twice in one proposal");
    seen[std::size_t(a.slot)] = true;
  }
}

class LookupBatchDrafter final : public BatchDrafter {
 public:
  LookupBatchDrafter(std::int64_t max_ngram, std::int64_t slots) : lookup_(max_ngram), slots_(slots) {
    if (slots < 1) fail("draft slots " + std::to_string(slots) + " must be at least 1");
  }
  std::string name() const override { return lookup_.name(); }
  std::int64_t slots() const override { return slots_; }
  std::vector<std::vector<std::int32_t>> propose(std::span<const Ask> asks) override {
    check_asks(asks, slots_);
    std::vector<std::vector<std::int32_t>> out;
    for (const auto& a : asks) out.push_back(lookup_.propose(a.sequence, a.n));
    return out;
  }

 private:
  PromptLookupDrafter lookup_;
  std::int64_t slots_;
};

// DraftModelDrafter's rule slot by slot: the first forward runs each slot's accepted tokens its
// cache lacks (its last token always), every later one each slot's previous draft, until each slot
// has its n; a slot's rows are its sequence's alone, so its drafts are the single drafter's.
class DraftModelBatchDrafter final : public BatchDrafter {
 public:
  DraftModelBatchDrafter(Decoder& draft, const Decoder& target) : draft_(draft), cached_(std::size_t(draft.sequences())) {
    check_vocabularies(draft, target);
    if (draft.sequences() < target.sequences())
      fail("the draft decoder holds " + std::to_string(draft.sequences()) + " sequences, fewer than the target's " +
           std::to_string(target.sequences()));
  }
  std::string name() const override { return "draft-model " + draft_.config().model_type; }
  std::int64_t slots() const override { return draft_.sequences(); }
  void begin(std::int64_t slot) override {
    check_slot(slot, slots());
    cached_[std::size_t(slot)].clear();
    draft_.truncate(slot, 0);
  }
  std::vector<std::vector<std::int32_t>> propose(std::span<const Ask> asks) override {
    check_asks(asks, slots());
    std::vector<std::vector<std::int32_t>> drafts(asks.size());
    std::vector<std::int64_t> wanted(asks.size(), 0);
    std::vector<Decoder::Part> parts;
    std::vector<std::size_t> who;
    for (std::size_t i = 0; i < asks.size(); ++i) {
      const Ask& a = asks[i];
      wanted[i] = std::min(a.n, draft_.context_length() - std::int64_t(a.sequence.size()) + 1);
      if (wanted[i] < 1 || a.sequence.empty()) continue;
      std::vector<std::int32_t>& cached = cached_[std::size_t(a.slot)];
      const std::size_t keep = std::min(common_prefix(cached, a.sequence), a.sequence.size() - 1);
      cached.resize(keep);
      parts.push_back({a.slot, a.sequence.subspan(keep), std::int64_t(keep)});
      cached.insert(cached.end(), a.sequence.begin() + std::ptrdiff_t(keep), a.sequence.end());
      who.push_back(i);
    }
    while (!parts.empty()) {
      draft_.forward(parts, Decoder::Rows::last);
      const std::vector<std::int32_t> picks = draft_.greedy();
      for (std::size_t j = 0; j < who.size(); ++j) drafts[who[j]].push_back(picks[j]);
      parts.clear();
      std::vector<std::size_t> next;
      for (const std::size_t i : who) {
        if (std::int64_t(drafts[i].size()) >= wanted[i]) continue;
        std::vector<std::int32_t>& cached = cached_[std::size_t(asks[i].slot)];
        parts.push_back({asks[i].slot, std::span(&drafts[i].back(), 1), std::int64_t(cached.size())});
        cached.push_back(drafts[i].back());
        next.push_back(i);
      }
      who = std::move(next);
    }
    return drafts;
  }
  void accepted(std::int64_t slot, std::span<const std::int32_t> sequence) override {
    check_slot(slot, slots());
    std::vector<std::int32_t>& cached = cached_[std::size_t(slot)];
    cached.resize(common_prefix(cached, sequence));
    draft_.truncate(slot, std::int64_t(cached.size()));
  }

 private:
  Decoder& draft_;
  std::vector<std::vector<std::int32_t>> cached_;  // each slot's tokens at its cache's positions
};

}  // namespace

std::unique_ptr<BatchDrafter> make_lookup_batch_drafter(std::int64_t max_ngram, std::int64_t slots) {
  return std::make_unique<LookupBatchDrafter>(max_ngram, slots);
}

std::unique_ptr<BatchDrafter> make_draft_model_batch_drafter(Decoder& draft, const Decoder& target) {
  return std::make_unique<DraftModelBatchDrafter>(draft, target);
}

}  // namespace exactq
