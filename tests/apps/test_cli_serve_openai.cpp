// `exactq serve` through OpenAI's official Node.js client (tests/serve-client, installed by
// scripts/setup.sh with npm ci): a completion and the same one streamed equal the solo run,
// authentication by the client's API key, the model list, and 404 for another model's name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "apps/serve_fixture.h"
#include "model/real_tokenizers.h"

namespace exactq::test {
namespace {

const std::string kClientDir = std::string(EXACTQ_SOURCE_DIR) + "/tests/serve-client";

TEST(CliServeOpenAI, TheOfficialClientGetsTheSoloRunPlainAndStreamed) {
  if (!std::filesystem::exists(kClientDir + "/node_modules/openai/package.json")) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true") FAIL() << "tests/serve-client has no node_modules: run scripts/setup.sh";
    GTEST_SKIP() << "tests/serve-client/node_modules is not installed (scripts/setup.sh runs npm ci there)";
  }
  ServeProcess s({"--model", kTarget, "--api-key", "sesame"});
  ASSERT_TRUE(s.ok());
  const std::string prompt = "def read_config(path):\n    ";
  const Solo solo = solo_run("--prompt '" + prompt + "'", 20);
  const Solo control = solo_run("--prompt '" + prompt + "'", 19);
  ASSERT_NE(solo.text, control.text) << "the negative control needs a different solo text";
  auto [code, output] = run_command("timeout -k 5 60 node '" + kClientDir + "/client.mjs' '" + s.url() + "' '" + prompt + "' 20");
  ASSERT_EQ(code, 0) << output << "\n" << s.log();
  const auto j = nlohmann::json::parse(output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << output;
  EXPECT_EQ(j["text"], solo.text);
  EXPECT_NE(j["text"], control.text);
  EXPECT_EQ(j["stream_text"], solo.text);
  EXPECT_EQ(j["finish_reason"], solo.stop == "eos" ? "stop" : "length");
  EXPECT_EQ(j["stream_finish_reason"], j["finish_reason"]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], solo.prompt_ids.size());
  EXPECT_EQ(j["usage"]["completion_tokens"], solo.output_ids.size());
  EXPECT_EQ(j["models"], nlohmann::json::array({"pycode-target"}));
  EXPECT_EQ(j["wrong_model_status"], 404);
}

}  // namespace
}  // namespace exactq::test
