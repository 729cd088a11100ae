// The load-invariance test: 32 concurrent requests of mixed prompts (text and token ids, short
// and long, different max_tokens, greedy and seeded-sampled) sent with curl to `exactq serve`, classic and with the draft
// model, in three arrival orders; every response carries the solo `exactq generate` run's token
// ids and text. The negative control: each response against another request's solo run differs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "apps/serve_fixture.h"

namespace exactq::test {
namespace {

using nlohmann::json;

struct Request {
  json body;
  Solo solo;
};

std::vector<Request> mixed_requests() {
  const std::vector<std::pair<std::string, std::int64_t>> texts = {
      {"import os\n", 12},
      {"def main():\n    ", 20},
      {"class Parser(object):\n    \"\"\"A parser for the command line.\"\"\"\n\n    def __init__(self, args):\n", 16},
      {"# Copyright (C) the Python Software Foundation\n\nimport sys\nimport re\n\n", 8},
      {"    for i in range(len(items)):\n        if items[i] is None:\n", 24},
  };
  std::vector<Request> out;
  for (const auto& [prompt, n] : texts) {
    Request r;
    r.solo = solo_run("--prompt '" + prompt + "'", n);
    r.body = {{"model", "pycode-target"}, {"prompt", prompt}, {"max_tokens", n}};
    out.push_back(r);
  }
  // Token-id prompts: one of a single token, one long.
  for (const auto& [ids, n] : std::vector<std::pair<std::vector<std::int32_t>, std::int64_t>>{
           {{0}, 10}, {std::vector<std::int32_t>(120, 300), 6}, {{0, 450, 451, 452}, 14}}) {
    Request r;
    r.solo = solo_run("--prompt-ids " + ids_text(ids), n);
    r.body = {{"prompt", ids}, {"max_tokens", n}};
    out.push_back(r);
  }
  // Seeded sampling: the solo run samples with the same options.
  for (const std::uint64_t seed : {5, 6}) {
    Request r;
    const std::string prompt = "def main():\n    ";
    r.solo = solo_run("--prompt '" + prompt + "' --temperature 0.9 --top-p 0.95 --top-k 40 --seed " + std::to_string(seed), 20);
    r.body = {{"prompt", prompt}, {"max_tokens", 20}, {"temperature", 0.9}, {"top_p", 0.95}, {"top_k", 40}, {"seed", seed}};
    out.push_back(r);
  }
  return out;
}

// POST with curl; the response body ("" where curl failed).
std::string curl_post(const std::string& url, const json& body) {
  TempFile file("exactq-serve-body", ".json");
  {
    std::ofstream out(file.path);
    out << body.dump();
  }
  const std::string command = "curl -sS --max-time 60 -H 'Content-Type: application/json' --data-binary @" + file.quoted() +
                              " '" + url + "/v1/completions' 2>&1";
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  std::size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, got);
  pclose(pipe);
  return output;
}

// 32 requests (the mixed ones repeated) sent at once in `order`; every response checked against
// its solo run, and one against another request's solo run (which must differ).
void check_under_load(const ServeProcess& s, const std::vector<Request>& requests, const std::vector<std::size_t>& order) {
  std::vector<std::string> responses(order.size());
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < order.size(); ++k) {
    threads.emplace_back([&, k] { responses[k] = curl_post(s.url(), requests[order[k] % requests.size()].body); });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the arrival order, roughly kept
  }
  for (auto& t : threads) t.join();
  int identical = 0, controls = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t i = order[k] % requests.size();
    const json j = json::parse(responses[k], nullptr, false);
    if (same_as_solo(j, requests[i].solo))
      ++identical;
    else
      ADD_FAILURE() << "request " << i << " differs from its solo run: " << responses[k];
    const Solo& other = requests[(i + 1) % requests.size()].solo;
    if (!same_as_solo(j, other)) ++controls;
  }
  EXPECT_EQ(identical, int(order.size()));
  EXPECT_EQ(controls, int(order.size())) << "the negative control: a response equal to another request's solo run";
}

std::vector<std::vector<std::size_t>> three_orders(std::size_t n) {
  std::vector<std::size_t> forward(n);
  for (std::size_t i = 0; i < n; ++i) forward[i] = i;
  std::vector<std::size_t> backward(forward.rbegin(), forward.rend());
  std::vector<std::size_t> shuffled = forward;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(47));
  return {forward, backward, shuffled};
}

TEST(CliServeLoad, ThirtyTwoConcurrentRequestsGetTheirSoloRunsInThreeArrivalOrders) {
  const std::vector<Request> requests = mixed_requests();
  ServeProcess classic({"--model", kTarget});
  ASSERT_TRUE(classic.ok());
  for (const auto& order : three_orders(32)) check_under_load(classic, requests, order);
}

TEST(CliServeLoad, WithTheDraftModelTheResponsesAreTheClassicSoloRuns) {
  const std::vector<Request> requests = mixed_requests();
  ServeProcess speculative({"--model", kTarget, "--draft", kDraft, "--block", "3"});
  ASSERT_TRUE(speculative.ok());
  EXPECT_TRUE(speculative.log_shows("speculative decode")) << speculative.log();
  for (const auto& order : three_orders(32)) check_under_load(speculative, requests, order);
  auto metrics = speculative.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_TRUE(contains(metrics->body, "exactq_draft_acceptance")) << metrics->body;
}

}  // namespace
}  // namespace exactq::test
