// Stock checkpoints end to end: a tiny Qwen3 and Gemma 3 in Hugging Face's layout with the real
// tokenizer.json and tokenizer_config.json of the model family (tests/hf-compare's npm packages, sha256 checked) and a
// vocab_size padded past the tokenizer, as the published configs have it, converted with
// `exactq convert` and run with `exactq generate` on a text prompt. The lm_head rows of every id
// the tokenizer has are zero, so the model emits only ids past the tokenizer: the run must still
// finish with exit 0, warn once, and keep those ids in its JSON.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"
#include "exactq/tokenizer.h"
#include "model/checkpoint_fixture.h"
#include "model/real_tokenizers.h"

namespace exactq::test {
namespace {

struct Stock {
  std::string tokenizer, model_type;
  std::int64_t vocab;  // the published config's vocab_size
  std::int32_t bos;    // the BOS the tokenizer's template adds, or -1
};

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CliStockTokenizers, ConvertedQwen3AndGemma3GenerateWithPaddedVocabularies) {
  EXACTQ_REQUIRE_REAL_TOKENIZERS();
  for (const Stock& stock : {Stock{"qwen3", "qwen3", 151936, -1}, Stock{"gemma3", "gemma3_text", 262208, 2}}) {
    SCOPED_TRACE(stock.model_type);
    RealTokenizer real;
    for (const RealTokenizer& r : real_tokenizers())
      if (r.name == stock.tokenizer) real = r;
    ASSERT_EQ(sha256_of(real.path), real.sha256);
    ASSERT_EQ(sha256_of(real.config_path), real.config_sha256);
    const std::string& file = real.path;
    const Tokenizer tokenizer = Tokenizer::from_json(read_text(file), file);
    ASSERT_LT(tokenizer.vocab_size(), stock.vocab) << "the config's vocabulary is padded past the tokenizer";

    std::mt19937_64 rng(fresh_seed());
    Tiny s;
    s.model_type = stock.model_type;
    s.quantized = false;
    s.vocab = stock.vocab;
    s.hidden = 64, s.inter = 128, s.layers = 1, s.heads = 2, s.kv = 1, s.head_dim = 32;
    Fixture f = tiny_fixture(s, rng);
    // Zero rows of lm_head for every id the tokenizer has: their logits are exactly 0, the
    // padded rows' are not, and the largest of those is positive.
    TensorToWrite& head = f.at("lm_head.weight");
    std::fill(head.data.begin(), head.data.begin() + std::ptrdiff_t(tokenizer.vocab_size() * s.hidden * 2), std::byte{0});
    TempDir dir;
    const fs::path hf = dir.path / "hf", mlx = dir.path / "mlx";
    fs::create_directories(hf);
    write_fixture(hf, f);
    fs::copy_file(file, hf / "tokenizer.json");
    fs::copy_file(real.config_path, hf / "tokenizer_config.json");

    Outcome o = run_cli("convert --from '" + hf.string() + "' --out '" + mlx.string() + "'", "", 300);
    ASSERT_EQ(o.exit_code, 0) << o.output;
    TempFile json("exactq-stock", ".json");
    o = run_cli("generate --model '" + mlx.string() + "' --prompt 'Hello, world! नमस्ते 你好' --max-tokens 4 --ignore-eos --json " +
                    json.quoted(),
                "", 300);
    ASSERT_EQ(o.exit_code, 0) << o.output;
    EXPECT_EQ(count_of(o.output, "warning:"), 1u) << o.output;
    EXPECT_TRUE(contains(o.output, "have no token in the tokenizer")) << o.output;
    EXPECT_TRUE(contains(o.output, "decode to nothing")) << o.output;
    const nlohmann::json j = nlohmann::json::parse(read_text(json.path));
    EXPECT_EQ(j["prompt_ids"], nlohmann::json(tokenizer.encode("Hello, world! नमस्ते 你好")));
    if (stock.bos >= 0) EXPECT_EQ(j["prompt_ids"][0], stock.bos);
    ASSERT_EQ(j["output_ids"].size(), 4u);
    for (const auto& id : j["output_ids"]) {
      EXPECT_GE(id.get<std::int64_t>(), tokenizer.vocab_size());
      EXPECT_LT(id.get<std::int64_t>(), stock.vocab);
    }
    EXPECT_EQ(j["text"], "");
    // The same checkpoint given the prompt as ids opens the tokenizer and runs alike.
    std::string ids;
    for (const auto& id : j["prompt_ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
    o = run_cli("generate --model '" + mlx.string() + "' --prompt-ids " + ids + " --max-tokens 4 --ignore-eos", "", 300);
    EXPECT_EQ(o.exit_code, 0) << o.output;
  }
}

}  // namespace
}  // namespace exactq::test
