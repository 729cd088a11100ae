// exactq's tokenizer against Hugging Face `tokenizers` 0.23.2 (the Node binding) on the real
// tokenizer.json files of Llama 3.1, Qwen3 and Gemma 3: tests/hf-compare/reference.js encodes
// and decodes every string of tests/hf-compare/strings.json (scripts of many kinds, combining
// marks decomposed and precomposed, code, white space, emoji sequences, special-token text, long
// words), and every id and every text must be the same here: with and without the special
// tokens, decoded with and without them, a prefix cut in the middle of the ids (characters split
// across byte tokens), and an id past the tokenizer (it decodes to nothing). The streaming
// decoder must give decode's text without ever giving a broken character.
#include <gtest/gtest.h>

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

TEST(TokenizerHuggingFace, RealTokenizersEncodeAndDecodeEveryStringAsTokenizersDoes) {
  EXACTQ_REQUIRE_REAL_TOKENIZERS();
  TempFile out("exactq-hf-reference", ".json");
  const auto [code, log] = run_command("node '" + kHfCompareDir + "/reference.js' " + out.quoted());
  ASSERT_EQ(code, 0) << log;
  const nlohmann::json reference = nlohmann::json::parse(read_text(out.path));
  for (const RealTokenizer& real : real_tokenizers()) {
    SCOPED_TRACE(real.name);
    const nlohmann::json& r = reference.at(real.name);
    ASSERT_EQ(r.at("sha256"), real.sha256);
    const Tokenizer t = Tokenizer::from_json(read_text(real.path), real.path);
    EXPECT_FALSE(t.has_token(real.beyond_id));
    const auto& cases = r.at("cases");
    ASSERT_GE(cases.size(), 200u);
    int failures = 0;
    for (const auto& c : cases) {
      const std::string text = c.at("text");
      const Ids ids = c.at("ids"), plain = c.at("ids_plain"), half = c.at("half"), padded = c.at("padded");
      ASSERT_FALSE(plain.empty()) << "HF encoded to nothing: " << nlohmann::json(text).dump();
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

}  // namespace
}  // namespace exactq::test
