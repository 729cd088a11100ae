// The server's parts without HTTP: stop strings, chat rendering, request parsing, and the serial
// scheduler running jobs on the shipped pycode model with greedy_decode's tokens.
#include <gtest/gtest.h>

#include "exactq/backend.h"
#include "exactq/decoder.h"
#include "exactq/generate.h"
#include "serve/api.h"
#include "serve/chat_template.h"
#include "serve/engine.h"
#include "serve/serial_scheduler.h"

namespace exactq::serve {
namespace {

TEST(ServeStops, TheFirstMatchAndTheHeldBackPrefix) {
  EXPECT_EQ(scan_stops("abc\ndef", {"\nd"}).match, 3u);
  EXPECT_EQ(scan_stops("abc\n", {"\nd"}).match, 4u);
  EXPECT_EQ(scan_stops("abc\n", {"\nd"}).hold, 1u);
  EXPECT_EQ(scan_stops("abcxy", {"xyz", "q"}).hold, 2u);
  EXPECT_EQ(scan_stops("abc", {"xyz"}).hold, 0u);
  EXPECT_EQ(scan_stops("a STOP b END", {"END", "STOP"}).match, 2u);
}

TEST(ServeChat, TheThreeFamiliesRenderAsTheirTemplates) {
  const std::vector<ChatMessage> m = {{"system", " Be brief. "}, {"user", "Hi\n"}};
  auto chatml = recognise_chat_template(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}", "");
  ASSERT_TRUE(chatml.chat_template);
  EXPECT_EQ(render_chat(*chatml.chat_template, m),
            "<|im_start|>system\n Be brief. <|im_end|>\n<|im_start|>user\nHi\n<|im_end|>\n<|im_start|>assistant\n");
  auto qwen = recognise_chat_template(
      "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}<|im_start|><|im_end|>", "");
  ASSERT_TRUE(qwen.chat_template);
  EXPECT_EQ(render_chat(*qwen.chat_template, {{"user", "Hi"}}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  auto llama = recognise_chat_template("<|start_header_id|> ... <|eot_id|>", "<|begin_of_text|>");
  ASSERT_TRUE(llama.chat_template);
  EXPECT_EQ(render_chat(*llama.chat_template, m),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
            "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  auto gemma = recognise_chat_template("<start_of_turn> ... <end_of_turn>", "<bos>");
  ASSERT_TRUE(gemma.chat_template);
  // Gemma 3 trims the turns but not the system message it puts before the first.
  EXPECT_EQ(render_chat(*gemma.chat_template, m), "<bos><start_of_turn>user\n Be brief. \n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_THROW(render_chat(*gemma.chat_template, {{"tool", "x"}}), std::invalid_argument);
  auto unknown = recognise_chat_template("{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}", "");
  EXPECT_FALSE(unknown.chat_template);
  EXPECT_NE(unknown.error.find("[INST]"), std::string::npos) << unknown.error;
}

struct Pycode {
  Checkpoint checkpoint = Checkpoint::open(std::string(EXACTQ_SOURCE_DIR) + "/models/pycode-target");
  Tokenizer tokenizer = Tokenizer::open(std::string(EXACTQ_SOURCE_DIR) + "/models/pycode-target");
  std::unique_ptr<Backend> backend = make_backend("cpu", {});
  Decoder decoder{*backend, checkpoint, {KernelFamily::exact, 256}};
};

TEST(ServeApi, RequestsParseOrAreRefusedNamingTheParameter) {
  Pycode p;
  const ApiContext c{"pycode-target", &p.tokenizer, p.decoder.vocab_size(), 256, nullptr, "no chat template"};
  const ParsedRequest r = parse_completion(R"({"prompt": "import os", "max_tokens": 5, "stop": ["\n\n"], "stream": true})", c);
  EXPECT_EQ(r.spec.prompt, p.tokenizer.encode("import os"));
  EXPECT_EQ(r.spec.max_tokens, 5);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.spec.stop, std::vector<std::string>{"\n\n"});
  auto refused = [&](const char* body) -> std::pair<int, std::string> {
    try {
      parse_completion(body, c);
    } catch (const ApiError& e) {
      return {e.status, e.param};
    }
    return {0, ""};
  };
  EXPECT_EQ(refused(R"({"prompt": "x", "max_tokens": -1})"), std::make_pair(400, std::string("max_tokens")));
  EXPECT_EQ(refused(R"({"prompt": "x", "model": "other"})"), std::make_pair(404, std::string("model")));
  EXPECT_EQ(refused(R"({"prompt": [1, 2, -3]})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(refused(R"({"prompt": "x", "max_tokens": 18446744073709551615})"), std::make_pair(400, std::string("max_tokens")));
  EXPECT_EQ(refused("{\"prompt\": \"\\ud800\"}").first, 400);
  EXPECT_EQ(refused(R"({"prompt": "x"})").first, 0) << "the control: a good request parses";
}

TEST(ServeScheduler, JobsRunInOrderWithGreedyDecodesTokensAndACancelledJobStops) {
  Pycode p;
  Metrics metrics;
  Engine engine(p.decoder, nullptr, p.tokenizer, {}, metrics);
  const std::vector<std::int32_t> a = p.tokenizer.encode("def f(x):\n"), b = p.tokenizer.encode("import sys\n");
  GreedyOptions options;
  options.max_tokens = 12;
  options.stop_ids = p.tokenizer.eos_ids();
  const auto solo_a = greedy_decode(p.decoder, a, options).tokens, solo_b = greedy_decode(p.decoder, b, options).tokens;
  ASSERT_NE(solo_a, solo_b);
  SerialScheduler scheduler(engine, 4);
  auto ja = std::make_shared<Job>(GenerationSpec{a, 12, {}});
  auto jb = std::make_shared<Job>(GenerationSpec{b, 12, {}});
  auto jc = std::make_shared<Job>(GenerationSpec{a, 12, {}});
  jc->cancel();
  ASSERT_TRUE(scheduler.submit(ja));
  ASSERT_TRUE(scheduler.submit(jb));
  ASSERT_TRUE(scheduler.submit(jc));
  EXPECT_EQ(ja->wait().tokens, solo_a);
  EXPECT_EQ(ja->wait().text, p.tokenizer.decode(solo_a, true));
  EXPECT_EQ(jb->wait().tokens, solo_b);
  EXPECT_EQ(jc->wait().finish, Finish::cancelled);
  EXPECT_TRUE(jc->wait().tokens.empty());
  scheduler.shutdown();
  EXPECT_FALSE(scheduler.submit(std::make_shared<Job>(GenerationSpec{a, 1, {}}))) << "closed after shutdown";
}

}  // namespace
}  // namespace exactq::serve
