// `exactq probe` as a child process: exit 0 with every case equal for the exact family, 1 with
// cases diverging for wide on an f32 model (the negative control), 2 for bad arguments.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"

namespace exactq::test {
namespace {

TEST(CliProbe, ExactIsEqualWideDivergesBadArgumentsExit2) {
  TempFile dir("exactq-probe-model", "");
  ASSERT_EQ(run_cli("make-model --arch qwen3 --shape tiny --dtype f32 --seed 3 --out " + dir.quoted(), "", 120).exit_code, 0);
  TempFile json("exactq-probe", ".json");
  const std::string base = "probe --model " + dir.quoted() + " --block 2,5 --draws 3 --long-context 80";
  const Outcome exact = run_cli(base + " --json " + json.quoted(), "", 120);
  EXPECT_EQ(exact.exit_code, 0) << exact.output;
  EXPECT_TRUE(contains(exact.output, "verdict: equal (0 of 6 cases diverge)")) << exact.output;
  std::ifstream in(json.path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["verdict"], "equal");
  EXPECT_EQ(j["cases"].size(), 6u);
  EXPECT_GT(j["cases"][2]["start"].get<int>(), 80);
  const Outcome wide = run_cli(base + " --kernels wide", "", 120);
  EXPECT_EQ(wide.exit_code, 1) << wide.output;
  EXPECT_TRUE(contains(wide.output, "DIVERGES at row")) << wide.output;
  EXPECT_TRUE(contains(wide.output, "first at q_proj (layer 0)")) << wide.output;
  for (const std::string bad : {" --block 1", " --block 2-65", " --draws 0", " --kernels fast", " --long-context 0"}) {
    const Outcome o = run_cli("probe --model " + dir.quoted() + bad, "", 60);
    EXPECT_EQ(o.exit_code, 2) << bad << "\n" << o.output;
  }
  EXPECT_EQ(run_cli("probe --model /nonexistent-exactq-model", "", 60).exit_code, 2);
}

}  // namespace
}  // namespace exactq::test
