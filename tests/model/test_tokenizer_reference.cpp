// exactq's tokenizer against Hugging Face `tokenizers` itself: the shipped pair's tokenizer.json
// was trained by `tokenizers` (train/tokenizer.py), which also encoded a few hundred strings
// (hand-written edge cases, held-out code, random code points) into
// tests/model/data/pycode-tokenizer-reference.json. Every encoding must match id for id, with and
// without the special tokens, and decoding must give the text back. The negative control: the
// same tokenizer with one merge removed must miss some of the references.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "exactq/tokenizer.h"

namespace exactq::test {
namespace {

const std::string kTokenizerDir = EXACTQ_SOURCE_DIR "/models/pycode-target";
const std::string kReference = EXACTQ_SOURCE_DIR "/tests/model/data/pycode-tokenizer-reference.json";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Case {
  std::string text;
  std::vector<std::int32_t> ids, ids_plain;
};

std::vector<Case> reference_cases() {
  const nlohmann::json j = nlohmann::json::parse(read(kReference));
  std::vector<Case> out;
  for (const auto& c : j.at("cases"))
    out.push_back({c.at("text").get<std::string>(), c.at("ids").get<std::vector<std::int32_t>>(),
                   c.at("ids_plain").get<std::vector<std::int32_t>>()});
  return out;
}

// How many cases `t` encodes differently from the reference (with the special tokens).
std::size_t mismatches(const Tokenizer& t, const std::vector<Case>& cases) {
  std::size_t n = 0;
  for (const Case& c : cases) n += t.encode(c.text) != c.ids;
  return n;
}

TEST(TokenizerReference, EncodesEveryStringAsTokenizersDoes) {
  const Tokenizer t = Tokenizer::open(kTokenizerDir);
  const std::vector<Case> cases = reference_cases();
  ASSERT_GE(cases.size(), 300u);
  for (const Case& c : cases) {
    EXPECT_EQ(t.encode(c.text), c.ids) << "text: " << nlohmann::json(c.text).dump();
    EXPECT_EQ(t.encode(c.text, false), c.ids_plain) << "text: " << nlohmann::json(c.text).dump();
    EXPECT_EQ(t.decode(c.ids_plain), c.text) << "text: " << nlohmann::json(c.text).dump();
  }
}

TEST(TokenizerReference, NegativeControlOneMergeRemovedMissesSomeReferences) {
  const std::vector<Case> cases = reference_cases();
  nlohmann::json tokenizer = nlohmann::json::parse(read(kTokenizerDir + "/tokenizer.json"));
  auto& merges = tokenizer.at("model").at("merges");
  ASSERT_GT(merges.size(), 0u);
  merges.erase(merges.begin());  // the first merge: two bytes that run together most often
  const Tokenizer broken = Tokenizer::from_json(tokenizer.dump());
  EXPECT_GT(mismatches(broken, cases), 0u);
  EXPECT_EQ(mismatches(Tokenizer::open(kTokenizerDir), cases), 0u);
}

}  // namespace
}  // namespace exactq::test
