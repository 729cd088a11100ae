// Speculative decoding equals classic greedy decode token for token, stop included: the target
// drafting for itself accepts every draft (every architecture, block widths 2..8, the exact, mma
// and narrow families); another model, prompt lookup and the replay instrument are rejected at
// times and still give classic's output; the stop rules cut a round where classic stops; and the
// wide family, allowed to run, diverges from classic on some prompt (the negative control).
#include <gtest/gtest.h>

#include "engine/decoder_fixture.h"
#include "exactq/speculative.h"

namespace exactq::test {
namespace {

// The negative control's model and prompts, and how many prompts it may walk.
constexpr std::uint64_t kWideControlSeed = 1;
constexpr int kWideControlPrompts = 40;

constexpr KernelFamily kExactFamilies[] = {KernelFamily::exact, KernelFamily::mma, KernelFamily::narrow};

GreedyOptions limit(std::int64_t max_tokens, std::vector<std::int32_t> stop_ids = {}) {
  GreedyOptions o;
  o.max_tokens = max_tokens;
  o.stop_ids = std::move(stop_ids);
  return o;
}

SpeculativeOptions block(std::int64_t bs, bool allow_inexact = false) { return {bs, allow_inexact}; }

// Runs speculative decode and checks what it streamed is what it returned.
SpeculativeResult speculate(Decoder& target, Drafter& drafter, const std::vector<std::int32_t>& prompt,
                            const GreedyOptions& options, const SpeculativeOptions& speculative) {
  std::vector<std::int32_t> streamed;
  SpeculativeResult r = speculative_decode(target, drafter, prompt, options, speculative,
                                           [&](std::int32_t t) { streamed.push_back(t); });
  EXPECT_EQ(streamed, r.tokens) << "on_token sees every emitted token once, in order";
  EXPECT_LE(r.accepted, r.drafted);
  EXPECT_LE(std::int64_t(r.tokens.size()), 1 + r.accepted + r.rounds)
      << "never more tokens than the prefill's, the accepted drafts and one per round";
  return r;
}

void expect_same(const GreedyResult& classic, const SpeculativeResult& spec, const std::string& what) {
  EXPECT_EQ(spec.tokens, classic.tokens) << what;
  EXPECT_EQ(spec.stop, classic.stop) << what << ": classic stopped at " << to_string(classic.stop) << ", speculative at "
                                     << to_string(spec.stop);
}

class SelfDrafting : public ::testing::TestWithParam<DecoderCase> {};

// The sharpest check: a draft model that is the target itself proposes exactly the target's
// tokens, so with a width-invariant family every draft is accepted and every block is full.
TEST_P(SelfDrafting, AcceptsEveryDraftAndEqualsClassicAtEveryBlockWidth) {
  const DecoderCase& c = GetParam();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case(c, dir.path, rng);
  auto backend = make_cpu_backend();
  const auto prompt = random_tokens(3 + rng() % 10, ck.config().vocab_size, rng);
  const std::int64_t max_tokens = 20;
  for (KernelFamily family : kExactFamilies) {
    SCOPED_TRACE(std::string(to_string(family)));
    Decoder target(*backend, ck, {family, 96}), draft(*backend, ck, {family, 96});
    const GreedyResult classic = greedy_decode(target, prompt, limit(max_tokens));
    ASSERT_EQ(std::int64_t(classic.tokens.size()), max_tokens);
    DraftModelDrafter drafter(draft, target);
    for (std::int64_t bs = 2; bs <= 8; ++bs) {
      const SpeculativeResult r = speculate(target, drafter, prompt, limit(max_tokens), block(bs));
      expect_same(classic, r, "block " + std::to_string(bs));
      EXPECT_GT(r.drafted, 0);
      EXPECT_EQ(r.accepted, r.drafted) << "block " << bs << ": the target drafting for itself is never rejected";
      // Full blocks until the token limit: ceil((max_tokens - 1) / bs) rounds.
      EXPECT_EQ(r.rounds, (max_tokens - 1 + bs - 1) / bs) << "block " << bs;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, SelfDrafting, ::testing::ValuesIn(decoder_cases()), [](const auto& info) { return info.param.name(); });

struct Pair {
  TempDir target_dir, draft_dir;
  std::unique_ptr<Checkpoint> target_ck, draft_ck;
  std::unique_ptr<Backend> backend = make_cpu_backend();
  Pair(const DecoderCase& c, std::mt19937_64& rng) {
    target_ck = std::make_unique<Checkpoint>(write_decoder_case(c, target_dir.path, rng));
    draft_ck = std::make_unique<Checkpoint>(write_decoder_case(c, draft_dir.path, rng));  // other random weights
  }
};

// Drafters that are wrong at times: the output is still classic's, and rejections (so rollbacks of
// both caches) happen.
TEST(Speculative, OtherDraftModelLookupAndReplayEqualClassicWithRejections) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::int64_t drafted = 0, accepted = 0;
  const std::vector<DecoderCase> cases = {{"llama"}, {"qwen3", DType::f32}, {"gemma3_text", DType::bf16, false, true, 7}};
  for (const DecoderCase& c : cases) {
    SCOPED_TRACE(c.name());
    Pair p(c, rng);
    const std::int64_t vocab = p.target_ck->config().vocab_size;
    {
      const KernelFamily family = kExactFamilies[std::size_t(&c - cases.data())];  // each family in one case
      SCOPED_TRACE(std::string(to_string(family)));
      Decoder target(*p.backend, *p.target_ck, {family, 128}), draft(*p.backend, *p.draft_ck, {family, 128});
      DraftModelDrafter other(draft, target);
      PromptLookupDrafter lookup(3);
      for (int trial = 0; trial < 2; ++trial) {
        // A prompt with repeats, so that lookup finds n-grams in it, and a random one.
        auto prompt = random_tokens(6, vocab, rng);
        if (trial == 0) prompt.insert(prompt.end(), prompt.begin(), prompt.end());
        const GreedyResult classic = greedy_decode(target, prompt, limit(40));
        ReplayDrafter replay(classic.tokens, 0.3, seed, vocab);
        for (std::int64_t bs : {2, 5, 8}) {
          for (Drafter* d : std::initializer_list<Drafter*>{&other, &lookup, &replay}) {
            const SpeculativeResult r = speculate(target, *d, prompt, limit(40), block(bs));
            expect_same(classic, r, d->name() + ", block " + std::to_string(bs));
            drafted += r.drafted;
            accepted += r.accepted;
            if (d != &lookup) {
              EXPECT_LT(r.accepted, r.drafted) << d->name() << ", block " << bs << ": some draft rejected";
            }
          }
        }
      }
    }
  }
  EXPECT_GT(accepted, 0) << "some drafts accepted";
  EXPECT_LT(accepted, drafted) << "some drafts rejected";
}

// The adaptive width: its rounds differ from the fixed width's (the mechanism is on), and the
// output is still classic's, with each exact family and every drafter. The negative control, in
// the same test: wide, allowed to run adaptively, leaves classic's output on some prompt.
TEST(Speculative, AdaptiveWidthChangesTheRoundsNotTheOutput) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::int64_t rounds_differ = 0;
  const std::vector<DecoderCase> cases = {{"llama"}, {"qwen3", DType::f32}, {"gemma3_text", DType::bf16, false, true, 7}};
  for (const DecoderCase& c : cases) {
    SCOPED_TRACE(c.name());
    Pair p(c, rng);
    const std::int64_t vocab = p.target_ck->config().vocab_size;
    const KernelFamily family = kExactFamilies[std::size_t(&c - cases.data())];
    SCOPED_TRACE(std::string(to_string(family)));
    Decoder target(*p.backend, *p.target_ck, {family, 128}), draft(*p.backend, *p.draft_ck, {family, 128});
    DraftModelDrafter other(draft, target);
    PromptLookupDrafter lookup(3);
    auto prompt = random_tokens(6, vocab, rng);
    prompt.insert(prompt.end(), prompt.begin(), prompt.end());
    const GreedyResult classic = greedy_decode(target, prompt, limit(40));
    ReplayDrafter replay(classic.tokens, 0.3, seed, vocab);
    for (std::int64_t bs : {3, 8})
      for (Drafter* d : std::initializer_list<Drafter*>{&other, &lookup, &replay}) {
        const SpeculativeResult fixed = speculate(target, *d, prompt, limit(40), block(bs));
        const SpeculativeResult adaptive = speculate(target, *d, prompt, limit(40), {bs, false, true});
        expect_same(classic, adaptive, d->name() + ", adaptive up to " + std::to_string(bs));
        rounds_differ += adaptive.rounds != fixed.rounds;
      }
  }
  EXPECT_GT(rounds_differ, 0) << "the adaptive width never changed a round";

  std::mt19937_64 control(kWideControlSeed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case({"llama"}, dir.path, control);
  auto backend = make_cpu_backend();
  Decoder wide(*backend, ck, {KernelFamily::wide, 256});
  int attempts = 0;
  bool diverged = false;
  for (; attempts < kWideControlPrompts && !diverged; ++attempts) {
    const auto prompt = random_tokens(4 + control() % 40, ck.config().vocab_size, control);
    const GreedyResult classic = greedy_decode(wide, prompt, limit(160));
    ReplayDrafter replay(classic.tokens, 0.0, 0, ck.config().vocab_size);
    diverged = speculative_decode(wide, replay, prompt, limit(160), {8, true, true}).tokens != classic.tokens;
  }
  EXPECT_TRUE(diverged) << "wide's adaptive verify never changed a token in " << attempts << " prompts";
}

// The draft model's own cache after partial acceptances and rollbacks: each proposal is the greedy
// continuation a fresh decoder computes from the whole sequence (wrong state would only lower the
// acceptance, which output equality cannot see).
TEST(DraftModel, ProposalsAreAFreshDecodersGreedyContinuation) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case({"gemma3_text", DType::bf16, false, true, 7}, dir.path, rng);
  auto backend = make_cpu_backend();
  const std::int64_t vocab = ck.config().vocab_size;
  Decoder target(*backend, ck, {KernelFamily::exact, 128}), draft(*backend, ck, {KernelFamily::exact, 128});
  Decoder fresh(*backend, ck, {KernelFamily::exact, 128});
  DraftModelDrafter drafter(draft, target);
  std::vector<std::int32_t> sequence = random_tokens(4, vocab, rng);
  drafter.begin(sequence);
  for (int round = 0; round < 25; ++round) {
    const std::int64_t n = 1 + std::int64_t(rng() % 6);
    const auto drafts = drafter.propose(sequence, n);
    EXPECT_EQ(drafts, greedy_decode(fresh, sequence, limit(n)).tokens) << "round " << round;
    // Accept a prefix of the drafts, then a token of the "target's" (random: it may or may not be
    // the next draft), as a verify would.
    const std::size_t keep = std::size_t(rng() % (drafts.size() + 1));
    sequence.insert(sequence.end(), drafts.begin(), drafts.begin() + std::ptrdiff_t(keep));
    sequence.push_back(random_tokens(1, vocab, rng)[0]);
    drafter.accepted(sequence);
    EXPECT_LE(draft.length(), std::int64_t(sequence.size()));
  }
}

TEST(Speculative, ReplayRateSetsTheRejections) {
  std::mt19937_64 rng(fresh_seed());
  TempDir dir;
  const Checkpoint ck = write_decoder_case({"qwen3"}, dir.path, rng);
  auto backend = make_cpu_backend();
  Decoder target(*backend, ck, {KernelFamily::exact, 128});
  const auto prompt = random_tokens(5, ck.config().vocab_size, rng);
  const GreedyResult classic = greedy_decode(target, prompt, limit(60));
  ReplayDrafter none(classic.tokens, 0.0, 1, ck.config().vocab_size), all(classic.tokens, 1.0, 1, ck.config().vocab_size);
  const SpeculativeResult r0 = speculate(target, none, prompt, limit(60), block(6));
  expect_same(classic, r0, "rate 0");
  EXPECT_EQ(r0.accepted, r0.drafted);
  const SpeculativeResult r1 = speculate(target, all, prompt, limit(60), block(6));
  expect_same(classic, r1, "rate 1");
  EXPECT_EQ(r1.accepted, 0);
  EXPECT_EQ(r1.rounds, 59) << "one token per round when every draft is wrong";
  for (std::size_t i = 0; i < classic.tokens.size(); ++i) {
    EXPECT_NE(all.proposal(i), classic.tokens[i]) << "a replaced token is another token";
    EXPECT_EQ(none.proposal(i), classic.tokens[i]);
  }
  // The same seed and position give the same token whatever the round boundaries.
  ReplayDrafter half(classic.tokens, 0.5, 9, ck.config().vocab_size), again(classic.tokens, 0.5, 9, ck.config().vocab_size);
  std::size_t replaced = 0;
  for (std::size_t i = 0; i < classic.tokens.size(); ++i) {
    EXPECT_EQ(half.proposal(i), again.proposal(i));
    replaced += half.proposal(i) != classic.tokens[i];
  }
  EXPECT_GT(replaced, 10u);
  EXPECT_LT(replaced, 50u);
}

TEST(PromptLookup, ProposesWhatFollowedTheMostRecentLongestMatch) {
  PromptLookupDrafter lookup(3);
  using V = std::vector<std::int32_t>;
  // "7 8 9" occurs at 0 and at 5; the most recent earlier occurrence (5) is followed by 4 5.
  const V s = {7, 8, 9, 1, 2, 7, 8, 9, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(lookup.propose(s, 2), (V{4, 5}));
  EXPECT_EQ(lookup.propose(s, 10), (V{4, 5, 6, 7, 8, 9})) << "up to the sequence's end";
  // No 3-gram or 2-gram match: the last token alone (1 at 0, followed by 2).
  EXPECT_EQ(lookup.propose(V{1, 2, 3, 4, 5, 1}, 3), (V{2, 3, 4}));
  // A longer match wins over a more recent shorter one.
  EXPECT_EQ(lookup.propose(V{5, 6, 1, 9, 6, 2, 5, 6}, 1), (V{1}));
  EXPECT_TRUE(lookup.propose(V{1, 2, 3}, 4).empty()) << "no earlier occurrence";
  EXPECT_TRUE(lookup.propose(V{1}, 4).empty());
  EXPECT_EQ(PromptLookupDrafter(1).propose(V{3, 4, 3, 5, 3}, 1), (V{5}));
}

// The stop rules cut a round exactly where classic decode stops.
TEST(Speculative, StopsWhereClassicStops) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case({"llama"}, dir.path, rng);
  auto backend = make_cpu_backend();
  const std::int64_t vocab = ck.config().vocab_size;
  Decoder target(*backend, ck, {KernelFamily::exact, 64}), draft(*backend, ck, {KernelFamily::exact, 64});
  DraftModelDrafter self(draft, target);
  PromptLookupDrafter lookup(2);
  const auto prompt = random_tokens(7, vocab, rng);

  // max_tokens anywhere inside a round.
  for (std::int64_t max_tokens = 1; max_tokens <= 12; ++max_tokens) {
    const GreedyResult classic = greedy_decode(target, prompt, limit(max_tokens));
    for (Drafter* d : std::initializer_list<Drafter*>{&self, &lookup}) {
      const SpeculativeResult r = speculate(target, *d, prompt, limit(max_tokens), block(8));
      expect_same(classic, r, d->name() + ", max_tokens " + std::to_string(max_tokens));
      EXPECT_EQ(std::int64_t(r.tokens.size()), max_tokens);
    }
  }

  // A stop id in the middle of a fully accepted block: the first block (7 drafts) is accepted, and
  // the output ends at the stop id inside it. The stop id is an output token with no earlier
  // occurrence; prompts are drawn until one has such a token at output position 2..6.
  bool tried = false;
  for (int attempt = 0; attempt < 20 && !tried; ++attempt) {
    const auto p = random_tokens(7, vocab, rng);
    const GreedyResult free_run = greedy_decode(target, p, limit(12));
    for (std::size_t j = 2; j <= 6 && !tried; ++j) {
      if (std::find(free_run.tokens.begin(), free_run.tokens.begin() + std::ptrdiff_t(j), free_run.tokens[j]) !=
          free_run.tokens.begin() + std::ptrdiff_t(j))
        continue;
      tried = true;
      const GreedyOptions stop = limit(12, {free_run.tokens[j]});
      const GreedyResult classic = greedy_decode(target, p, stop);
      ASSERT_EQ(classic.tokens.size(), j + 1);
      ASSERT_EQ(classic.stop, StopReason::eos);
      const SpeculativeResult r = speculate(target, self, p, stop, block(8));
      expect_same(classic, r, "stop id at " + std::to_string(j));
      EXPECT_EQ(r.rounds, 1);
      EXPECT_EQ(r.accepted, 7) << "the verify accepted past the stop id; none of it was emitted";
    }
  }
  EXPECT_TRUE(tried) << "no prompt gave an output token without an earlier occurrence";

  // The context's end, with the draft model's context equal to the target's and shorter.
  for (std::int64_t context : {8, 13, 20}) {
    Decoder small_target(*backend, ck, {KernelFamily::exact, context});
    Decoder same(*backend, ck, {KernelFamily::exact, context}), shorter(*backend, ck, {KernelFamily::exact, 9});
    DraftModelDrafter same_drafter(same, small_target), short_drafter(shorter, small_target);
    const GreedyResult classic = greedy_decode(small_target, prompt, limit(100));
    ASSERT_EQ(classic.stop, StopReason::context);
    ASSERT_EQ(std::int64_t(classic.tokens.size()), context - 7 + 1);
    for (std::int64_t bs = 2; bs <= 8; ++bs)
      for (Drafter* d : std::initializer_list<Drafter*>{&same_drafter, &short_drafter, &lookup}) {
        const SpeculativeResult r = speculate(small_target, *d, prompt, limit(100), block(bs));
        expect_same(classic, r, d->name() + ", context " + std::to_string(context) + ", block " + std::to_string(bs));
        if (d == &same_drafter) {
          EXPECT_EQ(r.accepted, r.drafted);
        }
      }
  }
}

// The negative control: with the wide family the verify rows round differently from the decode
// step, and speculative decode, allowed to run, leaves classic's output on some prompt. Without
// allow_inexact it is refused. A different f32 sum shows in bf16 only where it crosses a rounding
// boundary, and changes a token only where that meets a near tie of the logits: about one prompt
// in twenty of 160 tokens here. The forward pass is deterministic, so the control uses a fixed
// seed (its model and prompts) and walks the prompts, bounded, until one diverges.
TEST(Speculative, WideIsRefusedAndWhenAllowedDivergesFromClassic) {
  EXPECT_TRUE(speculation_allowed(KernelFamily::exact));
  EXPECT_TRUE(speculation_allowed(KernelFamily::mma));
  EXPECT_TRUE(speculation_allowed(KernelFamily::narrow));
  EXPECT_FALSE(speculation_allowed(KernelFamily::wide));
  std::mt19937_64 rng(kWideControlSeed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case({"llama"}, dir.path, rng);
  auto backend = make_cpu_backend();
  const std::int64_t vocab = ck.config().vocab_size;
  Decoder target(*backend, ck, {KernelFamily::wide, 256});
  PromptLookupDrafter lookup(2);
  try {
    speculative_decode(target, lookup, random_tokens(5, vocab, rng), limit(4), block(4));
    ADD_FAILURE() << "wide ran without allow_inexact";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'wide'"), std::string::npos) << e.what();
  }
  // The replay of classic's own output at rate 0 drafts every token classic decode produced, so
  // every row after the first is computed in a block of 8 and compared with its decode step.
  int attempts = 0;
  bool diverged = false;
  for (; attempts < kWideControlPrompts && !diverged; ++attempts) {
    const auto p = random_tokens(4 + rng() % 40, vocab, rng);
    const GreedyResult classic = greedy_decode(target, p, limit(160));
    ReplayDrafter replay(classic.tokens, 0.0, 0, vocab);
    const SpeculativeResult r = speculative_decode(target, replay, p, limit(160), block(8, true));
    diverged = r.tokens != classic.tokens;
  }
  EXPECT_TRUE(diverged) << "wide's verify never changed a token in " << attempts << " prompts";
  RecordProperty("wide_prompts_until_divergence", attempts);
}

TEST(Speculative, RefusesBadInputNamingTheValue) {
  std::mt19937_64 rng(fresh_seed());
  TempDir dir, other_dir;
  const Checkpoint ck = write_decoder_case({"llama"}, dir.path, rng);
  Tiny t;
  t.vocab = 256;
  write_fixture(other_dir.path, tiny_fixture(t, rng));
  const Checkpoint other = Checkpoint::open(other_dir.path.string());
  auto backend = make_cpu_backend();
  Decoder target(*backend, ck, {KernelFamily::exact, 32}), draft(*backend, other, {KernelFamily::exact, 32});
  auto message = [&](auto&& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(nothing thrown)");
  };
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  PromptLookupDrafter lookup(2);
  EXPECT_NE(message([&] { DraftModelDrafter(draft, target); }).find("vocabulary of 256 tokens"), std::string::npos);
  EXPECT_NE(message([&] { PromptLookupDrafter(0); }).find("n-gram length 0"), std::string::npos);
  EXPECT_NE(message([&] { ReplayDrafter({1}, 1.5, 0, 320); }).find("rate 1.5"), std::string::npos);
  EXPECT_NE(message([&] { ReplayDrafter({400}, 0.5, 0, 320); }).find("token 400"), std::string::npos);
  EXPECT_NE(message([&] { speculative_decode(target, lookup, prompt, limit(4), block(1)); }).find("block width 1"), std::string::npos);
  EXPECT_NE(message([&] { speculative_decode(target, lookup, prompt, limit(4), block(65)); }).find("block width 65"), std::string::npos);
  EXPECT_NE(message([&] { speculative_decode(target, lookup, {}, limit(4), block(4)); }).find("no tokens"), std::string::npos);
  EXPECT_NE(message([&] { speculative_decode(target, lookup, prompt, limit(0), block(4)); }).find("max_tokens = 0"), std::string::npos);
  EXPECT_NE(message([&] { speculative_decode(target, lookup, std::vector<std::int32_t>(32, 1), limit(4), block(4)); })
                .find("no room in the context of 32"),
            std::string::npos);
  EXPECT_EQ(message([&] { speculative_decode(target, lookup, prompt, limit(4), block(4)); }), "(nothing thrown)") << "control";
}

}  // namespace
}  // namespace exactq::test
