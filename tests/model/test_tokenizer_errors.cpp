// Malformed or unsupported tokenizer files are refused with a CheckpointError naming the file,
// the field and the value (when opened, or for the sections only encoding uses when text is
// encoded); each case's well-formed twin loads and encodes (the control).
#include <gtest/gtest.h>

#include <functional>

#include "exactq/tokenizer.h"
#include "model/tokenizer_fixture.h"

namespace exactq::test {
namespace {

struct Case {
  const char* name;
  bool sentencepiece;
  std::function<void(nlohmann::json&)> breakit;
  std::vector<std::string> message;  // every piece must appear in the refusal
};

std::string refusal(const std::string& text) {
  try {
    Tokenizer::from_json(text, "dir/tokenizer.json").encode("hello there");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(TokenizerErrors, MalformedFilesAreRefusedByName) {
  const std::string G = "\xc4\xa0";
  const std::vector<Case> cases = {
      {"WordPiece", false, [](auto& j) { j["model"]["type"] = "WordPiece"; }, {"model.type", "WordPiece", "not supported"}},
      {"Unigram", true, [](auto& j) { j["model"]["type"] = "Unigram"; }, {"model.type", "Unigram"}},
      {"pre-tokenizer", false, [](auto& j) { j["pre_tokenizer"]["pretokenizers"][1]["type"] = "Whitespace"; },
       {"pre_tokenizer.pretokenizers[1].type", "Whitespace"}},
      {"bad regex", false, [](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L}+"; },
       {"pre_tokenizer.pretokenizers[0].pattern", "p{L}+", "not a valid regular expression"}},
      {"Split behavior", false, [](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Merged"; },
       {"behavior", "'Merged'", "not one of"}},
      {"normalizer", true, [](auto& j) { j["normalizer"]["normalizers"][0] = {{"type", "Lowercase"}}; },
       {"normalizer.normalizers[0].type", "Lowercase"}},
      {"decoder", false, [](auto& j) { j["decoder"] = {{"type", "WordPiece"}}; }, {"decoder.type", "WordPiece"}},
      {"post-processor", false, [](auto& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; },
       {"post_processor.type", "RobertaProcessing"}},
      {"negative id", false, [](auto& j) { j["model"]["vocab"]["he"] = -3; }, {"model.vocab['he']", "-3", "out of range"}},
      {"huge id", false, [](auto& j) { j["model"]["vocab"]["he"] = 1LL << 40; }, {"model.vocab['he']", "1099511627776"}},
      {"string id", false, [](auto& j) { j["model"]["vocab"]["he"] = "7"; }, {"model.vocab['he']", "not an integer"}},
      {"duplicate id", false, [](auto& j) { j["model"]["vocab"]["he"] = 259; }, {"id 259 is also the id of"}},
      {"merge of an unknown token", false, [](auto& j) { j["model"]["merges"][3] = {"l", "zz"}; },
       {"model.merges[3]", "'zz' is not in model.vocab"}},
      {"merge result not in vocab", false, [](auto& j) { j["model"]["merges"][3] = {"o", "o"}; }, {"model.merges[3]", "'oo'"}},
      {"merge without a space", false, [](auto& j) { j["model"]["merges"][0] = "abc"; },
       {"model.merges[0]", "'abc' is not two tokens"}},
      {"merge of three", false, [](auto& j) { j["model"]["merges"][0] = {"a", "b", "c"}; }, {"model.merges[0]"}},
      {"dropout", false, [](auto& j) { j["model"]["dropout"] = 0.1; }, {"model.dropout", "0.1"}},
      {"unk not in vocab", true, [](auto& j) { j["model"]["unk_token"] = "<nope>"; }, {"model.unk_token", "<nope>"}},
      {"added id clash", false, [](auto& j) { j["added_tokens"][0]["id"] = 5; }, {"added_tokens[0].id", "id 5", "already the id of"}},
      {"added vs vocab id", true, [](auto& j) { j["added_tokens"][1]["id"] = 7; }, {"added_tokens[1].id", "'<s>' has id 7"}},
      {"added twice", false, [](auto& j) { j["added_tokens"][2]["content"] = "<|end_of_text|>"; }, {"added_tokens[2].content", "added twice"}},
      {"empty added", false, [](auto& j) { j["added_tokens"][2]["content"] = ""; }, {"added_tokens[2].content", "is empty"}},
      {"template token", true, [](auto& j) { j["post_processor"]["special_tokens"]["<s>"]["ids"] = {4000}; },
       {"post_processor.special_tokens.<s>.ids[0]", "4000"}},
      {"template name", true, [](auto& j) { j["post_processor"]["special_tokens"].erase("<s>"); },
       {"post_processor.special_tokens.<s>", "missing"}},
      {"no model", false, [](auto& j) { j.erase("model"); }, {"model", "missing"}},
      {"Strip stop", true, [](auto& j) { j["decoder"]["decoders"][3]["stop"] = 2; }, {"decoder.decoders[3].stop", "after Fuse"}},
      {"after ByteFallback", true,
       [](auto& j) { j["decoder"]["decoders"][2] = {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "b"}}; },
       {"decoder.decoders[2].type", "after ByteFallback"}},
      {"metaspace replacement", true,
       [](auto& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}, {"prepend_scheme", "first"}}; },
       {"pre_tokenizer.replacement", "'ab' is not one character"}},
  };
  for (const Case& c : cases) {
    nlohmann::json j = c.sentencepiece ? sentencepiece_tokenizer(true) : byte_level_tokenizer(false, false);
    EXPECT_EQ(refusal(j.dump()), "(accepted)") << c.name << ": the control";
    c.breakit(j);
    const std::string what = refusal(j.dump());
    EXPECT_TRUE(what.starts_with("dir/tokenizer.json: ")) << c.name << ": " << what;
    for (const std::string& piece : c.message) EXPECT_NE(what.find(piece), std::string::npos) << c.name << ": " << what;
  }
}

// What only encoding uses is refused when text is encoded: the ids of a model whose prompt is
// given as ids still decode.
TEST(TokenizerErrors, EncoderSectionsAreRefusedWhenTextIsEncodedNotWhenOpened) {
  for (const auto& breakit : std::vector<std::function<void(nlohmann::json&)>>{
           [](auto& j) { j["normalizer"] = {{"type", "BertNormalizer"}}; },
           [](auto& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; },
           [](auto& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; },
           [](auto& j) { j["model"]["dropout"] = 0.5; }}) {
    nlohmann::json j = sentencepiece_tokenizer(true);
    breakit(j);
    const Tokenizer t = Tokenizer::from_json(j.dump(), "dir/tokenizer.json");
    const std::vector<std::int32_t> ids = {269, 3 + 0x21};  // "▁hello", <0x21>
    EXPECT_EQ(t.decode(ids), "hello!");
    try {
      t.encode("hello");
      ADD_FAILURE() << "encoded with " << j.dump().substr(0, 80);
    } catch (const CheckpointError& e) {
      EXPECT_TRUE(std::string(e.what()).starts_with("dir/tokenizer.json: ")) << e.what();
      EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
    }
  }
}

TEST(TokenizerErrors, NotJsonIsRefused) {
  const std::string good = byte_level_tokenizer(false, false).dump();
  EXPECT_EQ(refusal(good), "(accepted)");
  EXPECT_NE(refusal(good.substr(0, good.size() / 2)).find("malformed JSON"), std::string::npos);
  EXPECT_NE(refusal("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(refusal("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"a\": 1}}}").find("appears twice"), std::string::npos);
}

TEST(TokenizerErrors, BadConfigFilesAreRefusedByName) {
  TokenizerFiles f;
  f.dir = "m";
  f.tokenizer_json = byte_level_tokenizer(false, false).dump();
  f.config = R"({"eos_token_id": [266, 9000]})";
  try {
    Tokenizer::from_files(f);
    ADD_FAILURE() << "accepted an eos_token_id outside the vocabulary";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("m/config.json: eos_token_id[1]: token id 9000"), std::string::npos) << e.what();
  }
  f.config = R"({"eos_token_id": [266, 267]})";
  EXPECT_NO_THROW(Tokenizer::from_files(f));
  f.tokenizer_config = R"({"bos_token": "<|nope|>"})";
  try {
    Tokenizer::from_files(f);
    ADD_FAILURE() << "accepted an unknown bos_token";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("m/tokenizer_config.json: bos_token: '<|nope|>' is not a token"), std::string::npos) << e.what();
  }
  f.tokenizer_config = R"({"add_bos_token": true})";
  EXPECT_THROW(Tokenizer::from_files(f), CheckpointError);
  f.tokenizer_config = R"({"bos_token": "<|begin_of_text|>", "add_bos_token": true})";
  EXPECT_NO_THROW(Tokenizer::from_files(f));
}

TEST(TokenizerErrors, TextThatIsNotUtf8IsRefused) {
  const Tokenizer t = Tokenizer::from_json(byte_level_tokenizer(false, false).dump());
  EXPECT_NO_THROW(t.encode("ok \xc3\xa9", false));
  try {
    t.encode("ok \xc3(", false);
    ADD_FAILURE() << "accepted invalid UTF-8";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace exactq::test
