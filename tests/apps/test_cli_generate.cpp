// `exactq generate` as a child process: text from a made checkpoint of each architecture, the
// same on every run and with every width-invariant family; bad input refused with exit 2 naming
// the value.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"

namespace exactq::test {
namespace {

struct MadeModel {
  TempFile dir;
  explicit MadeModel(const std::string& arch) : dir("exactq-generate-" + arch, "") {
    const Outcome o = run_cli("make-model --arch " + arch + " --shape tiny --seed 7 --out " + dir.quoted(), "", 120);
    EXPECT_EQ(o.exit_code, 0) << o.output;
  }
};

nlohmann::json run_json(const std::string& args, const TempFile& json) {
  const Outcome o = run_cli(args + " --json " + json.quoted(), "", 120);
  EXPECT_EQ(o.exit_code, 0) << args << "\n" << o.output;
  EXPECT_TRUE(contains(o.output, "prefill")) << o.output;
  std::ifstream in(json.path);
  return nlohmann::json::parse(in, nullptr, false);
}

TEST(CliGenerate, EveryArchitectureGeneratesTheSameTokensOnEveryRunAndFamily) {
  for (const std::string arch : {"llama", "qwen3", "gemma3"}) {
    SCOPED_TRACE(arch);
    MadeModel m(arch);
    TempFile json("exactq-generate", ".json");
    const std::string base = "generate --model " + m.dir.quoted() + " --prompt 'Once upon a time' --max-tokens 10 --ignore-eos";
    const nlohmann::json first = run_json(base, json);
    ASSERT_TRUE(first.is_object());
    EXPECT_EQ(first["output_ids"].size(), 10u);
    EXPECT_EQ(first["stop"], "max_tokens");
    EXPECT_FALSE(first["prompt_ids"].empty());
    EXPECT_EQ(run_json(base, json)["output_ids"], first["output_ids"]) << "a second run";
    EXPECT_EQ(run_json(base + " --kernels narrow", json)["output_ids"], first["output_ids"]) << "narrow is exact's bits";
    // The prompt given as ids generates what the text did.
    std::string ids;
    for (const auto& id : first["prompt_ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
    EXPECT_EQ(run_json("generate --model " + m.dir.quoted() + " --prompt-ids " + ids + " --max-tokens 10 --ignore-eos", json)["output_ids"],
              first["output_ids"]);
  }
}

TEST(CliGenerate, StopsAtTheContext) {
  MadeModel m("llama");
  TempFile json("exactq-generate", ".json");
  const nlohmann::json j = run_json("generate --model " + m.dir.quoted() + " --prompt-ids 5,6,7 --context 8 --max-tokens 100 --ignore-eos", json);
  EXPECT_EQ(j["stop"], "context");
  EXPECT_EQ(j["output_ids"].size(), 6u) << "positions 0..7: 3 prompt tokens, then 5 forwards, and the last token";
}

TEST(CliGenerate, RefusesBadInputNamingIt) {
  MadeModel m("qwen3");
  const std::string model = " --model " + m.dir.quoted();
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"generate --model /nonexistent-exactq --prompt hi", "/nonexistent-exactq"},
      {"generate" + model, "exactly one of --prompt and --prompt-ids"},
      {"generate" + model + " --prompt hi --prompt-ids 1", "exactly one of --prompt and --prompt-ids"},
      {"generate" + model + " --prompt ''", "--prompt"},
      {"generate" + model + " --prompt-ids 1,,2", "--prompt-ids"},
      {"generate" + model + " --prompt-ids 1,99999", "token 99999"},
      {"generate" + model + " --prompt-ids -1", "--prompt-ids"},
      {"generate" + model + " --prompt hi --max-tokens 0", "--max-tokens"},
      {"generate" + model + " --prompt hi --max-tokens -3", "--max-tokens"},
      {"generate" + model + " --prompt hi --kernels fast", "--kernels"},
      {"generate" + model + " --prompt hi --backend tpu", "--backend"},
      {"generate" + model + " --prompt-ids 1,2,3,4 --context 4", "no room in the context of 4"},
  };
  for (const Case& c : cases) {
    const Outcome o = run_cli(c.args, "", 60);
    EXPECT_EQ(o.exit_code, 2) << c.args << "\n" << o.output;
    EXPECT_TRUE(contains(o.output, c.needle)) << c.args << "\n" << o.output;
  }
  // Control: the same model and a good prompt run.
  EXPECT_EQ(run_cli("generate" + model + " --prompt hi --max-tokens 2", "", 60).exit_code, 0);
}

}  // namespace
}  // namespace exactq::test
