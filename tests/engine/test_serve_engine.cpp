// The server's parts without HTTP: stop strings, chat rendering, request parsing, the serial
// scheduler running jobs on the shipped pycode model with greedy_decode's tokens, and the batch
// scheduler giving every job the bytes the engine gives it alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "exactq/backend.h"
#include "exactq/decoder.h"
#include "exactq/generate.h"
#include "exactq/sampling.h"
#include "exactq/speculative.h"
#include "serve/api.h"
#include "serve/chat_template.h"
#include "serve/batch_scheduler.h"
#include "serve/engine.h"
#include "test_util.h"

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

// "STATUS PARAM" of the ApiError that `parse` throws on body, or "parsed".
std::string refusal(ParsedRequest (*parse)(std::string_view, const ApiContext&), const char* body, const ApiContext& c) {
  try {
    parse(body, c);
  } catch (const ApiError& e) {
    return std::to_string(e.status) + " " + e.param;
  }
  return "parsed";
}

TEST(ServeApi, LogprobsParseOrAreRefusedNamingTheParameter) {
  Pycode p;
  const ApiContext c{"pycode-target", &p.tokenizer, p.decoder.vocab_size(), 256, nullptr, "no chat template"};
  EXPECT_EQ(parse_completion(R"({"prompt": "x"})", c).spec.logprobs, -1);
  EXPECT_EQ(parse_completion(R"({"prompt": "x", "logprobs": 0})", c).spec.logprobs, 0);
  EXPECT_EQ(parse_completion(R"({"prompt": "x", "logprobs": 5})", c).spec.logprobs, 5);
  auto refused = [&](const char* body) { return refusal(parse_completion, body, c); };
  EXPECT_EQ(refused(R"({"prompt": "x", "logprobs": 6})"), "400 logprobs");
  EXPECT_EQ(refused(R"({"prompt": "x", "logprobs": -1})"), "400 logprobs");
  EXPECT_EQ(refused(R"({"prompt": "x", "logprobs": true})"), "400 logprobs");
  EXPECT_EQ(parse_completion(R"({"prompt": "x", "logprobs": 1, "stream": true})", c).spec.logprobs, 1);
  EXPECT_EQ(refused(R"({"prompt": "x", "logprobs": 6, "stream": true})"), "400 logprobs");
}

// The response's logprobs objects: the completions' four lists and the chat's content entries,
// each token's text and bytes, -inf as null; chat's logprobs/top_logprobs parse and are refused
// naming the parameter.
TEST(ServeApi, LogprobsResponsesHaveOpenAIsShapes) {
  Pycode p;
  const ApiContext c{"pycode-target", &p.tokenizer, p.decoder.vocab_size(), 256, nullptr, "no chat template"};
  auto refused_chat = [&](const char* body) { return refusal(parse_chat, body, c); };
  EXPECT_EQ(refused_chat(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})"), "400 top_logprobs");
  EXPECT_EQ(refused_chat(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})"), "400 logprobs");
  EXPECT_EQ(refused_chat(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})"),
            "400 top_logprobs");
  EXPECT_EQ(refused_chat(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 2})"),
            "400 messages") << "the control: past logprobs, refused only for the missing template";

  const std::vector<std::int32_t> ids = p.tokenizer.encode("x = 1", false);
  ASSERT_GE(ids.size(), 2u);
  Outcome o;
  o.tokens = {ids[0], ids[1]};
  o.text = p.tokenizer.decode(o.tokens, true);
  o.logprobs = {{-0.25, {{ids[0], -0.25}, {ids[1], -2.0}}}, {-INFINITY, {{ids[1], -0.5}, {ids[0], -INFINITY}}}};
  ParsedRequest r;
  r.spec.prompt = {1};
  r.spec.logprobs = 2;
  const auto text = [&](std::int32_t id) { return p.tokenizer.decode(std::vector<std::int32_t>{id}); };
  const nlohmann::json completion = completion_response("id", "m", 0, r, o, false, &p.tokenizer)["choices"][0]["logprobs"];
  EXPECT_EQ(completion["tokens"], nlohmann::json({text(ids[0]), text(ids[1])}));
  EXPECT_EQ(completion["token_logprobs"], nlohmann::json::parse("[-0.25, null]"));
  EXPECT_EQ(completion["top_logprobs"][0][text(ids[1])], -2.0);
  EXPECT_EQ(completion["text_offset"], nlohmann::json({0, text(ids[0]).size()}));
  const nlohmann::json chat = completion_response("id", "m", 0, r, o, true, &p.tokenizer)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(chat.size(), 2u);
  EXPECT_EQ(chat[0]["token"], text(ids[0]));
  EXPECT_EQ(chat[0]["logprob"], -0.25);
  EXPECT_EQ(chat[0]["bytes"].size(), text(ids[0]).size());
  EXPECT_EQ(chat[1]["logprob"], nullptr);
  EXPECT_EQ(chat[1]["top_logprobs"][0]["logprob"], -0.5);
  EXPECT_EQ(chat[1]["top_logprobs"][1]["logprob"], nullptr);
  r.spec.logprobs = -1;
  EXPECT_TRUE(completion_response("id", "m", 0, r, o, true, &p.tokenizer)["choices"][0]["logprobs"].is_null());
}

// Each generated token's log probability is the log-softmax of the logits its position had, and
// the alternatives are the most likely tokens in order: checked against a long double evaluation of
// the decoder's own logits, re-run token by token (accuracy, 1e-12). Classic and speculative decode
// report the same bytes (identity); the control is another prompt's, which differ.
// Runs the job on an engine over the pair's target, classic or speculative (prompt lookup).
void run_job(Pycode& p, Metrics& metrics, Job& job, bool speculative) {
  PromptLookupDrafter drafter(3);
  EngineOptions options;
  if (speculative) options.speculative = SpeculativeOptions{};
  Engine engine(p.decoder, &drafter, p.tokenizer, options, metrics);
  engine.run(job);
}

// Whether two lists of log probabilities are the same bytes.
bool same_logprobs(const std::vector<TokenLogprobs>& a, const std::vector<TokenLogprobs>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i].logprob, &b[i].logprob, sizeof(double)) != 0 || a[i].top.size() != b[i].top.size()) return false;
    for (std::size_t k = 0; k < a[i].top.size(); ++k)
      if (a[i].top[k].first != b[i].top[k].first ||
          std::memcmp(&a[i].top[k].second, &b[i].top[k].second, sizeof(double)) != 0)
        return false;
  }
  return true;
}

TEST(ServeEngine, LogprobsAreEachPositionsLogSoftmaxAndTheSameInSpeculativeDecode) {
  Pycode p;
  Metrics metrics;
  const std::vector<std::int32_t> prompt = p.tokenizer.encode("def add(a, b):\n    return a + b\n\ndef add(");
  GenerationSpec spec{prompt, 10, {}, {}, -1};
  spec.logprobs = 3;
  auto run = [&](const GenerationSpec& s, bool speculative) {
    Job job(s);
    run_job(p, metrics, job, speculative);
    return job.wait();
  };
  const Outcome classic = run(spec, false);
  ASSERT_FALSE(classic.tokens.empty());
  ASSERT_EQ(classic.logprobs.size(), classic.tokens.size());
  GreedyOptions greedy;
  greedy.max_tokens = 10;
  greedy.stop_ids = p.tokenizer.eos_ids();
  EXPECT_EQ(classic.tokens, greedy_decode(p.decoder, prompt, greedy).tokens) << "recording changes no token";

  std::vector<std::int32_t> seen = prompt;
  for (std::size_t i = 0; i < classic.tokens.size(); ++i) {
    p.decoder.forward(seen, 0, Decoder::Rows::last);
    const std::vector<std::byte> bytes = p.decoder.logits();
    const std::int64_t vocab = p.decoder.vocab_size();
    std::vector<long double> x(static_cast<std::size_t>(vocab));
    long double max = -INFINITY;
    for (std::int64_t j = 0; j < vocab; ++j) max = std::max(max, x[std::size_t(j)] = load_f32(bytes.data(), std::size_t(j), p.decoder.dtype()));
    long double sum = 0;
    for (std::int64_t j = vocab - 1; j >= 0; --j) sum += std::exp(x[std::size_t(j)] - max);
    auto want = [&](std::int32_t id) { return double(x[std::size_t(id)] - max - std::log(sum)); };
    const TokenLogprobs& got = classic.logprobs[i];
    EXPECT_NEAR(got.logprob, want(classic.tokens[i]), 1e-12) << "token " << i;
    ASSERT_EQ(got.top.size(), 3u);
    EXPECT_EQ(got.top[0].first, classic.tokens[i]) << "greedy: the chosen token is the most likely";
    for (std::size_t k = 0; k < got.top.size(); ++k) {
      EXPECT_NEAR(got.top[k].second, want(got.top[k].first), 1e-12);
      if (k > 0) {
        EXPECT_GE(x[std::size_t(got.top[k - 1].first)], x[std::size_t(got.top[k].first)]);
      }
    }
    for (std::int64_t j = 0; j < vocab; ++j)  // nothing outside the top is more likely than its last
      if (std::find_if(got.top.begin(), got.top.end(), [&](const auto& t) { return t.first == j; }) == got.top.end()) {
        EXPECT_LE(x[std::size_t(j)], x[std::size_t(got.top.back().first)]);
      }
    seen.push_back(classic.tokens[i]);
  }

  auto same = [](const Outcome& a, const Outcome& b) { return a.tokens == b.tokens && same_logprobs(a.logprobs, b.logprobs); };
  const Outcome speculative = run(spec, true);
  EXPECT_TRUE(same(classic, speculative)) << "speculative decode reports classic's logprobs, bit for bit";
  EXPECT_EQ(metrics.render(0, true).find("exactq_draft_accepted_total 0\n"), std::string::npos)
      << "the lookup drafter had drafts accepted";
  GenerationSpec other = spec;
  other.prompt = p.tokenizer.encode("import os\n");
  EXPECT_FALSE(same(classic, run(other, true))) << "the control: another prompt's logprobs differ";

  // Sampled: the recorded token is the sampled one, its logprob its own.
  GenerationSpec sampled = spec;
  sampled.sampling.temperature = 1.5;
  sampled.sampling.seed = 7;
  const Outcome s1 = run(sampled, false), s2 = run(sampled, true);
  EXPECT_TRUE(same(s1, s2));
  GreedyOptions sampler = greedy;
  sampler.picker = sampling_picker(sampled.sampling);
  EXPECT_EQ(s1.tokens, greedy_decode(p.decoder, prompt, sampler).tokens);
}

// A job's progress, read while it runs: every generated token comes once, in order, with its
// logprobs entry and only once the text it ends in has come (the token that completes a stop
// string, whose text is cut, with the last piece), so the pieces add up to the outcome's text,
// tokens and logprobs. With a stop string and without; the control is another prompt's outcome.
TEST(ServeEngine, ProgressGivesEachTokenOnceWithItsLogprobsAfterItsText) {
  Pycode p;
  Metrics metrics;
  auto run = [&](const GenerationSpec& spec, bool speculative) {
    Job job(spec);
    Progress all;
    std::thread consumer([&] {
      Job::Seen seen;
      for (bool last = false; !last;) {
        last = job.done();
        Progress piece = job.wait_progress(seen, std::chrono::milliseconds(1));
        all.text += piece.text;
        all.tokens.insert(all.tokens.end(), piece.tokens.begin(), piece.tokens.end());
        all.logprobs.insert(all.logprobs.end(), piece.logprobs.begin(), piece.logprobs.end());
        // A token's text before the token (decode may write a U+FFFD, 3 bytes, for a character
        // whose bytes the stream still holds).
        if (!last && !job.done()) {
          EXPECT_LE(p.tokenizer.decode(all.tokens, true).size(), all.text.size() + 3) << "a token before its text";
        }
      }
    });
    run_job(p, metrics, job, speculative);
    consumer.join();
    return std::pair(job.wait(), all);
  };
  GenerationSpec spec{p.tokenizer.encode("def add(a, b):\n    return a + b\n\ndef add("), 24, {}, {}, -1};
  spec.logprobs = 2;
  for (const bool speculative : {false, true})
    for (const std::vector<std::string>& stop : {std::vector<std::string>{}, std::vector<std::string>{"\n"}}) {
      spec.stop = stop;
      const auto [outcome, pieces] = run(spec, speculative);
      ASSERT_FALSE(outcome.tokens.empty());
      EXPECT_EQ(pieces.text, outcome.text);
      EXPECT_EQ(pieces.tokens, outcome.tokens);
      EXPECT_TRUE(same_logprobs(pieces.logprobs, outcome.logprobs));
      ASSERT_EQ(pieces.logprobs.size(), outcome.tokens.size());
      if (!stop.empty()) {
        EXPECT_EQ(outcome.finish, Finish::stop);
        EXPECT_LT(outcome.text.size(), p.tokenizer.decode(outcome.tokens, true).size()) << "the stop string's token is cut";
      }
    }
  GenerationSpec other = spec;
  other.prompt = p.tokenizer.encode("import os\n");
  const auto [a, pa] = run(spec, false);
  const auto [b, pb] = run(other, false);
  EXPECT_NE(pa.tokens, pb.tokens) << "the control";
  EXPECT_FALSE(same_logprobs(pa.logprobs, pb.logprobs)) << "the control";
}

TEST(ServeScheduler, OneSequenceRunsJobsInOrderWithGreedyDecodesTokensAndACancelledJobStops) {
  Pycode p;
  Metrics metrics;
  const std::vector<std::int32_t> a = p.tokenizer.encode("def f(x):\n"), b = p.tokenizer.encode("import sys\n");
  GreedyOptions options;
  options.max_tokens = 12;
  options.stop_ids = p.tokenizer.eos_ids();
  const auto solo_a = greedy_decode(p.decoder, a, options).tokens, solo_b = greedy_decode(p.decoder, b, options).tokens;
  ASSERT_NE(solo_a, solo_b);
  BatchScheduler scheduler(p.decoder, p.tokenizer, metrics, 4);
  auto ja = std::make_shared<Job>(GenerationSpec{a, 12, {}, {}, -1});
  auto jb = std::make_shared<Job>(GenerationSpec{b, 12, {}, {}, -1});
  auto jc = std::make_shared<Job>(GenerationSpec{a, 12, {}, {}, -1});
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
  EXPECT_FALSE(scheduler.submit(std::make_shared<Job>(GenerationSpec{a, 1, {}, {}, -1}))) << "closed after shutdown";
}

// The batch scheduler against the engine running each job alone (classic decode): 20 jobs
// submitted at once over 4 sequences (so jobs are admitted as others end), of mixed prompt
// lengths, greedy and sampled with seeds, with log probabilities, stop strings and max_tokens, and
// two the checks refuse; every outcome (tokens, text, finish, log probabilities, error) equal, byte
// for byte, without a drafter and with each drafter (verify blocks of several jobs in one forward),
// with prompts whole and in chunks.
// A job cancelled before it starts finishes cancelled. Control: the sampled jobs with other seeds,
// run alone, give other tokens.
enum class Drafting { none, lookup, draft_model };

void check_batched_against_alone(Drafting drafting, std::int64_t prefill_chunk) {
  Pycode p;
  const std::uint64_t seed = test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const char* starts[] = {"def f(x):\n", "import sys\n", "class A:\n    def", "for i in range(10):\n    print(", "x = [", "#"};
  std::vector<GenerationSpec> specs;
  for (int i = 0; i < 20; ++i) {
    GenerationSpec spec;
    spec.prompt = p.tokenizer.encode(starts[i % 6]);
    spec.max_tokens = 1 + std::int64_t(rng() % 40);
    if (i % 4 == 1) spec.sampling = SamplingOptions{0.8, std::int64_t(rng() % 3) * 20, i % 8 == 1 ? 0.9 : 1.0, rng()};
    if (i % 5 == 2) spec.logprobs = int(rng() % 3);
    if (i % 6 == 3) spec.stop = {"\n", ")"};
    specs.push_back(spec);
  }
  specs[7].prompt.clear();      // refused: no tokens
  specs[11].max_tokens = 0;     // refused: max_tokens < 1
  Metrics metrics;
  DecoderOptions options{KernelFamily::exact, 256};
  options.sequences = 4;
  Decoder batch_decoder{*p.backend, p.checkpoint, options};
  const Checkpoint draft_checkpoint = Checkpoint::open(std::string(EXACTQ_SOURCE_DIR) + "/models/pycode-draft");
  Decoder draft_decoder{*p.backend, draft_checkpoint, options};
  std::unique_ptr<BatchDrafter> drafter;
  if (drafting == Drafting::lookup) drafter = make_lookup_batch_drafter(3, 4);
  if (drafting == Drafting::draft_model) drafter = make_draft_model_batch_drafter(draft_decoder, batch_decoder);
  std::vector<std::shared_ptr<Job>> jobs;
  {
    BatchScheduler scheduler(batch_decoder, p.tokenizer, metrics, 64, drafter.get(), 5, prefill_chunk);
    for (const GenerationSpec& spec : specs) {
      jobs.push_back(std::make_shared<Job>(spec));
      ASSERT_TRUE(scheduler.submit(jobs.back()));
    }
    auto cancelled = std::make_shared<Job>(specs[0]);
    cancelled->cancel();
    ASSERT_TRUE(scheduler.submit(cancelled));
    EXPECT_EQ(cancelled->wait().finish, Finish::cancelled);
    for (auto& job : jobs) job->wait();
  }
  std::size_t sampled = 0, sampled_differ = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE("job " + std::to_string(i));
    Job alone(specs[i]);
    run_job(p, metrics, alone, false);
    const Outcome& want = alone.wait();
    const Outcome& got = jobs[i]->wait();
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.text, want.text);
    EXPECT_EQ(got.finish, want.finish);
    EXPECT_EQ(got.error, want.error);
    EXPECT_TRUE(same_logprobs(got.logprobs, want.logprobs));
    if (i == 7 || i == 11) {
      EXPECT_EQ(got.finish, Finish::failed) << "refused by the checks";
    }
    if (!specs[i].sampling.greedy() && specs[i].max_tokens > 3) {
      GenerationSpec other = specs[i];
      other.sampling.seed += 1;
      Job reseeded(other);
      run_job(p, metrics, reseeded, false);
      ++sampled;
      sampled_differ += reseeded.wait().tokens != got.tokens;
    }
  }
  ASSERT_GT(sampled, 0u);
  EXPECT_GT(sampled_differ, 0u) << "control: another seed must give other tokens";
  // The forwards by width: none wider than the 4 sequences, and some wider than one.
  const std::string m = metrics.render(0, drafter != nullptr);
  auto value = [&](const std::string& line) {
    const std::size_t at = m.find("\n" + line + " ");
    return at == std::string::npos ? std::int64_t(-1) : std::stoll(m.substr(at + line.size() + 2));
  };
  const std::int64_t forwards = value("exactq_batch_width_count");
  EXPECT_GT(forwards, 0);
  EXPECT_EQ(value("exactq_batch_width_bucket{le=\"4\"}"), forwards);
  EXPECT_LT(value("exactq_batch_width_bucket{le=\"1\"}"), forwards) << "some forward ran several requests";
  if (drafter) {
    // Speculation happened: drafts were verified and some accepted.
    EXPECT_GT(value("exactq_draft_tokens_total"), 0) << m;
    EXPECT_GT(value("exactq_draft_accepted_total"), 0) << m;
  }
}

TEST(ServeScheduler, BatchedJobsGetTheOutcomesTheEngineGivesEachAlone) { check_batched_against_alone(Drafting::none, 512); }

TEST(ServeScheduler, PromptsInChunksOfTwoTokensGiveTheSameOutcomes) { check_batched_against_alone(Drafting::none, 2); }

TEST(ServeScheduler, BatchedVerifyBlocksOfPromptLookupGiveClassicDecodesOutcomes) {
  check_batched_against_alone(Drafting::lookup, 512);
}

TEST(ServeScheduler, BatchedVerifyBlocksOfTheDraftModelGiveClassicDecodesOutcomes) {
  check_batched_against_alone(Drafting::draft_model, 3);
}

// A job cancelled while its prompt runs a token a step ends at the next step, not after the
// prompt: the scheduler's steps are counted (the batch width histogram). The control: the same
// job left alone runs a step for every prompt token.
TEST(ServeScheduler, AJobCancelledInItsPromptEndsWithoutRunningTheRest) {
  Pycode p;
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 8; ++i) {
    const std::vector<std::int32_t> part = p.tokenizer.encode("def function_" + std::to_string(i) + "(x, y):\n    return x + y\n");
    prompt.insert(prompt.end(), part.begin(), part.end());
  }
  ASSERT_GT(prompt.size(), 100u);
  auto count = [](const Metrics& metrics) {
    const std::string m = metrics.render(0, false);
    const std::size_t at = m.find("\nexactq_batch_width_count ");
    return at == std::string::npos ? std::int64_t(-1) : std::stoll(m.substr(at + 26));
  };
  // Steps run in all, and steps run before the cancel (-1: none asked for).
  auto steps = [&](bool cancel) -> std::pair<std::int64_t, std::int64_t> {
    Metrics metrics;
    BatchScheduler scheduler(p.decoder, p.tokenizer, metrics, 4, nullptr, 4, 1);
    auto job = std::make_shared<Job>(GenerationSpec{prompt, 1, {}, {}, -1});
    EXPECT_TRUE(scheduler.submit(job));
    std::int64_t before = -1;
    if (cancel) {
      // Running: a few chunks in, as the scheduler's steps show.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (count(metrics) < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      job->cancel();
      before = count(metrics);
    }
    EXPECT_EQ(job->wait().finish, cancel ? Finish::cancelled : Finish::length);
    return {count(metrics), before};
  };
  EXPECT_EQ(steps(false).first, std::int64_t(prompt.size())) << "the control: a step a prompt token";
  const auto [all, before] = steps(true);
  ASSERT_GE(before, 3);
  EXPECT_LE(all, before + 1) << "the cancel is seen at the next step";
  EXPECT_LT(all, std::int64_t(prompt.size()) / 2);
}

TEST(ServeScheduler, RefusesABadBlockTooFewDraftSlotsOrAnEmptyChunkNamingTheValue) {
  Pycode p;
  Metrics metrics;
  const auto lookup = make_lookup_batch_drafter(3, 1);
  auto refusal = [&](std::int64_t block, BatchDrafter* drafter, Decoder& decoder) -> std::string {
    try {
      BatchScheduler scheduler(decoder, p.tokenizer, metrics, 4, drafter, block);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal(1, lookup.get(), p.decoder).find("block width 1"), std::string::npos);
  EXPECT_NE(refusal(65, lookup.get(), p.decoder).find("block width 65"), std::string::npos);
  DecoderOptions options{KernelFamily::exact, 64};
  options.sequences = 2;
  Decoder two{*p.backend, p.checkpoint, options};
  EXPECT_NE(refusal(4, lookup.get(), two).find("1 slots are fewer than the decoder's 2"), std::string::npos);
  EXPECT_EQ(refusal(4, lookup.get(), p.decoder), "") << "the control: one slot for one sequence";
  EXPECT_EQ(refusal(1, nullptr, p.decoder), "") << "no drafter: no block";
  try {
    BatchScheduler scheduler(p.decoder, p.tokenizer, metrics, 4, nullptr, 4, 0);
    ADD_FAILURE() << "a prefill chunk of 0 tokens was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("prefill chunk 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace exactq::serve
