// exactq's tokenizer against Hugging Face `tokenizers` 0.23.2 (the Node binding) on the real
// tokenizer.json files of Llama 3.1, Qwen3 and Gemma 3: tests/hf-compare/reference.js encodes
// and decodes every string of tests/hf-compare/strings.json (scripts of many kinds, combining
// marks decomposed and precomposed, code, white space, emoji sequences, special-token text, long
// words), and every id and every text must be the same here: with and without the special
// tokens, decoded with and without them, a prefix cut in the middle of the ids (characters split
// across byte tokens), and an id past the tokenizer (it decodes to nothing). The streaming
// decoder must give decode's text without ever giving a broken character. Variants of the real
// files (sections replaced: NFKC, NFD, NFKD, Strip, every Split behavior and invert, Metaspace,
// the Strip and Metaspace decoders) check the components the three files do not use.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"
#include "exactq/tokenizer.h"
#include "model/real_tokenizers.h"
#include "model/tokenizer_parts.h"

namespace exactq::test {
namespace {

using Ids = std::vector<std::int32_t>;

// The stream's text, with a failure where a step gives text that is not valid UTF-8.
std::string streamed(const Tokenizer& t, const Ids& ids, bool& broken) {
  auto s = t.stream();
  std::string out;
  for (const std::int32_t id : ids) {
    const std::string piece = s.step(id);
    broken = broken || tok::utf8_invalid_at(piece).has_value();
    out += piece;
  }
  return out + s.finish();
}

// Runs reference.js on the real files (`variants` false) or on their variants, and compares.
void compare_with_tokenizers(bool variants) {
  TempFile out("exactq-hf-reference", ".json");
  const auto [code, log] = run_command("node '" + kHfCompareDir + "/reference.js' " + out.quoted() + (variants ? " variants" : " real"));
  ASSERT_EQ(code, 0) << log;
  const nlohmann::json reference = nlohmann::json::parse(read_text(out.path));
  const nlohmann::json manifest = nlohmann::json::parse(read_text(kHfCompareDir + "/tokenizers.json"));
  // (name, tokenizer.json text, its file, an id past it)
  std::vector<std::tuple<std::string, std::string, std::string, std::int32_t>> runs;
  for (const RealTokenizer& real : real_tokenizers()) runs.emplace_back(real.name, read_text(real.path), real.path, real.beyond_id);
  for (const auto& v : variants ? manifest.at("variants") : nlohmann::json::array()) {
    const auto base = std::find_if(runs.begin(), runs.end(), [&](const auto& r) { return std::get<0>(r) == v.at("base"); });
    ASSERT_NE(base, runs.end()) << v.dump();
    nlohmann::json j = nlohmann::json::parse(std::get<1>(*base));
    for (const auto& [key, value] : v.at("set").items()) j[key] = value;
    runs.emplace_back(v.at("name"), j.dump(), std::get<2>(*base), std::get<3>(*base));
  }
  if (variants) runs.erase(runs.begin(), runs.begin() + std::ptrdiff_t(real_tokenizers().size()));
  ASSERT_EQ(runs.size(), reference.size());
  for (const auto& [name, json_text, path, beyond_id] : runs) {
    SCOPED_TRACE(name);
    const nlohmann::json& r = reference.at(name);
    const Tokenizer t = Tokenizer::from_json(json_text, path);
    EXPECT_FALSE(t.has_token(beyond_id));
    const auto& cases = r.at("cases");
    ASSERT_GE(cases.size(), 200u);
    int failures = 0;
    for (const auto& c : cases) {
      const std::string text = c.at("text");
      const Ids ids = c.at("ids"), plain = c.at("ids_plain"), half = c.at("half"), padded = c.at("padded");
      bool broken = false;
      const bool same = t.encode(text, true) == ids && t.encode(text, false) == plain &&
                        t.decode(ids, false) == c.at("decoded") && t.decode(ids, true) == c.at("decoded_skip") &&
                        t.decode(half) == c.at("decoded_half") && t.decode(padded) == c.at("decoded_padded") &&
                        streamed(t, ids, broken) == c.at("decoded") && streamed(t, half, broken) == c.at("decoded_half");
      EXPECT_FALSE(broken) << "the stream gave a broken character for " << nlohmann::json(text).dump();
      if (same) continue;
      // The first few differences in full; the count of all.
      if (++failures <= 5) {
        EXPECT_EQ(t.encode(text, true), ids) << nlohmann::json(text).dump();
        EXPECT_EQ(t.encode(text, false), plain) << nlohmann::json(text).dump();
        EXPECT_EQ(t.decode(ids, false), c.at("decoded")) << nlohmann::json(text).dump();
        EXPECT_EQ(t.decode(ids, true), c.at("decoded_skip")) << nlohmann::json(text).dump();
        EXPECT_EQ(t.decode(half), c.at("decoded_half")) << nlohmann::json(text).dump();
        EXPECT_EQ(t.decode(padded), c.at("decoded_padded")) << nlohmann::json(text).dump();
      }
    }
    EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " strings differ from Hugging Face tokenizers";
  }
}

TEST(TokenizerHuggingFace, RealTokenizersEncodeAndDecodeEveryStringAsTokenizersDoes) {
  EXACTQ_REQUIRE_REAL_TOKENIZERS();
  compare_with_tokenizers(false);
}

TEST(TokenizerHuggingFace, VariantsWithEveryOtherComponentEncodeAndDecodeAsTokenizersDoes) {
  EXACTQ_REQUIRE_REAL_TOKENIZERS();
  compare_with_tokenizers(true);
}

}  // namespace
}  // namespace exactq::test
