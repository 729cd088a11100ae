// `exactq bench-spec` as a child process on a tiny bf16 model: every arm x block x acceptance row in
// the JSON, every width-invariant arm byte-identical to classic decode on every prompt, the inexact
// wide arm differing on some prompt (the negative control), the markdown and SVG written, and bad
// arguments refused with exit 2, naming the value.
#include <gtest/gtest.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"
#include "exactq/tokenizer.h"

namespace exactq::test {
namespace {

TEST(CliBenchSpec, EveryArmMeasuredExactArmsIdenticalWideDiffersBadArgumentsExit2) {
  // bf16, not f32: wide's different sums change the logit bits either way, but a greedy token
  // changes only where that meets a near tie, and bf16's coarse rounding makes ties. On this model
  // and seed, wide leaves classic's output at position 4 of the first prompt; in f32 it does not.
  TempFile dir("exactq-bench-spec-model", "");
  ASSERT_EQ(run_cli("make-model --arch qwen3 --shape tiny --dtype bf16 --seed 3 --out " + dir.quoted(), "", 120).exit_code, 0);
  TempFile json("exactq-bench-spec", ".json"), md("exactq-bench-spec", ".md"), svg("exactq-bench-spec", ".svg");
  const Outcome o = run_cli("bench-spec --model " + dir.quoted() +
                                " --backend cpu --block 2,4 --acceptance 0.9 --prompts 2 --tokens 24 --json " +
                                json.quoted() + " --markdown " + md.quoted() + " --plot " + svg.quoted(),
                            "", 120);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "replay instrument (a benchmark instrument, not a drafter)")) << o.output;
  EXPECT_TRUE(contains(o.output, "spec-exact     identical to classic-exact: yes (2 of 2 prompts")) << o.output;
  EXPECT_TRUE(contains(o.output, "verdict: every width-invariant speculative arm is byte-identical")) << o.output;

  std::ifstream in(json.path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j["identical"].get<bool>());
  std::set<std::pair<std::string, std::int64_t>> seen;
  for (const auto& r : j["rows"]) {
    EXPECT_EQ(r["acceptance_setting"].get<double>(), 0.9);
    seen.insert({r["arm"].get<std::string>(), r["block"].get<std::int64_t>()});
    EXPECT_GT(r["tokens_per_second"].get<double>(), 0) << r;
    const std::string arm = r["arm"];
    if (arm != "spec-wide") {
      EXPECT_TRUE(r["identical"].get<bool>()) << r;
    }
    if (arm.starts_with("spec-")) {
      EXPECT_GE(r["tokens_per_round"].get<double>(), 1.0) << r;
    }
  }
  EXPECT_EQ(j["rows"].size(), 12u);  // 6 arms x 2 blocks x 1 acceptance
  for (const std::string arm : {"classic-exact", "classic-mma", "spec-narrow", "spec-exact", "spec-mma", "spec-wide"})
    for (std::int64_t b : {2, 4}) EXPECT_TRUE(seen.count({arm, b})) << arm << " " << b;
  // The negative control: wide leaves classic-exact's output on some prompt, and says where.
  bool wide_seen = false;
  for (const auto& a : j["arms"])
    if (a["arm"] == "spec-wide") {
      wide_seen = true;
      EXPECT_FALSE(a["identical"].get<bool>()) << a;
      EXPECT_TRUE(contains(a["first_difference"].get<std::string>(), "first at output position")) << a;
    }
  EXPECT_TRUE(wide_seen);
  EXPECT_TRUE(contains(o.output, "(inexact: expected)")) << o.output;
  EXPECT_GT(std::filesystem::file_size(md.path), 0u);
  EXPECT_GT(std::filesystem::file_size(svg.path), 0u);
  std::ifstream svg_in(svg.path);
  const std::string svg_text((std::istreambuf_iterator<char>(svg_in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(svg_text, "<polyline")) << svg_text;
  EXPECT_TRUE(contains(svg_text, "</svg>"));

  const std::string base = "bench-spec --model " + dir.quoted() + " --backend cpu";
  const std::pair<std::string, std::string> bad[] = {{" --block 1", "1"},
                                                     {" --acceptance 1.5", "1.5"},
                                                     {" --arms spec-exact,fast", "fast"},
                                                     {" --prompts 0", "Value 0"},
                                                     {" --prompt-length 9-3", "9-3"},
                                                     {" --prompt-length 0", "0"}};
  for (const auto& [args, value] : bad) {
    const Outcome b = run_cli(base + args, "", 60);
    EXPECT_EQ(b.exit_code, 2) << args << "\n" << b.output;
    const std::string option = args.substr(1, args.find(' ', 1) - 1);
    EXPECT_TRUE(contains(b.output, option)) << args << "\n" << b.output;
    EXPECT_TRUE(contains(b.output, value)) << args << "\n" << b.output;
  }
}

// The CPU's smaller version of the exactness run at scale: prompts of mixed lengths (past two
// attention chunks), block widths up to 16, every exact arm identical to classic decode on every
// run, and wide leaving it on some (the negative control, in the same run). Wide's flips need
// near ties; with this model and --seed 3 it leaves classic on one prompt of the 6, in 6 of the 36
// runs (seeds 1, 2 and 4 show none).
TEST(CliBenchSpec, MixedPromptLengthsUpToBlock16EveryExactArmIdentical) {
  TempFile dir("exactq-bench-spec-mixed", "");
  ASSERT_EQ(run_cli("make-model --arch qwen3 --shape tiny --dtype bf16 --seed 3 --out " + dir.quoted(), "", 120).exit_code, 0);
  TempFile json("exactq-bench-spec-mixed", ".json");
  // Under the sanitizers, the first 4 prompts (the same ones: prompts are drawn in order from the
  // seed, and wide's difference is on the fourth) and fewer widths.
  const std::string sizes = kSanitized ? " --block 2,5,16 --prompts 4" : " --block 2,3,5,8,12,16 --prompts 6";
  const Outcome o = run_cli("bench-spec --model " + dir.quoted() +
                                " --backend cpu --arms classic-exact,classic-mma,spec-exact,spec-mma,spec-narrow,spec-wide" +
                                sizes + " --acceptance 0.7 --prompt-length 3-150 --tokens 40 --seed 3 --json " + json.quoted(),
                            "", 600);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  // The running tally on the progress lines: every checked run so far identical, wide's
  // differences counted apart.
  const std::regex tally(R"(\(checked runs (\d+), differing (\d+); inexact differing (\d+)\))");
  std::smatch last;
  for (auto it = std::sregex_iterator(o.output.begin(), o.output.end(), tally); it != std::sregex_iterator(); ++it)
    last = *it;
  ASSERT_FALSE(last.empty()) << o.output;
  EXPECT_FALSE(contains(o.output, "DIFFERS:")) << o.output;
  std::ifstream in(json.path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  const auto lengths = j["config"]["prompt_lengths"].get<std::vector<std::int64_t>>();
  ASSERT_EQ(lengths.size(), kSanitized ? 4u : 6u);
  EXPECT_TRUE(std::all_of(lengths.begin(), lengths.end(), [](std::int64_t n) { return n >= 3 && n <= 150; }));
  EXPECT_NE(*std::min_element(lengths.begin(), lengths.end()), *std::max_element(lengths.begin(), lengths.end()));
  const std::int64_t widths = kSanitized ? 3 : 6;
  EXPECT_EQ(std::stoll(last[1].str()), 3 * widths * std::int64_t(lengths.size())) << "exact, mma and narrow, every run";
  EXPECT_EQ(std::stoll(last[2].str()), 0);
  for (const auto& arm : j["arms"]) {
    const std::string name = arm["arm"];
    if (name == "spec-wide") {
      EXPECT_GT(arm["differing_runs"].get<std::int64_t>(), 0) << "the negative control";
      EXPECT_EQ(std::stoll(last[3].str()), arm["differing_runs"].get<std::int64_t>()) << "the tally counts wide apart";
    } else if (arm["checked"].get<bool>()) {
      EXPECT_EQ(arm["differing_runs"].get<std::int64_t>(), 0) << name;
    }
  }
}


// Real prompts with a real draft model: the shipped pair, two code prompts from a --prompt-file
// (one a bare string, one an object), encoded with the target's tokenizer.json exactly as the
// tokenizer encodes them, the draft arms byte-identical to classic decode. Bad prompt files and a
// model without a tokenizer are refused with exit 2, naming the file, the prompt or the option.
TEST(CliBenchSpec, PromptFileWithTheTrainedPair) {
  const std::string models = EXACTQ_SOURCE_DIR "/models";
  const std::string texts[] = {"import os\nimport sys\n\n\ndef main(argv", "    def __repr__(self):\n        return"};
  TempFile prompts("exactq-bench-spec-prompts"), json("exactq-bench-spec-pair");
  std::ofstream(prompts.path) << nlohmann::json({{"prompts", {texts[0], {{"text", texts[1]}, {"path", "x.py"}}}}}).dump();
  const Outcome o = run_cli("bench-spec --model " + models + "/pycode-target --draft " + models +
                                "/pycode-draft --backend cpu --arms classic-exact,spec-exact --block 2,4 --acceptance 0.7 "
                                "--tokens 12 --prompt-file " + prompts.quoted() + " --json " + json.quoted(),
                            "", 300);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "2 prompts from " + prompts.path.string())) << o.output;
  std::ifstream in(json.path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["config"]["prompt_file"], prompts.path.string());
  const Tokenizer tokenizer = Tokenizer::open(models + "/pycode-target");
  ASSERT_EQ(j["prompt_ids"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i)
    EXPECT_EQ(j["prompt_ids"][i].get<std::vector<std::int32_t>>(), tokenizer.encode(texts[i])) << i;
  std::size_t draft_rows = 0;
  for (const auto& r : j["rows"])
    if (r["kind"] == "draft") {
      ++draft_rows;
      EXPECT_TRUE(r["identical"].get<bool>()) << r;
      EXPECT_GT(r["drafted"].get<std::int64_t>(), 0) << r;
    }
  EXPECT_EQ(draft_rows, 4u);  // draft-exact and draft-mma at blocks 2 and 4
  EXPECT_TRUE(j["identical"].get<bool>());

  TempFile tiny("exactq-bench-spec-untokenized", "");
  ASSERT_EQ(run_cli("make-model --arch llama --shape tiny --seed 5 --out " + tiny.quoted(), "", 120).exit_code, 0);
  std::filesystem::remove(tiny.path / "tokenizer.json");
  TempFile bad_file("exactq-bench-spec-bad");
  const std::string target = " --model " + models + "/pycode-target";
  const std::pair<std::string, std::string> bad[] = {
      {R"({"prompts": ["def f():", 3]})", "prompt 1"},
      {R"({"prompts": []})", "holds no prompts"},
      {R"({"text": "x"})", "holds no prompts"},
      {"{\"prompts\": [\"x\"", "is not JSON"},
      {R"({"prompts": [{"path": "x.py"}]})", "prompt 0"}};
  for (const auto& [content, message] : bad) {
    std::ofstream(bad_file.path, std::ios::trunc) << content;
    const Outcome b = run_cli("bench-spec" + target + " --backend cpu --prompt-file " + bad_file.quoted(), "", 60);
    EXPECT_EQ(b.exit_code, 2) << content << "\n" << b.output;
    EXPECT_TRUE(contains(b.output, message)) << content << "\n" << b.output;
  }
  std::ofstream(bad_file.path, std::ios::trunc) << R"({"prompts": ["x"]})";
  const std::pair<std::string, std::string> refused[] = {
      {" --model " + tiny.quoted() + " --prompt-file " + bad_file.quoted(), "tokenizer.json"},
      {target + " --prompt-file /nonexistent/prompts.json", "/nonexistent/prompts.json"},
      {target + " --prompt-file " + bad_file.quoted() + " --prompt-length 5", "--prompt-length"},
      {target + " --prompt-file " + bad_file.quoted() + " --prompts 3", "--prompts"}};
  for (const auto& [args, message] : refused) {
    const Outcome b = run_cli("bench-spec --backend cpu" + args, "", 60);
    EXPECT_EQ(b.exit_code, 2) << args << "\n" << b.output;
    EXPECT_TRUE(contains(b.output, message)) << args << "\n" << b.output;
  }
}

}  // namespace
}  // namespace exactq::test
