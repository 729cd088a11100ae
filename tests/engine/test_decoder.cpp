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
      for (const auto& [op, view] : parts) {
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
