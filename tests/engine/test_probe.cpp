// The exactness probe: equal for every width-invariant family, diverging for wide (the negative
// control in the same test) with the first differing op named; the gate caches its verdict.
#include <gtest/gtest.h>

#include "engine/decoder_fixture.h"
#include "exactq/probe.h"

namespace exactq::test {
namespace {

TEST(Probe, EqualForInvariantFamiliesAndWideDivergesAtItsFirstLinear) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  // f32 activations show every difference of an f32 sum (bf16 would hide most of them).
  const Checkpoint ck = write_decoder_case({"qwen3", DType::f32}, dir.path, rng);
  auto backend = make_cpu_backend();
  ProbeOptions o;
  o.blocks = {2, 5};
  o.draws = 3;
  o.seed = seed;
  o.long_context = 70;  // past one attention chunk
  for (KernelFamily family : {KernelFamily::exact, KernelFamily::mma, KernelFamily::narrow}) {
    const ProbeReport r = probe(*backend, ck, family, o);
    EXPECT_TRUE(r.equal()) << to_string(family);
    ASSERT_EQ(r.cases.size(), 6u);
    EXPECT_GT(r.cases.back().start, 70) << "the last draw starts past long_context";
    for (const ProbeCase& c : r.cases) EXPECT_EQ(c.total_bytes, c.block * ck.config().vocab_size * 4);
  }
  const ProbeReport wide = probe(*backend, ck, KernelFamily::wide, o);
  EXPECT_FALSE(wide.equal());
  for (const ProbeCase& c : wide.cases) {
    ASSERT_FALSE(c.equal) << "block " << c.block << " draw " << c.draw;
    EXPECT_GT(c.differing_bytes, 0);
    EXPECT_GE(c.first_row, 0);
    EXPECT_LT(c.first_row, c.block);
    EXPECT_EQ(c.first_op, "q_proj") << "the first op that runs qmv_wide in the block";
    EXPECT_EQ(c.first_layer, 0);
  }
}

TEST(Probe, GateProbesOncePerKeyAndRefusesBadOptions) {
  std::mt19937_64 rng(fresh_seed());
  TempDir dir;
  const Checkpoint ck = write_decoder_case({"llama", DType::f32}, dir.path, rng);
  auto backend = make_cpu_backend();
  ExactnessGate gate;
  ProbeOptions o;
  o.draws = 1;
  EXPECT_TRUE(gate.allows(*backend, ck, dir.path.string(), 4, KernelFamily::exact, o));
  EXPECT_EQ(gate.last_report().cases.size(), 1u);
  EXPECT_FALSE(gate.allows(*backend, ck, dir.path.string(), 4, KernelFamily::wide, o)) << "fail-closed";
  EXPECT_TRUE(gate.allows(*backend, ck, dir.path.string(), 4, KernelFamily::exact, o));
  EXPECT_FALSE(gate.last_report().equal()) << "the cached verdict was used: the last probe stays wide's";
  ProbeOptions bad = o;
  bad.blocks = {1};
  EXPECT_THROW(probe(*backend, ck, KernelFamily::exact, bad), std::invalid_argument);
  bad = o;
  bad.draws = 0;
  EXPECT_THROW(probe(*backend, ck, KernelFamily::exact, bad), std::invalid_argument);
}

}  // namespace
}  // namespace exactq::test
