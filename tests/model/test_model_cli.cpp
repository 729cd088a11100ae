// The make-model, convert and inspect command lines, run as child processes (path in EXACTQ_CLI):
// exit 0 with the work done, 2 with the offending value named.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint_fixture.h"

namespace exactq::test {
namespace {

struct Outcome {
  int exit_code = -1;
  std::string output;
};

Outcome run(const std::string& args) {
  Outcome o;
  FILE* pipe = popen((std::string("'") + EXACTQ_CLI + "' " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return o;
  char buffer[4096];
  std::size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) o.output.append(buffer, got);
  const int status = pclose(pipe);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

void expect_usage_error(const std::string& args, const std::string& needle) {
  const Outcome o = run(args);
  EXPECT_EQ(o.exit_code, 2) << args << "\n" << o.output;
  EXPECT_NE(o.output.find(needle), std::string::npos) << args << "\n" << o.output;
}

TEST(ModelCli, MakeModelThenInspect) {
  TempDir dir;
  const std::string m = (dir.path / "m").string(), json = (dir.path / "i.json").string();
  const Outcome made = run("make-model --arch qwen3 --shape tiny --bits 4 --group 64 --seed 5 --out '" + m + "'");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const Outcome shown = run("inspect '" + m + "' --json '" + json + "'");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(shown.output.find("qwen3"), std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find("4-bit g64 bf16"), std::string::npos) << shown.output;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["arch"], "qwen3");
  EXPECT_EQ(j["layers"], 2);
  EXPECT_LT(j["decode_bytes_per_token"].get<std::int64_t>(), j["file_bytes"].get<std::int64_t>());
  // The index's parameter count is the one inspect counts.
  std::ifstream index(dir.path / "m" / "model.safetensors.index.json");
  EXPECT_EQ(nlohmann::json::parse(index)["metadata"]["total_parameters"], j["parameters"]);
}

TEST(ModelCli, RefusesBadArgumentsNamingThem) {
  TempDir dir;
  const std::string out = " --out '" + (dir.path / "x").string() + "'";
  ASSERT_EQ(run("make-model --seed 3" + out).exit_code, 0);  // the positive control
  const std::string fresh = " --out '" + (dir.path / "y").string() + "'";
  expect_usage_error("make-model --arch gpt2" + fresh, "gpt2");
  expect_usage_error("make-model --shape huge" + fresh, "huge");
  expect_usage_error("make-model --bits 7" + fresh, "7");
  expect_usage_error("make-model --seed 0x10" + fresh, "0x10");
  expect_usage_error("make-model --group 48" + fresh, "48");
  expect_usage_error("make-model --dtype f8" + fresh, "f8");
  expect_usage_error("make-model --seed 1" + out, "not empty");
  expect_usage_error("inspect '" + (dir.path / "none").string() + "'", "config.json");
  expect_usage_error("convert --from '" + (dir.path / "x").string() + "' --out '" + (dir.path / "z").string() + "'",
                     "already quantized");
}

TEST(ModelCli, ConvertThenInspect) {
  std::mt19937_64 rng(fresh_seed());
  Tiny s;
  s.quantized = false;
  TempDir dir;
  write_fixture(dir.path, tiny_fixture(s, rng));
  const std::string out = (dir.path / "mlx").string();
  const Outcome c = run("convert --from '" + dir.path.string() + "' --out '" + out + "' --bits 4 --group 64");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("16 modules quantized"), std::string::npos) << c.output;  // embedding, 2 x 7, head
  EXPECT_EQ(run("inspect '" + out + "'").exit_code, 0);
  expect_usage_error("convert --from '" + dir.path.string() + "' --out '" + (dir.path / "b").string() + "' --bits 7", "7");
}

}  // namespace
}  // namespace exactq::test
