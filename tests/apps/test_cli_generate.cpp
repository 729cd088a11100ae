// `exactq generate` as a child process: text from a made checkpoint of each architecture, the
// same on every run and with every width-invariant family; bad input refused with exit 2 naming
// the value.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"
#include "model/checkpoint_fixture.h"

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
      // An empty value after '=' does not take the next option as the prompt.
      {"generate --prompt=" + model, "--prompt=: the value after '=' is empty"},
      {"generate" + model + " --prompt= --max-tokens 2", "--prompt=: the value after '=' is empty"},
      {"generate" + model + " --prompt-ids 1,,2", "--prompt-ids"},
      {"generate" + model + " --prompt-ids 1,99999", "token 99999"},
      {"generate" + model + " --prompt-ids -1", "--prompt-ids"},
      {"generate" + model + " --prompt hi --max-tokens 0", "--max-tokens"},
      {"generate" + model + " --prompt hi --max-tokens -3", "--max-tokens"},
      {"generate" + model + " --prompt hi --kernels fast", "--kernels"},
      {"generate" + model + " --prompt hi --backend tpu", "--backend"},
      {"generate" + model + " --prompt-ids 1,2,3,4 --context 4", "no room in the context of 4"},
      {"generate" + model + " --prompt hi --block 4", "--block: only speculative decoding has a block width"},
      {"generate" + model + " --prompt hi --adaptive", "--adaptive: only speculative decoding has a block width"},
  };
  for (const Case& c : cases) {
    const Outcome o = run_cli(c.args, "", 60);
    EXPECT_EQ(o.exit_code, 2) << c.args << "\n" << o.output;
    EXPECT_TRUE(contains(o.output, c.needle)) << c.args << "\n" << o.output;
  }
  // Control: the same model and a good prompt run.
  EXPECT_EQ(run_cli("generate" + model + " --prompt hi --max-tokens 2", "", 60).exit_code, 0);
}


// Speculative decoding from the CLI: --compare finds the target drafting for itself, prompt lookup
// and the replay instrument identical to classic decode; wide is refused unless allowed, and then
// says so; bad drafter options exit 2 naming the value.
TEST(CliGenerate, CompareFindsSpeculativeIdenticalToClassic) {
  MadeModel m("llama");
  TempFile json("exactq-generate", ".json");
  const std::string base = "generate --model " + m.dir.quoted() + " --prompt-ids 5,6,7,5,6 --max-tokens 24 --ignore-eos --compare";
  for (const std::string& drafter : {" --draft " + m.dir.quoted() + " --block 5", std::string(" --lookup 2 --block 3"),
                                    std::string(" --replay-rate 0.4 --block 8")}) {
    SCOPED_TRACE(drafter);
    const Outcome o = run_cli(base + drafter + " --json " + json.quoted(), "", 120);
    EXPECT_EQ(o.exit_code, 0) << o.output;
    EXPECT_TRUE(contains(o.output, "compare: identical yes (24 tokens)")) << o.output;
    std::ifstream in(json.path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["compare"]["identical"], true);
    EXPECT_EQ(j["output_ids"], j["classic"]["output_ids"]);
    EXPECT_EQ(j["output_ids"].size(), 24u);
    EXPECT_GT(j["speculative"]["rounds"].get<int>(), 0);
    if (contains(drafter, "--draft")) {
      EXPECT_EQ(j["speculative"]["acceptance"], 1.0) << "the target drafting for itself";
      EXPECT_EQ(j["speculative"]["rounds"], 5) << "23 tokens after the prefill's, 5 per full block";
    }
    if (contains(drafter, "--replay")) {
      EXPECT_LT(j["speculative"]["acceptance"].get<double>(), 1.0);
    }
  }
  // The adaptive width: the gate probes every width up to --block, the output is still classic's.
  const Outcome adaptive = run_cli("generate --model " + m.dir.quoted() +
                                       " --prompt hello --max-tokens 24 --lookup 3 --block 6 --adaptive --compare",
                                   "", 120);
  EXPECT_EQ(adaptive.exit_code, 0) << adaptive.output;
  EXPECT_TRUE(contains(adaptive.output, "block up to 6")) << adaptive.output;
  EXPECT_TRUE(contains(adaptive.output, "compare: identical yes")) << adaptive.output;
  // Without --compare the speculative run alone prints its line.
  const Outcome alone = run_cli("generate --model " + m.dir.quoted() + " --prompt hello --max-tokens 6 --lookup 3", "", 120);
  EXPECT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_TRUE(contains(alone.output, "speculative: lookup 3, block 4")) << alone.output;
}

TEST(CliGenerate, WideSpeculationIsRefusedUnlessAllowed) {
  MadeModel m("qwen3");
  const std::string base = "generate --model " + m.dir.quoted() + " --prompt-ids 1,2,3 --max-tokens 8 --kernels wide --lookup 2";
  const Outcome refused = run_cli(base, "", 60);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(contains(refused.output, "--kernels wide")) << refused.output;
  EXPECT_TRUE(contains(refused.output, "--allow-inexact")) << refused.output;
  const Outcome allowed = run_cli(base + " --allow-inexact --compare", "", 60);
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_TRUE(contains(allowed.output, "inexact: --allow-inexact")) << allowed.output;
  EXPECT_TRUE(contains(allowed.output, "compare: identical")) << allowed.output;
  // Control: classic decode with wide runs without the flag.
  EXPECT_EQ(run_cli("generate --model " + m.dir.quoted() + " --prompt-ids 1,2,3 --max-tokens 3 --kernels wide", "", 60).exit_code, 0);
}

TEST(CliGenerate, RefusesBadSpeculativeOptionsNamingThem) {
  MadeModel m("qwen3");
  // A draft checkpoint of another vocabulary (320 tokens against make-model's 1024).
  TempDir other;
  std::mt19937_64 rng(fresh_seed());
  write_fixture(other.path, tiny_fixture(Tiny{}, rng));
  const std::string model = " --model " + m.dir.quoted() + " --prompt-ids 1,2,3";
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"generate" + model + " --draft '" + other.path.string() + "'", "vocabulary of 320 tokens"},
      {"generate" + model + " --draft /nonexistent-exactq-draft", "/nonexistent-exactq-draft"},
      {"generate" + model + " --lookup 2 --block 1", "--block"},
      {"generate" + model + " --lookup 2 --block 65", "--block"},
      {"generate" + model + " --lookup 0", "--lookup"},
      {"generate" + model + " --lookup -2", "--lookup"},
      {"generate" + model + " --draft " + m.dir.quoted() + " --lookup 2", "at most one drafter: --draft, --lookup"},
      {"generate" + model + " --lookup 2 --replay-rate 0.5", "at most one drafter"},
      {"generate" + model + " --compare", "--compare"},
      {"generate" + model + " --replay-rate 1.5", "--replay-rate"},
  };
  for (const Case& c : cases) {
    const Outcome o = run_cli(c.args, "", 60);
    EXPECT_EQ(o.exit_code, 2) << c.args << "\n" << o.output;
    EXPECT_TRUE(contains(o.output, c.needle)) << c.args << "\n" << o.output;
  }
  EXPECT_EQ(run_cli("generate" + model + " --lookup 2 --block 64 --max-tokens 3", "", 60).exit_code, 0) << "control";
}

}  // namespace
}  // namespace exactq::test
