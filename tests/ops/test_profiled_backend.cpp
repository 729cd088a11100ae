// ProfiledBackend (exactq/profile.h): forwarding through it changes no byte of a forward, it records
// exactly the ops of a step with their bytes and a time for each, and nothing outside start/stop;
// the step summary (bench/step_profile.h) groups them per step. On the CPU, and on CUDA where a GPU
// is usable.
#include <gtest/gtest.h>

#include <map>

#include "engine/decoder_fixture.h"
#include "exactq/profile.h"
#include "step_profile.h"
#include "test_util.h"

namespace exactq::test {
namespace {

std::vector<std::unique_ptr<Backend>> backends() {
  std::vector<std::unique_ptr<Backend>> v;
  v.push_back(make_cpu_backend());
  if (cuda_backend_available()) v.push_back(make_cuda_backend());
  return v;
}

std::vector<std::byte> step_logits(Decoder& d, const std::vector<std::int32_t>& prompt, std::int32_t token) {
  d.forward(prompt, 0, Decoder::Rows::last);
  d.forward({&token, 1}, d.length());
  return d.logits();
}

TEST(ProfiledBackend, ChangesNoByteAndRecordsEveryOpOfAStep) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (const char* type : {"llama", "gemma3_text"}) {
    SCOPED_TRACE(type);
    TempDir dir;
    const Checkpoint ck = write_decoder_case({type}, dir.path, rng);
    const ModelConfig& c = ck.config();
    const auto prompt = random_tokens(70 + rng() % 20, c.vocab_size, rng);
    const std::int32_t token = std::int32_t(rng() % std::uint64_t(c.vocab_size));
    for (auto& inner : backends()) {
      SCOPED_TRACE(std::string(inner->name()));
      ProfiledBackend profiled(*inner);
      Decoder plain(*inner, ck, {KernelFamily::exact, 128}), through(profiled, ck, {KernelFamily::exact, 128});
      const auto expected = step_logits(plain, prompt, token);
      through.forward(prompt, 0, Decoder::Rows::last);
      profiled.start();
      through.forward({&token, 1}, through.length());
      const auto got = through.logits();
      const std::int32_t next = through.greedy().front();
      const std::vector<OpRecord> ops = profiled.stop();
      EXPECT_EQ(got, expected) << "the profiled forward's logits";
      EXPECT_EQ(next, plain.greedy().front());
      const std::int32_t other = (token + 1) % std::int32_t(c.vocab_size);
      EXPECT_NE(step_logits(plain, prompt, other), expected) << "the control: another token, other logits";

      std::map<std::string, int> kinds;
      for (const OpRecord& r : ops) {
        ++kinds[r.kind];
        EXPECT_GT(r.bytes, 0u) << r.kind;
        EXPECT_GE(r.us, 0.0) << r.kind;
        EXPECT_GE(r.host_us, 0.0) << r.kind;
      }
      // Norms: layer 0's input norm and the final one alone; q/k norms and Gemma's norms of the
      // branches alone; each residual add fused with the norm after it (the next layer's input norm).
      const int layers = int(c.num_layers);
      EXPECT_EQ(kinds["rmsnorm"], layers * ((c.qk_norm ? 2 : 0) + (c.sandwich_norm ? 2 : 0)) + 2);
      EXPECT_EQ(kinds["add_rmsnorm"], 2 * layers - 1);
      EXPECT_EQ(kinds["add"], 1);
      EXPECT_EQ(kinds["attention"], layers);
      EXPECT_EQ(kinds["argmax"], 1);
      // q/k/v and gate/up stacked (the exact family): qkv, o, gate_up, down and the head.
      EXPECT_EQ(kinds["qmv_streamed"] + kinds["qmv"] + kinds["dense_mv"], 4 * layers + 1);
      EXPECT_EQ(kinds["upload"], 1) << "the token";
      const bench::StepProfile p = bench::summarize_steps(ops, 1);
      double shares = 0;
      for (std::size_t i = 0; i < p.ops.size(); ++i) {
        shares += p.ops[i].share;
        if (i > 0) {
          EXPECT_GE(p.ops[i - 1].us_per_step, p.ops[i].us_per_step) << "ranked";
        }
      }
      if (p.us > 0) {
        EXPECT_NEAR(shares, 1.0, 1e-9);
      }

      profiled.start();
      EXPECT_TRUE(profiled.stop().empty()) << "no op issued, none recorded";
      through.forward({&token, 1}, through.length() - 1);
      profiled.start();
      EXPECT_TRUE(profiled.stop().empty()) << "ops outside start/stop are not recorded";
    }
  }
}

// The classes of bench-decode's split: a norm fused into a linear is the linear's time.
TEST(StepProfile, OpClassCountsANormFusedIntoALinearAsTheLinear) {
  EXPECT_EQ(bench::op_class("norm+qmv"), "linears");
  EXPECT_EQ(bench::op_class("qmv"), "linears");
  EXPECT_EQ(bench::op_class("qmv_streamed"), "linears");
  EXPECT_EQ(bench::op_class("dense_mv"), "linears");
  EXPECT_EQ(bench::op_class("add_rmsnorm"), "norms");
  EXPECT_EQ(bench::op_class("rmsnorm"), "norms");
  EXPECT_EQ(bench::op_class("attention"), "attention");
  EXPECT_EQ(bench::op_class("rope_write"), "other");
  EXPECT_EQ(bench::op_class("norm"), "other") << "a prefix alone is not a fused linear";
}

}  // namespace
}  // namespace exactq::test
