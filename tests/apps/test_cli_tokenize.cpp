// `exactq tokenize` as a child process, on a hand-written tokenizer (tokenizer_fixture.h): ids
// worked out by hand, decoding, JSON, and bad input refused with exit 2 naming the value.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"
#include "model/tokenizer_fixture.h"

namespace exactq::test {
namespace {

struct TokenizerDir {
  TempFile dir{"exactq-tokenize", ""};
  TokenizerDir() {
    std::filesystem::create_directories(dir.path);
    std::ofstream(dir.path / "tokenizer.json") << byte_level_tokenizer(false, true).dump();
  }
  std::string model() const { return "tokenize --model " + dir.quoted(); }
};

TEST(CliTokenize, EncodesAndDecodesAsTheLibraryDoes) {
  TokenizerDir d;
  // "hello the": 265 (the template's BOS); "hello" is he (rank 1) ll (rank 3) o, as (h, e)
  // merges before (l, l); " the" is Ġt (rank 0) + he: 258.
  Outcome o = run_cli(d.model() + " --text 'hello the'");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_EQ(o.output, "265,257,259,111,258\n");
  o = run_cli(d.model() + " --text 'hello the' --no-special");
  EXPECT_EQ(o.output, "257,259,111,258\n");
  o = run_cli(d.model() + " --decode 265,262,258,9999");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_EQ(o.output, "<|begin_of_text|>hello the\n") << "an id past the vocabulary decodes to nothing";
  o = run_cli(d.model() + " --decode 265,262 --no-special");
  EXPECT_EQ(o.output, "hello\n");
  o = run_cli(d.model() + " --text 'hello the' --json");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const nlohmann::json j = nlohmann::json::parse(o.output);
  EXPECT_EQ(j["ids"], nlohmann::json({265, 257, 259, 111, 258}));
  EXPECT_EQ(j["tokens"], nlohmann::json({"<|begin_of_text|>", "he", "ll", "o", "\xc4\xa0the"}));
  EXPECT_EQ(j["decoded"], "<|begin_of_text|>hello the");
  EXPECT_EQ(j["decoded_without_special"], "hello the");
  TempFile text("exactq-tokenize-text", ".txt");
  std::ofstream(text.path, std::ios::binary) << "the\n";
  o = run_cli(d.model() + " --file " + text.quoted() + " --no-special");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_EQ(o.output, "116,257,10\n");  // t, he, \n
}

TEST(CliTokenize, BadInputIsRefusedByName) {
  TokenizerDir d;
  TempFile bad("exactq-tokenize-bad", ".txt");
  std::ofstream(bad.path, std::ios::binary) << "ok \xc3(";
  const struct {
    std::string args, message;
  } cases[] = {
      {d.model(), "exactly one of --text, --file and --decode"},
      {d.model() + " --text a --decode 1", "exactly one of"},
      {d.model() + " --file " + bad.quoted(), "not UTF-8 at byte 3"},
      {d.model() + " --file /nonexistent/x.txt", "/nonexistent/x.txt"},
      {d.model() + " --decode 1,,2", "--decode: an empty item"},
      {d.model() + " --decode 1,x", "--decode"},
      {"tokenize --model /nonexistent/m --text a", "/nonexistent/m/tokenizer.json"},
      {"tokenize --text= --model " + d.dir.quoted(), "--text=: the value after '=' is empty"},
      {d.model() + " --text ''", "--text"},
  };
  for (const auto& c : cases) {
    const Outcome o = run_cli(c.args);
    EXPECT_EQ(o.exit_code, 2) << c.args << "\n" << o.output;
    EXPECT_TRUE(contains(o.output, c.message)) << c.args << "\n" << o.output;
  }
}

}  // namespace
}  // namespace exactq::test
