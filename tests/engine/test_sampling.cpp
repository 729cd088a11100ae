// Exact sampling: the frequencies of a toy vocabulary against float64 expectations (the softmax
// at the temperature, top-k and top-p renormalized), the same token for the same (seed,
// position), and a sampled completion of the shipped pycode pair identical in classic and
// speculative decode.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "exactq/backend.h"
#include "exactq/decoder.h"
#include "exactq/sampling.h"
#include "exactq/speculative.h"
#include "exactq/tokenizer.h"

namespace exactq {
namespace {

const std::vector<float> kLogits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.5f};

// The expected probabilities, written apart from the sampler: softmax(logits / t) over the
// kept ids, renormalized.
std::vector<double> expected(double t, const std::vector<int>& kept) {
  std::vector<double> p(kLogits.size(), 0.0);
  double total = 0;
  for (int i : kept) total += p[std::size_t(i)] = std::exp(double(kLogits[std::size_t(i)]) / t);
  for (double& x : p) x /= total;
  return p;
}

std::vector<double> frequencies(const SamplingOptions& o, int draws) {
  std::vector<double> f(kLogits.size(), 0.0);
  for (int pos = 0; pos < draws; ++pos) f[std::size_t(sample_token(kLogits, o, pos))] += 1.0 / draws;
  return f;
}

// Every frequency within 5 standard errors of its expectation.
bool matches(const std::vector<double>& f, const std::vector<double>& p, int draws) {
  for (std::size_t i = 0; i < p.size(); ++i)
    if (std::abs(f[i] - p[i]) > 5 * std::sqrt(std::max(p[i] * (1 - p[i]), 1e-12) / draws) + 1e-12) return false;
  return true;
}

TEST(Sampling, FrequenciesFollowTheSoftmaxAtTheTemperatureWithTopKAndTopP) {
  const int draws = 100000;
  for (std::uint64_t seed : {1ull, 47ull}) {
    SCOPED_TRACE(seed);
    const auto all = frequencies({0.8, 0, 1, seed}, draws);
    EXPECT_TRUE(matches(all, expected(0.8, {0, 1, 2, 3, 4, 5}), draws));
    EXPECT_FALSE(matches(all, expected(1.0, {0, 1, 2, 3, 4, 5}), draws)) << "the control: another temperature's distribution";
    // top_k 2 keeps ids 3 and 0.
    EXPECT_TRUE(matches(frequencies({1.3, 2, 1, seed}, draws), expected(1.3, {3, 0}), draws));
    // At t = 1 the probabilities in order are about .54, .20, .12, .07, .05, .02 (ids 3, 0, 1, 4,
    // 2, 5): top_p 0.8 keeps 3, 0 and 1 (0.74 does not reach 0.8, 0.86 does).
    const auto p = expected(1.0, {0, 1, 2, 3, 4, 5});
    ASSERT_LT(p[3] + p[0], 0.8);
    ASSERT_GE(p[3] + p[0] + p[1], 0.8);
    EXPECT_TRUE(matches(frequencies({1.0, 0, 0.8, seed}, draws), expected(1.0, {3, 0, 1}), draws));
  }
  EXPECT_EQ(sample_token(kLogits, {}, 5), 3) << "temperature 0 is the argmax";
}

TEST(Sampling, TheTokenIsAFunctionOfSeedPositionAndLogits) {
  int differ_by_seed = 0, differ_by_position = 0;
  for (int pos = 0; pos < 200; ++pos) {
    const std::int32_t a = sample_token(kLogits, {1.0, 0, 1, 9}, pos);
    EXPECT_EQ(a, sample_token(kLogits, {1.0, 0, 1, 9}, pos));
    differ_by_seed += a != sample_token(kLogits, {1.0, 0, 1, 10}, pos);
    differ_by_position += a != sample_token(kLogits, {1.0, 0, 1, 9}, pos + 1000);
  }
  EXPECT_GT(differ_by_seed, 50);
  EXPECT_GT(differ_by_position, 50);
  EXPECT_THROW(validate({-1, 0, 1, 0}), std::invalid_argument);
  EXPECT_THROW(validate({1, -1, 1, 0}), std::invalid_argument);
  EXPECT_THROW(validate({1, 0, 0, 0}), std::invalid_argument);
  EXPECT_THROW(validate({NAN, 0, 1, 0}), std::invalid_argument);
  EXPECT_NO_THROW(validate({0.7, 40, 0.9, 1}));
}

TEST(Sampling, ASampledCompletionIsTheSameInClassicAndSpeculativeDecode) {
  const std::string dir = std::string(EXACTQ_SOURCE_DIR) + "/models/";
  const Checkpoint target_ck = Checkpoint::open(dir + "pycode-target"), draft_ck = Checkpoint::open(dir + "pycode-draft");
  const Tokenizer tokenizer = Tokenizer::open(dir + "pycode-target");
  auto backend = make_backend("cpu", {});
  Decoder target(*backend, target_ck, {KernelFamily::exact, 512}), draft(*backend, draft_ck, {KernelFamily::exact, 512});
  const std::vector<std::int32_t> prompt = tokenizer.encode("def main(argv):\n    ");
  auto run = [&](const SamplingOptions& s, std::int64_t block) {
    GreedyOptions options;
    options.max_tokens = 40;
    options.picker = sampling_picker(s);
    if (block == 0) return greedy_decode(target, prompt, options).tokens;
    DraftModelDrafter drafter(draft, target);
    return speculative_decode(target, drafter, prompt, options, {block}).tokens;
  };
  const SamplingOptions sampled{0.9, 50, 0.95, 3};
  const auto classic = run(sampled, 0);
  for (std::int64_t block : {2, 3, 5}) EXPECT_EQ(run(sampled, block), classic) << "block " << block;
  SamplingOptions other = sampled;
  other.seed = 4;
  EXPECT_NE(run(other, 3), classic) << "the control: another seed";
  EXPECT_NE(run({}, 0), classic) << "the control: greedy";
}

}  // namespace
}  // namespace exactq
