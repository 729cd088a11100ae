// `exactq bench-serve` against `exactq serve` on the loopback: every level measured, every response
// equal to its request's response alone, the server's batching seen. The negative controls: a
// stand-in server whose every answer differs from the last must be caught (exit 1), and one whose
// every answer is the same must be called inconclusive (exit 3). Bad arguments exit 2.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "apps/serve_fixture.h"

namespace exactq::test {
namespace {

using nlohmann::json;

json read_json(const TempFile& f) {
  std::ifstream in(f.path);
  return json::parse(in, nullptr, false);
}

TEST(CliBenchServe, EveryLevelMeasuredAndEveryResponseTheSoloOne) {
  ServeProcess s({"--model", kTarget, "--max-batch", "4"});
  ASSERT_TRUE(s.ok());
  TempFile j("exactq-bench-serve", ".json"), svg("exactq-bench-serve", ".svg");
  const Outcome o = run_cli("bench-serve --url " + s.url() + " --concurrency 1,3 --seconds 1.5 --max-tokens 8 --json " + j.quoted() +
                                " --plot " + svg.quoted(),
                            "", 120);
  ASSERT_EQ(o.exit_code, 0) << o.output << s.log();
  EXPECT_TRUE(contains(o.output, "every response equals its request's response alone")) << o.output;
  const json r = read_json(j);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["mismatches"], 0);
  EXPECT_EQ(r["errors"], 0);
  EXPECT_GE(r["solo_distinct_texts"].get<int>(), 2);
  ASSERT_EQ(r["levels"].size(), 2u);
  for (const auto& level : r["levels"]) {
    EXPECT_GT(level["completed"].get<int>(), 0) << level;
    EXPECT_EQ(level["completed"], level["requests"]) << level;
    EXPECT_GT(level["output_tokens_per_second"].get<double>(), 0) << level;
    EXPECT_LE(level["ttft_ms"]["p50"].get<double>(), level["ttft_ms"]["p99"].get<double>()) << level;
    // Every request may stop at its EOS before max_tokens, never after.
    EXPECT_LE(level["output_tokens"].get<int>(), 8 * level["completed"].get<int>()) << level;
  }
  EXPECT_NEAR(r["levels"][0]["batch_width_mean"].get<double>(), 1.0, 1e-9);
  // Three clients on a server batching up to four: some forwards carry more than one request.
  EXPECT_GT(r["levels"][1]["batch_width_mean"].get<double>(), 1.0) << r["levels"][1];
  std::ifstream in(svg.path);
  const std::string plot((std::istreambuf_iterator<char>(in)), {});
  EXPECT_TRUE(contains(plot, "<svg") && contains(plot, "</svg>")) << plot.substr(0, 200);
}

// A stand-in completions server: streamed answers whose text `text_of` picks from the call count.
class StandIn {
 public:
  explicit StandIn(std::function<std::string(int)> text_of) : text_of_(std::move(text_of)) {
    server_.Post("/v1/completions", [this](const httplib::Request&, httplib::Response& res) {
      const std::string text = text_of_(calls_++);
      const json chunk = {{"choices", json::array({{{"index", 0}, {"text", text}, {"finish_reason", "length"}}})}};
      const json last = {{"choices", json::array()}, {"usage", {{"completion_tokens", 1}}}};
      res.set_content("data: " + chunk.dump() + "\n\ndata: " + last.dump() + "\n\ndata: [DONE]\n\n", "text/event-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~StandIn() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::function<std::string(int)> text_of_;
  std::atomic<int> calls_{0};
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(CliBenchServe, AServerWhoseAnswersChangeIsCaughtAndOneThatNeverChangesProvesNothing) {
  {
    StandIn changing([](int call) { return "answer " + std::to_string(call); });
    TempFile j("exactq-bench-serve", ".json");
    const Outcome o = run_cli("bench-serve --url " + changing.url() + " --concurrency 2 --seconds 0.3 --json " + j.quoted(), "", 60);
    EXPECT_EQ(o.exit_code, 1) << o.output;
    EXPECT_TRUE(contains(o.output, "differ from their request's response alone")) << o.output;
    const json r = read_json(j);
    ASSERT_TRUE(r.is_object());
    EXPECT_EQ(r["mismatches"], r["levels"][0]["completed"]);
    EXPECT_TRUE(r["levels"][0].contains("first_mismatch"));
  }
  {
    StandIn fixed([](int) { return std::string("the same"); });
    const Outcome o = run_cli("bench-serve --url " + fixed.url() + " --concurrency 2 --seconds 0.3", "", 60);
    EXPECT_EQ(o.exit_code, 3) << o.output;
    EXPECT_TRUE(contains(o.output, "could not fail")) << o.output;
  }
}

TEST(CliBenchServe, BadArgumentsAndNoServerAreRefusedNamingTheValue) {
  for (const auto& [args, named] : std::vector<std::pair<std::string, std::string>>{
           {"--url ftp://127.0.0.1:8000", "ftp://127.0.0.1:8000"},
           {"--url http://127.0.0.1:8000/v1", "no path"},
           {"--url http://127.0.0.1:99999", "outside 1..65535"},
           {"--url http://127.0.0.1:8000 --concurrency 0", "--concurrency: 0"},
           {"--url http://127.0.0.1:8000 --seconds 0", "--seconds"},
           {"--url http://127.0.0.1:8000 --max-tokens 0", "--max-tokens"},
           {"--url http://127.0.0.1:8000 --prompts /nonexistent/p.json", "/nonexistent/p.json"}}) {
    const Outcome o = run_cli("bench-serve " + args, "", 30);
    EXPECT_EQ(o.exit_code, 2) << args << "\n" << o.output;
    EXPECT_TRUE(contains(o.output, named)) << args << "\n" << o.output;
  }
  // Nothing listens on port 1: the first request alone fails, in words.
  const Outcome o = run_cli("bench-serve --url http://127.0.0.1:1 --seconds 1", "", 30);
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_TRUE(contains(o.output, "no response from 127.0.0.1:1")) << o.output;
}

}  // namespace
}  // namespace exactq::test
