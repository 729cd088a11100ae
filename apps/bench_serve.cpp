// `exactq bench-serve --url http://HOST:PORT`: concurrent clients against a running server, level
// by level; every response compared byte for byte with its request's response alone.
#include "bench_serve.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"

#ifdef EXACTQ_HAVE_SERVE
#include "serve_load.h"
#endif

namespace exactq::cli {

namespace {

struct Args {
  std::string url, model, api_key, concurrency = "1,4,16", prompts, json, plot;
  double seconds = 20, temperature = 0;
  std::int64_t max_tokens = 64, timeout = 600;
};

#ifdef EXACTQ_HAVE_SERVE

// Prompts of several kinds and lengths, so that the requests of a level end at different steps and
// neighbours come and go.
const std::vector<std::string>& default_prompts() {
  static const std::vector<std::string> p = {
      "import os\n",
      "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
      "The three most important ideas in the history of science are",
      "class LRUCache:\n    def __init__(self, capacity: int):\n        self.capacity = capacity\n        self.items = {}\n\n"
      "    def get(self, key):\n",
      "Q: What is the capital of Australia?\nA:",
      "# Copyright (C) the Python Software Foundation\n\nimport sys\nimport re\n\n",
      "Once upon a time, in a village at the edge of a great forest, there lived",
      "SELECT name, COUNT(*) AS orders\nFROM customers JOIN orders ON customers.id = orders.customer_id\n",
      "Translate to French: The weather is lovely today, and we are going to the beach.\n",
      "    for i in range(len(items)):\n        if items[i] is None:\n",
      "A haiku about the sea:\n",
      "int main(int argc, char** argv) {\n  if (argc < 2) {\n",
  };
  return p;
}

std::vector<std::string> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--prompts: cannot read '" + path + "'");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_array() || j.empty()) throw std::invalid_argument("--prompts: '" + path + "' is not a non-empty JSON array of strings");
  std::vector<std::string> out;
  for (const auto& v : j) {
    if (!v.is_string() || v.get<std::string>().empty())
      throw std::invalid_argument("--prompts: '" + path + "': every item must be a non-empty string");
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::string svg(const nlohmann::json& j) {
  // Two panels against concurrency (log scale): output tok/s, and time per output token p50.
  const auto& levels = j["levels"];
  const int cw = 380, ch = 260, pad = 60;
  double c_hi = 1, top_tps = 1, top_tpot = 1;
  for (const auto& l : levels) {
    c_hi = std::max(c_hi, l["concurrency"].get<double>());
    top_tps = std::max(top_tps, l["output_tokens_per_second"].get<double>() * 1.1);
    top_tpot = std::max(top_tpot, l["tpot_ms"]["p50"].get<double>() * 1.1);
  }
  std::string s = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='11'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n"
      "<text x='10' y='16' font-size='13' font-weight='bold'>exactq bench-serve: {} ({} output tokens a request)</text>\n",
      2 * cw, ch + 30, j["config"]["url"].get<std::string>(), j["config"]["max_tokens"].get<std::int64_t>());
  const std::pair<const char*, double> panels[2] = {{"output tok/s", top_tps}, {"time per output token p50, ms", top_tpot}};
  for (int p = 0; p < 2; ++p) {
    const int ox = p * cw, x0 = ox + pad, y0 = 25 + ch - 35, w = cw - pad - 20, h = ch - 70;
    const double top = panels[p].second;
    auto px = [&](double c) { return x0 + (c_hi > 1 ? std::log2(c) / std::log2(c_hi) : 0.5) * w; };
    auto py = [&](double v) { return y0 - v / top * h; };
    s += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='black'/>\n", x0, y0, x0 + w, y0);
    s += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='black'/>\n", x0, y0, x0, y0 - h);
    for (double f : {0.0, 0.5, 1.0})
      s += fmt::format("<text x='{}' y='{:.1f}' text-anchor='end'>{:.1f}</text>\n", x0 - 4, py(top / 1.1 * f) + 4, top / 1.1 * f);
    s += fmt::format("<text x='{}' y='{}' text-anchor='middle'>concurrency</text>\n", x0 + w / 2, y0 + 28);
    s += fmt::format("<text x='{}' y='{}' transform='rotate(-90 {} {})' text-anchor='middle'>{}</text>\n", ox + 14, y0 - h / 2,
                     ox + 14, y0 - h / 2, panels[p].first);
    std::string points;
    for (const auto& l : levels) {
      const double c = l["concurrency"].get<double>();
      const double v = p == 0 ? l["output_tokens_per_second"].get<double>() : l["tpot_ms"]["p50"].get<double>();
      points += fmt::format("{:.1f},{:.1f} ", px(c), py(v));
      s += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>\n", px(c), y0 + 14, c);
      s += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='#1f77b4'/>\n", px(c), py(v));
    }
    s += fmt::format("<polyline fill='none' stroke='#1f77b4' stroke-width='2' points='{}'/>\n", points);
  }
  return s + "</svg>\n";
}

int run(const Args& a) {
  const bench::ServeTarget target = [&] {
    bench::ServeTarget t = bench::parse_serve_url(a.url);
    t.api_key = a.api_key;
    t.model = a.model;
    return t;
  }();
  std::vector<std::int64_t> levels = parse_int_list(a.concurrency, "--concurrency");
  for (std::int64_t c : levels)
    if (c < 1 || c > 1024) throw std::invalid_argument(fmt::format("--concurrency: {} is out of range [1, 1024]", c));
  const std::vector<std::string> texts = a.prompts.empty() ? default_prompts() : read_prompts(a.prompts);
  std::vector<bench::LoadRequest> requests;
  for (std::size_t i = 0; i < texts.size(); ++i)
    requests.push_back({texts[i], a.max_tokens, a.temperature, std::uint64_t(i + 1)});

  // Each request alone first: the reference every response under load must equal.
  std::vector<bench::Response> solo;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    fmt::print(stderr, "\rbench-serve: request {}/{} alone", i + 1, requests.size());
    std::fflush(stderr);
    solo.push_back(bench::complete(target, requests[i], 0, int(a.timeout)));
    if (!solo.back().ok) {
      fmt::print(stderr, "\n");
      throw std::runtime_error(fmt::format("bench-serve: request {} of {}, alone, failed: {}", i + 1, requests.size(), solo.back().error));
    }
  }
  fmt::print(stderr, "\n");
  // The check can tell responses apart only where the requests' solo responses differ.
  std::int64_t distinct = 0;
  for (std::size_t i = 0; i < solo.size(); ++i)
    distinct += std::none_of(solo.begin(), solo.begin() + std::ptrdiff_t(i), [&](const bench::Response& r) { return r.text == solo[i].text; });

  nlohmann::json j = {{"config",
                       {{"url", a.url}, {"model", a.model}, {"concurrency", levels}, {"seconds", a.seconds}, {"max_tokens", a.max_tokens},
                        {"temperature", a.temperature}, {"prompts", texts.size()}}},
                      {"solo_distinct_texts", distinct},
                      {"levels", nlohmann::json::array()}};
  fmt::print("{:>11} {:>8} {:>7} {:>10} {:>6} {:>15} {:>15} {:>7} {:>6} {:>10}\n", "concurrency", "requests", "req/s",
             "out tok/s", "x c=1", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "batch", "errors", "mismatches");
  double single = 0;
  std::int64_t errors = 0, mismatches = 0;
  for (std::int64_t c : levels) {
    fmt::print(stderr, "bench-serve: concurrency {} for {} s\n", c, a.seconds);
    const bench::LevelResult level = bench::run_level(target, requests, {int(c), a.seconds, int(a.timeout)});
    nlohmann::json s = bench::summarize(level, solo);
    const double tps = s["output_tokens_per_second"].get<double>();
    if (c == 1) single = tps;
    if (single > 0) s["speedup_over_concurrency_1"] = tps / single;
    const std::int64_t e = s["requests"].get<std::int64_t>() - s["completed"].get<std::int64_t>();
    errors += e;
    mismatches += s["mismatches"].get<std::int64_t>();
    fmt::print("{:>11} {:>8} {:>7.2f} {:>10.1f} {:>6} {:>15} {:>15} {:>7.2f} {:>6} {:>10}\n", c, s["requests"].get<std::int64_t>(),
               s["requests_per_second"].get<double>(), tps, single > 0 ? fmt::format("{:.2f}", tps / single) : "-",
               fmt::format("{:.1f}/{:.1f}", s["ttft_ms"]["p50"].get<double>(), s["ttft_ms"]["p99"].get<double>()),
               fmt::format("{:.2f}/{:.2f}", s["tpot_ms"]["p50"].get<double>(), s["tpot_ms"]["p99"].get<double>()),
               s["batch_width_mean"].get<double>(), e, s["mismatches"].get<std::int64_t>());
    std::fflush(stdout);
    j["levels"].push_back(s);
  }
  j["errors"] = errors;
  j["mismatches"] = mismatches;
  if (!a.json.empty()) write_json(a.json, j);
  if (!a.plot.empty()) write_text(a.plot, svg(j));
  if (mismatches > 0) {
    fmt::print(stderr, "bench-serve: {} responses differ from their request's response alone\n", mismatches);
    return kExitFailed;
  }
  if (errors > 0) {
    fmt::print(stderr, "bench-serve: {} requests failed (see the JSON's errors)\n", errors);
    return kExitFailed;
  }
  if (distinct < 2) {
    fmt::print(stderr, "bench-serve: every request alone gave the same text, so the identity check could not fail\n");
    return kExitInconclusive;
  }
  fmt::print(stderr, "bench-serve: every response equals its request's response alone ({} distinct of {} requests)\n", distinct,
             requests.size());
  return 0;
}
#endif

}  // namespace

void add_bench_serve_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench-serve", "concurrent clients against a running server: throughput, latency, identity");
  cmd->footer(
      "Each request is sent alone first; then, at each concurrency, that many clients send streamed completions back to\n"
      "back for --seconds, and every response must equal its request's response alone, byte for byte.\n"
      "Reports requests/s, output tok/s, time to first token (TTFT), time per output token (TPOT), the server's mean\n"
      "requests a step (from /metrics) and mismatches. Exit 0: all equal; 1: a mismatch or failed request; 3: the requests' solo\n"
      "responses were all equal, so the check could not fail.");
  auto a = std::make_shared<Args>();
  add_text_option(cmd, "--url", a->url, "the server: http://HOST:PORT")->required();
  add_text_option(cmd, "--model", a->model, "the requests' model name (default: none sent)");
  add_text_option(cmd, "--api-key", a->api_key, "sent as 'Authorization: Bearer KEY'");
  add_text_option(cmd, "--concurrency", a->concurrency, "client counts, one level each: a list 1,4,16 or a range (default 1,4,16)");
  add_seconds_option(cmd, "--seconds", a->seconds, "each level's length: clients start requests until then (default 20)");
  add_integer_option(cmd, "--max-tokens", a->max_tokens, "each request's max_tokens (default 64)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20));
  cmd->add_option("--temperature", a->temperature, "0: greedy (default); above: sampled, each request with its own seed")
      ->check(CLI::Range(0.0, 100.0));
  add_integer_option(cmd, "--timeout", a->timeout, "seconds a request may take (default 600)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(86400)));
  add_text_option(cmd, "--prompts", a->prompts, "a JSON array of prompt strings (default: a built-in set of 12)");
  add_path_option(cmd, "--json", a->json, "write the configuration and every level's figures as JSON");
  add_path_option(cmd, "--plot", a->plot, "write output tok/s and TPOT against concurrency as SVG");
  cmd->callback([a, &exit_code] {
    check_outputs({{"--json", a->json}, {"--plot", a->plot}});
    if (a->seconds <= 0) throw std::invalid_argument("--seconds: must be above 0");
#ifdef EXACTQ_HAVE_SERVE
    exit_code = run(*a);
#else
    (void)exit_code;
    throw std::invalid_argument("bench-serve: this build has no HTTP library (install libcpp-httplib-dev, scripts/setup.sh, and rebuild)");
#endif
  });
}

}  // namespace exactq::cli
