// exactq serve's chat renderers against a real Jinja implementation, @huggingface/jinja (pinned in
// tests/hf-compare/package.json), on the real chat templates of Llama 3.1, Qwen3 and Gemma 3: the
// chat_template of each tokenizer_config.json that tests/hf-compare/tokenizers.json pins (sha256
// checked). tests/hf-compare/chat-reference.js renders every message list below with
// add_generation_prompt and the config's bos_token and eos_token; exactq must recognise each
// template as its family and render every list to the same bytes, and refuse (invalid_argument)
// exactly the lists the template refuses.
//
// Dates: the pinned Llama 3.1 package's template is the short Llama 3 one, with no knowledge-date
// system turn, so no date enters either side; a pinned template that wrote today's date would
// differ from exactq's fixed one and fail here.
//
// exactq follows Python's Jinja (transformers' apply_chat_template), where @huggingface/jinja's
// string methods are JavaScript's: its `trim` strips U+FEFF and keeps U+0085 and U+001C-U+001F
// at the edges, and its strip/lstrip('\n') strip all white space, not only newlines. The lists
// keep those characters away from trimmed edges, and a Qwen3 answer or reasoning after the last
// user query from white space other than newlines at its edges; all other white space (ASCII,
// no-break, ideographic, em space, line separator) is stripped alike by both.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"
#include "model/real_tokenizers.h"
#include "serve/chat_template.h"

namespace exactq::serve {
namespace {

using nlohmann::json;
using test::kHfCompareDir;

// The message lists, written for the reference as they are.
const json kChats = json::parse(R"json([
  {"name": "system and user", "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello!"}]},
  {"name": "user only", "messages": [{"role": "user", "content": "What is the capital of France?"}]},
  {"name": "multi-turn", "messages": [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "Tell me a joke."}]},
  {"name": "system and multi-turn", "messages": [
    {"role": "system", "content": "Answer in one word."},
    {"role": "user", "content": "Colour of the sky?"},
    {"role": "assistant", "content": "Blue."},
    {"role": "user", "content": "And grass?"},
    {"role": "assistant", "content": "Green."},
    {"role": "user", "content": "Snow?"}]},
  {"name": "white space at the edges", "messages": [
    {"role": "system", "content": "  Be brief.\n"},
    {"role": "user", "content": "\n\tHi there  \r\n"}]},
  {"name": "Unicode white space at the edges", "messages": [
    {"role": "system", "content": "\u3000Sei kurz.\u00a0"},
    {"role": "user", "content": "\u00a0\u2003Grüß dich\u2028\u3000"},
    {"role": "assistant", "content": "\u2009Hallo\u202f"},
    {"role": "user", "content": "\u205fWie geht's?\u1680"}]},
  {"name": "Unicode", "messages": [
    {"role": "user", "content": "日本語のテキスト 🦙👍🏽 nai\u0308ve café — ελληνικά, العربية"},
    {"role": "assistant", "content": "Ünïcödé ✓ 한국어 \ufeff inside"},
    {"role": "user", "content": "שלום! 😀 \u200b zero width"}]},
  {"name": "special characters", "messages": [
    {"role": "user", "content": "{{ messages }} {% if x %}y{% endif %} {# c #} <|im_start|>user <start_of_turn> <|eot_id|> \\ \" ' \t end"},
    {"role": "assistant", "content": "<bos><|begin_of_text|> '}}' \"{%\" <end_of_turn>"},
    {"role": "user", "content": "<think> alone, and a lone </ think>"}]},
  {"name": "empty content", "messages": [{"role": "user", "content": ""}]},
  {"name": "empty turns", "messages": [
    {"role": "system", "content": ""},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": ""},
    {"role": "user", "content": ""}]},
  {"name": "white space only", "messages": [{"role": "user", "content": " \n\t "}]},
  {"name": "ends with the assistant", "messages": [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello"}]},
  {"name": "reasoning in the history", "messages": [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4"},
    {"role": "user", "content": "And 3+3?"}]},
  {"name": "reasoning in the last turn", "messages": [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "\n<think>\n\nAdd them.\n\n</think>\n\n4"}]},
  {"name": "reasoning after a tool response", "messages": [
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "<think>Look it up.</think>Checking.</think>\nsecond"},
    {"role": "user", "content": "<tool_response>sunny</tool_response>"}]},
  {"name": "system message later", "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello"},
    {"role": "system", "content": "Now answer in French."},
    {"role": "user", "content": "Bye"}]},
  {"name": "system message in the assistant's place", "messages": [
    {"role": "user", "content": "Hi"},
    {"role": "system", "content": "Be brief."}]},
  {"name": "system message only", "messages": [{"role": "system", "content": "Be brief."}]},
  {"name": "two user turns", "messages": [
    {"role": "user", "content": "a"},
    {"role": "user", "content": "b"}]},
  {"name": "assistant first", "messages": [
    {"role": "assistant", "content": "Hello"},
    {"role": "user", "content": "Hi"}]}
])json");

std::vector<ChatMessage> messages_of(const json& chat) {
  std::vector<ChatMessage> out;
  for (const auto& m : chat.at("messages")) out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  return out;
}

// A special token of tokenizer_config.json: its text, an object holding it as `content`, or null.
std::string token_text(const json& token) {
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object()) return token.at("content").get<std::string>();
  return "";
}

// Why the comparison cannot run here, or "" where it can.
std::string jinja_missing() {
  std::string why = test::real_tokenizers_missing();
  if (why.empty() && !std::filesystem::exists(kHfCompareDir + "/node_modules/@huggingface/jinja/package.json"))
    why = "@huggingface/jinja is not installed in tests/hf-compare/node_modules (scripts/setup.sh runs npm ci there)";
  for (const auto& t : test::real_tokenizers())
    if (why.empty() && !std::filesystem::exists(t.config_path)) why = t.config_path + " is missing (npm ci in tests/hf-compare)";
  return why;
}

struct RealTemplate {
  std::string name;
  ChatTemplate chat_template;
  json renders;  // the reference's, one per list of kChats
};

// The family each real template must be recognised as.
const std::map<std::string, ChatFormat> kFamilies = {
    {"llama3_1", ChatFormat::llama3}, {"qwen3", ChatFormat::chatml}, {"gemma3", ChatFormat::gemma}};

class ChatTemplateJinja : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = jinja_missing();
    if (!why.empty()) {
      if (test::in_ci()) FAIL() << "CI must run this test with @huggingface/jinja and the real templates: " << why;
      GTEST_SKIP() << "skipped (needs node, @huggingface/jinja and the real tokenizer_config.json files): " << why;
    }
    test::TempFile chats("exactq-jinja-chats"), out("exactq-jinja-reference");
    std::ofstream(chats.path) << kChats.dump();
    const auto [code, log] =
        test::run_command("node '" + kHfCompareDir + "/chat-reference.js' " + chats.quoted() + " " + out.quoted());
    ASSERT_EQ(code, 0) << log;
    const json reference = json::parse(test::read_text(out.path));
    ASSERT_EQ(reference.size(), kFamilies.size());
    for (const auto& real : test::real_tokenizers()) {
      // exactq reads the template itself, from the file the reference checked.
      ASSERT_EQ(test::sha256_of(real.config_path), real.config_sha256) << real.config_path;
      const json config = json::parse(test::read_text(real.config_path));
      const TemplateLookup found =
          recognise_chat_template(config.at("chat_template").get<std::string>(), token_text(config.value("bos_token", json())));
      ASSERT_TRUE(found.chat_template) << real.name << ": " << found.error;
      ASSERT_EQ(found.chat_template->format, kFamilies.at(real.name)) << real.name;
      const json& renders = reference.at(real.name).at("renders");
      ASSERT_EQ(renders.size(), kChats.size()) << real.name;
      templates_.push_back({real.name, *found.chat_template, renders});
    }
  }
  std::vector<RealTemplate> templates_;
};

TEST_F(ChatTemplateJinja, EveryMessageListRendersAsTheRealTemplateDoes) {
  for (const RealTemplate& t : templates_) {
    std::size_t refused = 0;
    for (std::size_t i = 0; i < kChats.size(); ++i) {
      const std::string name = kChats[i].at("name");
      SCOPED_TRACE(t.name + ", " + name);
      const json& reference = t.renders[i];
      ASSERT_EQ(reference.at("name").get<std::string>(), name);
      const std::vector<ChatMessage> messages = messages_of(kChats[i]);
      if (reference.contains("error")) {
        ++refused;
        EXPECT_THROW(render_chat(t.chat_template, messages), std::invalid_argument)
            << "the template refuses it: " << reference.at("error");
        continue;
      }
      try {
        const std::string ours = render_chat(t.chat_template, messages);
        EXPECT_EQ(ours, reference.at("text").get<std::string>())
            << "exactq:  " << json(ours).dump() << "\nJinja:   " << reference.at("text").dump();
      } catch (const std::invalid_argument& e) {
        ADD_FAILURE() << "exactq refuses what the template renders: " << e.what();
      }
    }
    // Gemma's template alone refuses lists: three whose roles do not alternate user/assistant.
    EXPECT_EQ(refused, t.name == "gemma3" ? 3u : 0u) << t.name;
  }
}

// The control: the comparison tells the families apart, so a renderer of the wrong family (or a
// wrong turn marker) cannot pass it. Every list as exactq renders it for one family differs from
// every other family's Jinja text of the same list.
TEST_F(ChatTemplateJinja, TheControlAnotherFamilysRenderingDiffers) {
  std::size_t compared = 0;
  for (const RealTemplate& ours : templates_)
    for (const RealTemplate& theirs : templates_) {
      if (ours.name == theirs.name) continue;
      for (std::size_t i = 0; i < kChats.size(); ++i) {
        if (!theirs.renders[i].contains("text") || ours.renders[i].contains("error")) continue;
        std::string rendered;
        try {
          rendered = render_chat(ours.chat_template, messages_of(kChats[i]));
        } catch (const std::invalid_argument&) {
          continue;  // a refusal: the comparison above reports it where the template renders the list
        }
        EXPECT_NE(rendered, theirs.renders[i].at("text").get<std::string>())
            << ours.name << " rendered " << kChats[i].at("name") << " as " << theirs.name << " does";
        ++compared;
      }
    }
  EXPECT_GE(compared, 6 * (kChats.size() - 3));
}

}  // namespace
}  // namespace exactq::serve
