// `exactq serve` on the loopback with the shipped pycode pair: completions (text and token ids)
// equal to the solo `exactq generate` run, streaming, every error status, authentication,
// cancellation by a client that goes away, and SIGTERM.
#include <gtest/gtest.h>

#include <atomic>

#include "apps/serve_fixture.h"

namespace exactq::test {
namespace {

using nlohmann::json;

json post(const ServeProcess& s, const std::string& path, const json& body, int* status = nullptr, const std::string& key = "") {
  auto c = s.client();
  httplib::Headers headers;
  if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
  auto r = c.Post(path.c_str(), headers, body.is_string() ? body.get<std::string>() : body.dump(), "application/json");
  if (!r) {
    ADD_FAILURE() << "no response from " << path;
    return {};
  }
  if (status) *status = r->status;
  return json::parse(r->body, nullptr, false);
}

// The status and OpenAI's error shape, with the parameter named where one is.
void expect_error(const ServeProcess& s, const json& body, int status, const std::string& param, const std::string& path = "/v1/completions") {
  int got = 0;
  const json j = post(s, path, body, &got);
  EXPECT_EQ(got, status) << body.dump() << " -> " << j.dump();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << j.dump();
  for (const char* key : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(key)) << key;
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
  if (!param.empty()) {
    EXPECT_EQ(j["error"]["param"], param) << j.dump();
  }
}

// The JSON objects of an SSE stream's data lines ([DONE] and anything else left out).
std::vector<json> sse_chunks(const std::string& body) {
  std::vector<json> chunks;
  for (std::size_t at = 0; (at = body.find("data: ", at)) != std::string::npos;) {
    const std::size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    at = end;
    json j = json::parse(data, nullptr, false);
    if (j.is_object()) chunks.push_back(std::move(j));
  }
  return chunks;
}

// The text of an SSE stream of completion chunks, and whether it ended with a finish_reason and [DONE].
struct Streamed {
  std::string text, finish;
  bool done = false;
};
Streamed parse_sse(const std::string& body) {
  Streamed s;
  s.done = body.find("data: [DONE]\n\n") != std::string::npos;
  for (json& j : sse_chunks(body)) {
    if (j["choices"].empty()) continue;
    s.text += j["choices"][0].value("text", "");
    if (!j["choices"][0]["finish_reason"].is_null()) s.finish = j["choices"][0]["finish_reason"];
  }
  return s;
}

TEST(CliServe, CompletionsOfTextAndIdsAreTheSoloRunsAndStreamTheSameText) {
  ServeProcess s({"--model", kTarget});
  ASSERT_TRUE(s.ok());
  const std::string prompt = "def parse_args(argv):\n";
  const Solo solo = solo_run("--prompt '" + prompt + "'", 24);
  const json text = post(s, "/v1/completions", {{"model", "pycode-target"}, {"prompt", prompt}, {"max_tokens", 24}});
  EXPECT_TRUE(same_as_solo(text, solo)) << text.dump();
  EXPECT_EQ(text["choices"][0]["finish_reason"], solo.stop == "eos" ? "stop" : "length");
  const json ids = post(s, "/v1/completions", {{"prompt", solo.prompt_ids}, {"max_tokens", 24}});
  EXPECT_TRUE(same_as_solo(ids, solo)) << ids.dump();
  // The negative control: a request with fewer tokens is not the solo run of 24.
  const json shorter = post(s, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 23}});
  EXPECT_FALSE(same_as_solo(shorter, solo));
  EXPECT_EQ(shorter["choices"][0]["finish_reason"], "length");

  auto c = s.client();
  auto r = c.Post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 24}, {"stream", true}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const Streamed st = parse_sse(r->body);
  EXPECT_EQ(st.text, solo.text);
  EXPECT_TRUE(st.done) << r->body;
  EXPECT_EQ(st.finish, text["choices"][0]["finish_reason"]);

  // A stop string ends the text before it; the tokens are the solo run's up to there.
  const std::string cut = solo.text.substr(solo.text.size() / 2, 3);
  const json stopped = post(s, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 24}, {"stop", {cut}}});
  EXPECT_EQ(stopped["choices"][0]["text"], solo.text.substr(0, solo.text.find(cut))) << cut;
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");

  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "pycode-target");
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_TRUE(contains(metrics->body, "exactq_requests_total{status=\"200\"}")) << metrics->body;
  EXPECT_TRUE(contains(metrics->body, "exactq_generated_tokens_total")) << metrics->body;
  EXPECT_TRUE(s.log_shows("POST /v1/completions 200")) << s.log();
}

// logprobs on the HTTP API: each generated token's log probability and its alternatives, the
// tokens the solo run's, and the same numbers from a server decoding speculatively (prompt lookup)
// as from a classic one. Control: another prompt's logprobs differ.
TEST(CliServe, LogprobsAreTheSoloTokensAndTheSameWithSpeculativeDecode) {
  ServeProcess classic({"--model", kTarget}), lookup({"--model", kTarget, "--lookup", "3"});
  ASSERT_TRUE(classic.ok());
  ASSERT_TRUE(lookup.ok());
  const std::string prompt = "def parse_args(argv):\n";
  const Solo solo = solo_run("--prompt '" + prompt + "'", 12);
  const json body = {{"prompt", prompt}, {"max_tokens", 12}, {"logprobs", 2}};
  const json a = post(classic, "/v1/completions", body), b = post(lookup, "/v1/completions", body);
  ASSERT_TRUE(same_as_solo(a, solo)) << a.dump();
  const json& lp = a["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << a.dump();
  const std::size_t n = a["choices"][0]["token_ids"].size();
  ASSERT_EQ(lp["tokens"].size(), n);
  ASSERT_EQ(lp["token_logprobs"].size(), n);
  ASSERT_EQ(lp["top_logprobs"].size(), n);
  ASSERT_EQ(lp["text_offset"].size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    const double chosen = lp["token_logprobs"][i].get<double>();
    EXPECT_LE(chosen, 0.0);
    ASSERT_EQ(lp["top_logprobs"][i].size(), 2u) << lp.dump();
    double best = -1e300;
    for (const auto& [token, value] : lp["top_logprobs"][i].items()) best = std::max(best, value.get<double>());
    EXPECT_EQ(chosen, best) << "greedy: the chosen token is the most likely, token " << i;
    if (i > 0) EXPECT_GE(lp["text_offset"][i].get<int>(), lp["text_offset"][i - 1].get<int>());
  }
  EXPECT_EQ(a["choices"][0]["logprobs"], b["choices"][0]["logprobs"]) << "speculative decode reports classic's numbers";
  const json other = post(lookup, "/v1/completions", {{"prompt", "import os\n"}, {"max_tokens", 12}, {"logprobs", 2}});
  EXPECT_NE(a["choices"][0]["logprobs"], other["choices"][0]["logprobs"]) << "the control";
  const json plain = post(classic, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 12}});
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());

  // Streamed, with and without a stop string: the chunks' logprobs lists, joined, are the
  // non-streamed response's, from the classic and the speculative server alike.
  for (const json& extra : {json::object(), json{{"stop", "\n"}}}) {
    json request = body;
    request.update(extra);
    const json whole = post(classic, "/v1/completions", request)["choices"][0];
    request["stream"] = true;
    for (const ServeProcess* server : {&classic, &lookup}) {
      auto r = server->client().Post("/v1/completions", request.dump(), "application/json");
      ASSERT_TRUE(r && r->status == 200);
      json joined = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                     {"text_offset", json::array()}};
      std::string text;
      for (const json& chunk : sse_chunks(r->body)) {
        const json& choice = chunk["choices"][0];
        text += choice.value("text", "");
        if (choice["logprobs"].is_null()) continue;
        for (const char* list : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
          for (const json& v : choice["logprobs"][list]) joined[list].push_back(v);
      }
      EXPECT_EQ(text, whole["text"]);
      EXPECT_EQ(joined, whole["logprobs"]) << "stop " << extra.dump();
      EXPECT_NE(joined, other["choices"][0]["logprobs"]) << "the control";
    }
  }
}

TEST(CliServe, BadRequestsGetOpenAIErrorsAndTheServerStaysUp) {
  ServeProcess s({"--model", kTarget, "--context", "64"});
  ASSERT_TRUE(s.ok());
  expect_error(s, json("{\"prompt\": \"x\""), 400, "");
  expect_error(s, json("[1, 2]"), 400, "");
  expect_error(s, {{"prompt", "x"}, {"max_tokens", "5"}}, 400, "max_tokens");
  expect_error(s, {{"prompt", "x"}, {"max_tokens", 0}}, 400, "max_tokens");
  expect_error(s, {{"prompt", "x"}, {"max_tokens", 2.5}}, 400, "max_tokens");
  expect_error(s, {{"prompt", 7}}, 400, "prompt");
  expect_error(s, {{"prompt", json::array()}}, 400, "prompt");
  expect_error(s, {{"prompt", {1, 2, 99999}}}, 400, "prompt");
  expect_error(s, {{"prompt", {"a", "b"}}}, 400, "prompt");
  expect_error(s, {{"max_tokens", 4}}, 400, "prompt");
  expect_error(s, {{"prompt", "x"}, {"stop", 3}}, 400, "stop");
  expect_error(s, {{"prompt", "x"}, {"stream", "yes"}}, 400, "stream");
  expect_error(s, {{"prompt", "x"}, {"temperature", -0.5}}, 400, "temperature");
  expect_error(s, {{"prompt", "x"}, {"top_p", 1.5}}, 400, "top_p");
  expect_error(s, {{"prompt", "x"}, {"seed", "1"}}, 400, "seed");
  expect_error(s, {{"prompt", "x"}, {"frobnicate", 1}}, 400, "frobnicate");
  expect_error(s, {{"prompt", std::vector<int>(64, 5)}}, 400, "prompt");  // the context holds 64 positions
  expect_error(s, {{"prompt", "x"}, {"model", "gpt-4"}}, 404, "model");
  expect_error(s, {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}, 400, "messages", "/v1/chat/completions");
  expect_error(s, {{"messages", "hi"}}, 400, "messages", "/v1/chat/completions");
  int status = 0;
  const json chat = post(s, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}, &status);
  EXPECT_TRUE(contains(chat.dump(), "no chat template")) << chat.dump();
  auto c = s.client();
  auto missing = c.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // 63 prompt tokens fit a context of 64: the control of the refusal above.
  const json fits = post(s, "/v1/completions", {{"prompt", std::vector<int>(63, 5)}, {"max_tokens", 4}}, &status);
  EXPECT_EQ(status, 200) << fits.dump();
  EXPECT_EQ(fits["choices"][0]["finish_reason"], "length");
}

TEST(CliServe, AnApiKeyIsRequiredOnTheApiWhereGiven) {
  ServeProcess s({"--model", kTarget, "--api-key", "sesame"});
  ASSERT_TRUE(s.ok());
  const json body = {{"prompt", "import os\n"}, {"max_tokens", 2}};
  int status = 0;
  const json none = post(s, "/v1/completions", body, &status);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(none["error"]["code"], "invalid_api_key");
  post(s, "/v1/completions", body, &status, "sesam");
  EXPECT_EQ(status, 401);
  post(s, "/v1/completions", body, &status, "sesame");
  EXPECT_EQ(status, 200);
  auto c = s.client();
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  EXPECT_EQ(c.Get("/health")->status, 200);
}

// Reads a stream until its first text, then goes away; returns whether text came.
bool read_then_hang_up(const ServeProcess& s, const json& body) {
  auto c = s.client();
  bool got = false;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, std::size_t, std::uint64_t, std::uint64_t) {
    got = true;
    return false;  // the client closes the connection
  };
  c.send(req);
  return got;
}

std::int64_t metric(const ServeProcess& s, const std::string& name) {
  auto r = s.client().Get("/metrics");
  if (!r) return -1;
  const std::size_t at = r->body.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(r->body.substr(at + name.size() + 2));
}

TEST(CliServe, AClientThatGoesAwayCancelsItsRequestAndAFullQueueAnswers429) {
  // One request runs at a time (--max-batch 1), so that the second one waits in the queue.
  ServeProcess s({"--model", kTarget, "--max-queue", "1", "--max-batch", "1"});
  ASSERT_TRUE(s.ok());
  const json lasting = {{"prompt", {5, 6, 7}}, {"max_tokens", 3000}, {"stream", true}};
  ASSERT_TRUE(read_then_hang_up(s, lasting));
  // Without the cancellation the worker would be busy with 3000 tokens for a long while.
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  post(s, "/v1/completions", {{"prompt", "x = 1\n"}, {"max_tokens", 4}}, &status);
  EXPECT_EQ(status, 200);
  EXPECT_LT(metric(s, "exactq_generated_tokens_total"), 300) << "the abandoned request ran on";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));

  // The queue holds one: one running (streaming), one waiting, the third is refused.
  std::atomic<bool> first{false};
  std::thread running([&] {
    auto c = s.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = lasting.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, std::size_t, std::uint64_t, std::uint64_t) {
      first = true;
      return true;  // reads on until SIGTERM ends the stream
    };
    c.send(req);
  });
  while (!first.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  int queued_status = 0;
  std::thread queued([&] { post(s, "/v1/completions", {{"prompt", "y = 2\n"}, {"max_tokens", 2}}, &queued_status); });
  for (int i = 0; i < 500 && metric(s, "exactq_queue_depth") != 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(metric(s, "exactq_queue_depth"), 1);
  const json refused = post(s, "/v1/completions", {{"prompt", "z = 3\n"}, {"max_tokens", 2}}, &status);
  EXPECT_EQ(status, 429) << refused.dump();
  // SIGTERM cancels the running and the queued request and exits 0.
  EXPECT_EQ(s.stop(SIGTERM, 20), 0);
  running.join();
  queued.join();
  EXPECT_EQ(queued_status, 503);
}

TEST(CliServe, SigintStopsAServerStartedInTheBackgroundWithExit0) {
  ServeProcess s({"--model", kTarget}, 60, true);
  ASSERT_TRUE(s.ok());
  int status = 0;
  post(s, "/v1/completions", {{"prompt", "import os\n"}, {"max_tokens", 2}}, &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(s.stop(SIGINT, 20), 0) << s.log();
  EXPECT_TRUE(contains(s.log(), "SIGINT: stopping")) << s.log();
}

TEST(CliServe, BadArgumentsExit2NamingTheValue) {
  const std::string model = " --backend cpu --model '" + kTarget + "'";
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--backend cpu", "--model"},
           {"--backend cpu --model /nonexistent", "/nonexistent"},
           {model + " --port 70000", "--port"},
           {model + " --draft '" + kDraft + "' --lookup 2", "at most one drafter"},
           {model + " --block 3", "--block"},
           {model + " --kernels wide", "--kernels"},
           {model + " --max-queue 0", "--max-queue"}}) {
    const Outcome o = run_cli("serve " + args, "", 30);
    EXPECT_EQ(o.exit_code, 2) << args << "\n" << o.output;
    EXPECT_TRUE(contains(o.output, says)) << args << "\n" << o.output;
  }
}

// The shipped target with a chat template added to its tokenizer_config.json.
struct ChatModel {
  TempFile dir{"exactq-serve-chat", ""};
  explicit ChatModel(const std::string& chat_template) {
    std::filesystem::copy(kTarget, dir.path);
    std::ifstream in(dir.path / "tokenizer_config.json");
    json config = json::parse(in);
    config["chat_template"] = chat_template;
    std::ofstream(dir.path / "tokenizer_config.json") << config.dump();
  }
};

TEST(CliServe, ChatRendersARecognisedTemplateAndNamesAnUnknownOne) {
  ChatModel gemma("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content | trim }}<end_of_turn>\n"
                  "{% endfor %}<start_of_turn>model\n");
  ServeProcess s({"--model", gemma.dir.path.string()});
  ASSERT_TRUE(s.ok());
  // The Gemma rendering; its BOS is the one `generate --prompt` adds.
  const Solo solo = solo_run("--prompt '<start_of_turn>user\nclass Stack:<end_of_turn>\n<start_of_turn>model\n'", 16);
  const json messages = {{{"role", "user"}, {"content", " class Stack: "}}};
  int status = 0;
  const json chat = post(s, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 16}}, &status);
  ASSERT_EQ(status, 200) << chat.dump();
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], solo.text);
  EXPECT_EQ(chat["usage"]["prompt_tokens"], solo.prompt_ids.size());
  EXPECT_EQ(chat["usage"]["completion_tokens"], solo.output_ids.size());
  const json other = post(s, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "def pop(self):"}}}}, {"max_tokens", 16}});
  EXPECT_NE(other["choices"][0]["message"]["content"], solo.text) << "the control: another message";
  auto r = s.client().Post("/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 16}, {"stream", true}}.dump(),
                           "application/json");
  ASSERT_TRUE(r);
  std::string streamed;
  std::size_t at = 0;
  while ((at = r->body.find("data: {", at)) != std::string::npos) {
    const std::size_t end = r->body.find("\n\n", at);
    const json chunk = json::parse(r->body.substr(at + 6, end - at - 6));
    streamed += chunk["choices"][0]["delta"].value("content", "");
    at = end;
  }
  EXPECT_EQ(streamed, solo.text);
  EXPECT_TRUE(contains(r->body, "data: [DONE]"));

  ChatModel unknown("{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}");
  ServeProcess u({"--model", unknown.dir.path.string()});
  ASSERT_TRUE(u.ok());
  const json refused = post(u, "/v1/chat/completions", {{"messages", messages}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(contains(refused["error"]["message"].get<std::string>(), "[INST]")) << refused.dump();
}

}  // namespace
}  // namespace exactq::test
