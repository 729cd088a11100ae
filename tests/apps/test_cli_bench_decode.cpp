// `exactq bench-decode` as a child process on the CPU: the step's timeline in the JSON (every op
// kind of a step, the class split adding up to the step), the --profile table, the Chrome trace
// (one step per point, its events back to back), and bad arguments exit 2.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"

namespace exactq::test {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

TEST(CliBenchDecode, TimelineTableAndTrace) {
  TempFile dir("exactq-bench-decode-model", "");
  ASSERT_EQ(run_cli("make-model --arch gemma3 --shape tiny --seed 5 --out " + dir.quoted(), "", 120).exit_code, 0);
  TempFile json("exactq-bench-decode", ".json"), trace("exactq-bench-decode-trace", ".json");
  const Outcome o = run_cli("bench-decode --model " + dir.quoted() + " --backend cpu --context 20,70 --tokens 3 " +
                                "--kernels exact --profile --json " + json.quoted() + " --trace " + trace.quoted(),
                            "", 300);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "add_rmsnorm")) << o.output;
  EXPECT_TRUE(contains(o.output, "us on the backend's clock")) << o.output;
  const nlohmann::json j = read_json(json.path), t = read_json(trace.path);
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j["rows"].size(), 2u);
  for (const auto& row : j["rows"]) {
    const auto& p = row["profile"];
    double classes = 0, ops = 0;
    for (const auto& [name, us] : p["us_per_step_by_class"].items()) classes += us.get<double>();
    bool attention = false, argmax = false;
    for (const auto& op : p["ops"]) {
      ops += op["us_per_step"].get<double>();
      attention |= op["op"] == "attention";
      argmax |= op["op"] == "argmax";
      EXPECT_GT(op["bytes_per_step"].get<double>(), 0.0) << op.dump();
    }
    EXPECT_TRUE(attention && argmax) << p.dump();
    EXPECT_NEAR(classes, p["us_per_step"].get<double>(), 1e-6 * classes + 1e-9);
    EXPECT_NEAR(ops, p["us_per_step"].get<double>(), 1e-6 * ops + 1e-9);
  }
  ASSERT_TRUE(t.is_object());
  int processes = 0, events = 0;
  double end = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M") {
      ++processes;
      end = 0;
      continue;
    }
    ++events;
    EXPECT_NEAR(e["ts"].get<double>(), end, 1e-6 + 1e-9 * end) << "events back to back";
    end = e["ts"].get<double>() + e["dur"].get<double>();
  }
  EXPECT_EQ(processes, 2);
  EXPECT_GT(events, 20);
  for (const std::string bad : {" --context 0", " --tokens 0", " --kernels fast", " --trace ''"}) {
    const Outcome b = run_cli("bench-decode --model " + dir.quoted() + " --backend cpu" + bad, "", 60);
    EXPECT_EQ(b.exit_code, 2) << bad << "\n" << b.output;
  }
}

}  // namespace
}  // namespace exactq::test
