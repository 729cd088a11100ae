// The forward pass's width invariance, bitwise: the logits of a block of M tokens equal those of
// the same tokens run one by one (and in any other split), for every architecture and the exact,
// mma and narrow families; the wide family, in the same run, must differ (the negative control).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "engine/decoder_fixture.h"

namespace exactq::test {
namespace {

// Logits of `tokens` run in blocks of the given sizes (summing to tokens.size()), all rows.
std::vector<std::byte> run_in_blocks(Decoder& d, const std::vector<std::int32_t>& tokens,
                                     const std::vector<std::size_t>& blocks) {
  std::vector<std::byte> all;
  std::size_t at = 0;
  for (std::size_t b : blocks) {
    d.forward(std::span(tokens).subspan(at, b), std::int64_t(at));
    const auto l = d.logits();
    all.insert(all.end(), l.begin(), l.end());
    at += b;
  }
  EXPECT_EQ(at, tokens.size());
  return all;
}

std::vector<std::int32_t> ids(std::initializer_list<std::int32_t> v) { return v; }

std::vector<std::size_t> ones(std::size_t n) { return std::vector<std::size_t>(n, 1); }

// Random block sizes in [1, 16] summing to n.
std::vector<std::size_t> random_split(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::size_t> s;
  while (n > 0) {
    const std::size_t b = std::min<std::size_t>(n, 1 + rng() % 16);
    s.push_back(b);
    n -= b;
  }
  return s;
}

std::size_t differing_values(const std::vector<std::byte>& a, const std::vector<std::byte>& b, DType t) {
  const std::size_t e = ref_size(t);
  std::size_t n = 0;
  for (std::size_t i = 0; i + e <= std::min(a.size(), b.size()); i += e) n += std::memcmp(&a[i], &b[i], e) != 0;
  return n;
}

double finite_fraction(const std::vector<std::byte>& l, DType t) {
  std::size_t finite = 0, n = l.size() / ref_size(t);
  for (std::size_t i = 0; i < n; ++i) finite += std::isfinite(ref_load(l.data(), i, t));
  return n ? double(finite) / double(n) : 0.0;
}

class DecoderWidth : public ::testing::TestWithParam<DecoderCase> {};

TEST_P(DecoderWidth, BlocksEqualSingleStepsBitwiseAndWideDiffers) {
  const DecoderCase& c = GetParam();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case(c, dir.path, rng);
  auto backend = make_cpu_backend();
  // Past one attention chunk (64 positions) and, with a window, past the window.
  const std::size_t n = 70 + rng() % 10;
  const auto tokens = random_tokens(n, ck.config().vocab_size, rng);
  const auto split = random_split(n, rng);

  std::vector<std::byte> exact_steps;
  for (KernelFamily family : {KernelFamily::exact, KernelFamily::mma, KernelFamily::narrow}) {
    SCOPED_TRACE(std::string(to_string(family)));
    Decoder steps(*backend, ck, {family, 128}), block(*backend, ck, {family, 128}), mixed(*backend, ck, {family, 128});
    const auto a = run_in_blocks(steps, tokens, ones(n));
    const auto b = run_in_blocks(block, tokens, {n});
    const auto m = run_in_blocks(mixed, tokens, split);
    ASSERT_EQ(a.size(), n * std::size_t(ck.config().vocab_size) * ref_size(c.dtype));
    EXPECT_GT(finite_fraction(a, c.dtype), 0.99) << "logits must be ordinary numbers for the comparison to mean anything";
    EXPECT_EQ(differing_values(a, b, c.dtype), 0u) << "one block of " << n << " vs single steps";
    EXPECT_EQ(differing_values(a, m, c.dtype), 0u) << "random blocks vs single steps";
    if (family == KernelFamily::exact) exact_steps = a;
    if (family == KernelFamily::narrow) {
      EXPECT_EQ(differing_values(a, exact_steps, c.dtype), 0u) << "narrow is qmv's bits";
    }
  }
  // The negative control: wide's block rows differ from its single steps (they are exact's). With
  // bf16 activations a different f32 sum shows only where it crosses a bf16 rounding boundary
  // (about 2^-16 of the values here), so the control walks up to 8 prompts until one does.
  Decoder steps(*backend, ck, {KernelFamily::wide, 128}), block(*backend, ck, {KernelFamily::wide, 128});
  EXPECT_EQ(differing_values(run_in_blocks(steps, tokens, ones(n)), exact_steps, c.dtype), 0u) << "wide at M = 1 is qmv";
  if (!c.quantized) return;  // no quantized linear: wide is exact's kernels' twin only in name
  std::size_t differing = 0;
  for (int attempt = 0; attempt < 8 && differing == 0; ++attempt) {
    const auto other = attempt == 0 ? tokens : random_tokens(n, ck.config().vocab_size, rng);
    differing = differing_values(run_in_blocks(steps, other, ones(n)), run_in_blocks(block, other, {n}), c.dtype);
  }
  EXPECT_GT(differing, 0u) << "qmv_wide's block must round differently";
}

INSTANTIATE_TEST_SUITE_P(All, DecoderWidth, ::testing::ValuesIn(decoder_cases()),
                         [](const auto& info) { return info.param.name(); });

// The verify step of speculative decoding: after a prefill, a block of k tokens, rolled back
// and re-run with other tokens, gives the bytes of a decoder that never saw the first ones.
TEST(Decoder, RollbackThenRerunEqualsAFreshDecoder) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case({"qwen3"}, dir.path, rng);
  auto backend = make_cpu_backend();
  const std::int64_t vocab = ck.config().vocab_size;
  const auto prompt = random_tokens(9, vocab, rng), wrong = random_tokens(5, vocab, rng), right = random_tokens(4, vocab, rng);
  Decoder a(*backend, ck, {KernelFamily::exact, 64}), b(*backend, ck, {KernelFamily::exact, 64});
  a.forward(prompt, 0, Decoder::Rows::last);
  a.forward(wrong, 9);
  const auto wrong_logits = a.logits();
  a.forward(right, 9);  // start 9 < length 14: positions 9.. are forgotten first
  EXPECT_EQ(a.length(), 13);
  b.forward(prompt, 0);
  b.forward(right, 9);
  EXPECT_EQ(a.logits(), b.logits());
  EXPECT_NE(wrong_logits, b.logits()) << "control: other tokens give other logits";
  a.truncate(10);
  b.truncate(10);
  a.forward(ids({right[1]}), 10);
  b.forward(ids({right[1]}), 10);
  EXPECT_EQ(a.greedy(), b.greedy());
}

// Several sequences in one cache (DecoderOptions::sequences), run together: every forward takes
// parts of a random subset of them (prefill chunks, decode rows, verify blocks after a rollback),
// and every row's logits equal those of its sequence's own decoder running the same calls alone,
// byte for byte; with Rows::last each part's kept row too. Architectures with a sliding window
// and q/k norms, past one attention chunk. Control: a row's logits where its sequence's cache
// held another sequence's history differ (what reading the wrong cache rows would give).
TEST(Decoder, SequencesInOneForwardEqualEachSequenceAlone) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (const DecoderCase& c :
       {DecoderCase{"gemma3_text", DType::bf16, false, true, 7}, DecoderCase{"qwen3", DType::f16}}) {
    SCOPED_TRACE(c.name());
    TempDir dir;
    const Checkpoint ck = write_decoder_case(c, dir.path, rng);
    auto backend = make_cpu_backend();
    const std::int64_t vocab = ck.config().vocab_size, n = 4, context = 96;
    DecoderOptions together{KernelFamily::exact, context};
    together.sequences = n;
    Decoder batch(*backend, ck, together);
    std::vector<std::unique_ptr<Decoder>> alone;
    for (std::int64_t j = 0; j < n; ++j)
      alone.push_back(std::make_unique<Decoder>(*backend, ck, DecoderOptions{KernelFamily::exact, context}));
    const std::size_t row = std::size_t(vocab) * ref_size(c.dtype);
    std::vector<std::vector<std::int32_t>> history(static_cast<std::size_t>(n));  // each sequence's tokens by position
    std::size_t compared = 0, rounds_with_several = 0;
    for (int round = 0; round < 14; ++round) {
      std::vector<std::vector<std::int32_t>> tokens;
      std::vector<Decoder::Part> parts;
      for (std::int64_t j = 0; j < n; ++j) {
        if (rng() % 3 == 0) continue;  // this sequence sits the round out
        const std::int64_t length = batch.length(j);
        // A verify block after a rollback now and then; else the next chunk or row.
        const std::int64_t start = length > 2 && rng() % 4 == 0 ? length - 1 - std::int64_t(rng() % 2) : length;
        const std::int64_t size = std::min<std::int64_t>(
            context - start, round < 2 ? 5 + std::int64_t(rng() % 20) : 1 + std::int64_t(rng() % 4));
        if (size < 1) continue;
        tokens.push_back(random_tokens(std::size_t(size), vocab, rng));
        parts.push_back({j, {}, start});
        history[std::size_t(j)].resize(std::size_t(start));
        history[std::size_t(j)].insert(history[std::size_t(j)].end(), tokens.back().begin(), tokens.back().end());
      }
      if (parts.empty()) continue;
      for (std::size_t i = 0; i < parts.size(); ++i) parts[i].tokens = tokens[i];
      rounds_with_several += parts.size() > 1;
      const Decoder::Rows rows = rng() % 3 == 0 ? Decoder::Rows::last : Decoder::Rows::all;
      batch.forward(parts, rows);
      const std::vector<std::byte> got = batch.logits();
      std::size_t at = 0;
      for (const Decoder::Part& part : parts) {
        Decoder& own = *alone[std::size_t(part.sequence)];
        own.forward(part.tokens, part.start, rows);
        const std::vector<std::byte> want = own.logits();
        ASSERT_LE(at + want.size(), got.size());
        EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + std::ptrdiff_t(at)))
            << "round " << round << ", sequence " << part.sequence << ": "
            << differing_values(
                   want, {got.begin() + std::ptrdiff_t(at), got.begin() + std::ptrdiff_t(at + want.size())}, c.dtype)
            << " values differ";
        EXPECT_EQ(batch.length(part.sequence), own.length());
        at += want.size();
        compared += want.size() / row;
      }
      EXPECT_EQ(at, got.size());
    }
    EXPECT_GT(rounds_with_several, 3u);
    EXPECT_GT(compared, 40u);

    // The control: a row of sequence 1 again, and the same token at the same position after
    // sequence 0's history instead of its own.
    const std::int64_t p = std::min(batch.length(0), batch.length(1)) - 1;
    ASSERT_GT(p, 0);
    const std::vector<std::int32_t> last = {history[1][std::size_t(p)]};
    batch.truncate(1, p);
    const Decoder::Part again{1, last, p};
    batch.forward(std::span(&again, 1));
    Decoder other(*backend, ck, {KernelFamily::exact, context});
    other.forward(std::span(history[0]).first(std::size_t(p)), 0);
    other.forward(last, p);
    EXPECT_NE(other.logits(), batch.logits()) << "sequence 0's history must give other logits";
  }
}

// Parts that cannot run are refused before any state changes, naming the value.
TEST(Decoder, RefusesBadPartsNamingTheValue) {
  std::mt19937_64 rng(fresh_seed());
  TempDir dir;
  const Checkpoint ck = write_decoder_case({"llama"}, dir.path, rng);
  auto backend = make_cpu_backend();
  DecoderOptions o{KernelFamily::exact, 16};
  o.sequences = 3;
  Decoder d(*backend, ck, o);
  const auto a = ids({1, 2}), b = ids({3});
  d.forward(std::vector<Decoder::Part>{{0, a, 0}, {2, b, 0}});
  auto message = [&](std::vector<Decoder::Part> parts) {
    try {
      d.forward(parts);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(nothing thrown)");
  };
  EXPECT_NE(message({{0, a, 2}, {0, b, 4}}).find("sequence 0 is in two parts"), std::string::npos);
  EXPECT_NE(message({{0, a, 2}, {3, b, 0}}).find("sequence 3 is not one of the cache's 3"), std::string::npos);
  EXPECT_NE(message({{0, a, 2}, {1, b, 1}}).find("start position 1 is past the cache's 0 positions (sequence 1)"),
            std::string::npos);
  EXPECT_NE(message({{2, ids({320}), 1}}).find("token 320"), std::string::npos);
  EXPECT_NE(message({{1, std::vector<std::int32_t>(17, 1), 0}}).find("overflow the context of 16"), std::string::npos);
  EXPECT_NE(message({}).find("no tokens"), std::string::npos);
  DecoderOptions too_many{KernelFamily::exact, 16};
  too_many.sequences = 0;
  EXPECT_THROW(Decoder(*backend, ck, too_many), std::invalid_argument);
  EXPECT_EQ(d.length(0), 2) << "refused calls change nothing";
  EXPECT_EQ(d.length(1), 0);
  EXPECT_EQ(d.length(2), 1);
  try {
    d.truncate(2, 2);
    ADD_FAILURE() << "truncating past a sequence's length must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("positions of sequence 2"), std::string::npos) << e.what();
  }
}

// The exact family stacks q/k/v and gate/up into one matrix each: every projection's output, as the
// tracer sees it, equals that projection's own matrix (loaded alone) applied to the traced input,
// byte for byte, at M = 1 (views of the stacked output) and M > 1 (its columns copied out).
// Control: the same input with one value changed gives other bytes.
TEST(Decoder, StackedProjectionsGiveEachProjectionsOwnBytes) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  for (const char* type : {"llama", "qwen2"}) {  // qwen2: biases, stacked with the rows
    SCOPED_TRACE(type);
    fs::create_directories(dir.path / type);
    const Checkpoint ck = write_decoder_case({type}, dir.path / type, rng);
    auto backend = make_cpu_backend();
    Decoder d(*backend, ck, {KernelFamily::exact, 64});
    const std::int64_t layer = std::int64_t(rng() % std::uint64_t(ck.config().num_layers));
    std::map<std::string, std::vector<std::byte>> seen;
    d.set_tracer([&](const TracePoint& p) {
      if (p.layer == layer) seen[std::string(p.op)].assign(p.values.begin(), p.values.end());
    });
    int controls = 0;
    for (std::size_t m : {std::size_t(1), std::size_t(3 + rng() % 5)}) {
      SCOPED_TRACE(m);
      d.forward(random_tokens(m, ck.config().vocab_size, rng), 0);
      const LayerView& v = ck.layers()[std::size_t(layer)];
      const std::pair<const char*, const LinearView*> parts[] = {{"q_proj", &v.q_proj}, {"k_proj", &v.k_proj},
                                                                  {"v_proj", &v.v_proj}, {"gate_proj", &v.gate_proj},
                                                                  {"up_proj", &v.up_proj}};
      for (const auto& part : parts) {
        const char* op = part.first;
        const LinearView* view = part.second;  // a variable, not a binding: the lambdas below capture it
        const std::string input = op[0] == 'g' || op[0] == 'u' ? "post_attention_norm" : "input_norm";
        auto run = [&](std::vector<std::byte> x) {
          const auto w = backend->load(view->q);
          auto xb = backend->allocate(x.size()), yb = backend->allocate(m * std::size_t(view->n) * ref_size(view->q.dtype));
          backend->upload(*xb, x);
          backend->qmv(m == 1 ? Kernel::qmv : Kernel::qmv_streamed, *w, *xb, std::int64_t(m), *yb);
          if (view->bias) {
            auto bb = backend->allocate(view->bias->bytes.size());
            backend->upload(*bb, view->bias->bytes);
            backend->add_bias(*yb, *bb, std::int64_t(m), view->n, view->q.dtype);
          }
          std::vector<std::byte> y(yb->size());
          backend->download(*yb, y);
          return y;
        };
        const std::vector<std::byte> expected = run(seen.at(input));
        EXPECT_EQ(seen.at(op), expected) << op;
        std::vector<std::byte> poked = seen.at(input);
        ref_store(poked.data(), poked.size() / ref_size(view->q.dtype) - 1, view->q.dtype, 7.0f);
        controls += run(poked) != expected;
      }
    }
    EXPECT_EQ(controls, 10) << "a changed input must change each projection's bytes";
  }
}

// Rows::last gives the last row of Rows::all, and greedy() is the argmax of the logits read back.
TEST(Decoder, LastRowAndGreedyAgreeWithTheFullLogits) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case({"gemma3_text"}, dir.path, rng);
  auto backend = make_cpu_backend();
  const std::int64_t vocab = ck.config().vocab_size;
  const auto tokens = random_tokens(11, vocab, rng);
  Decoder d(*backend, ck, {KernelFamily::exact, 32});
  d.forward(tokens, 0);
  const auto all = d.logits();
  const auto greedy = d.greedy();
  ASSERT_EQ(greedy.size(), 11u);
  for (std::size_t r = 0; r < 11; ++r) {
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < vocab; ++j)  // lowest index wins a tie: only a strictly larger value moves it
      if (ref_load(all.data(), r * std::size_t(vocab) + std::size_t(j), DType::bf16) >
          ref_load(all.data(), r * std::size_t(vocab) + std::size_t(best), DType::bf16))
        best = j;
    EXPECT_EQ(greedy[r], best) << "row " << r;
  }
  d.forward(tokens, 0, Decoder::Rows::last);
  EXPECT_EQ(d.logits_rows(), 1);
  const auto last = d.logits();
  EXPECT_TRUE(std::equal(last.begin(), last.end(), all.end() - std::ptrdiff_t(last.size())));
}

TEST(Decoder, RefusesBadInputNamingTheValue) {
  std::mt19937_64 rng(fresh_seed());
  TempDir dir;
  const Checkpoint ck = write_decoder_case({"llama"}, dir.path, rng);
  auto backend = make_cpu_backend();
  Decoder d(*backend, ck, {KernelFamily::exact, 16});
  auto message = [&](auto&& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(nothing thrown)");
  };
  EXPECT_NE(message([&] { d.forward({}, 0); }).find("no tokens"), std::string::npos);
  EXPECT_NE(message([&] { d.forward(ids({320}), 0); }).find("token 320"), std::string::npos);
  EXPECT_NE(message([&] { d.forward(ids({-1}), 0); }).find("token -1"), std::string::npos);
  EXPECT_NE(message([&] { d.forward(ids({1}), 1); }).find("start position 1"), std::string::npos);
  EXPECT_NE(message([&] { d.forward(std::vector<std::int32_t>(17, 1), 0); }).find("overflow the context of 16"), std::string::npos);
  EXPECT_NE(message([&] { d.truncate(1); }).find("cannot truncate to 1"), std::string::npos);
  EXPECT_NE(message([&] { Decoder(*backend, ck, {KernelFamily::exact, -3}); }).find("context length -3"), std::string::npos);
  EXPECT_NE(message([] { parse_kernel_family("fast"); }).find("'fast'"), std::string::npos);
  EXPECT_EQ(d.length(), 0) << "refused calls change nothing";
  d.forward(ids({0, 319}), 0);  // control: the edges of the vocabulary run
  EXPECT_EQ(d.length(), 2);
}

}  // namespace
}  // namespace exactq::test
