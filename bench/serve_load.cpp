#include "serve_load.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <httplib.h>

namespace exactq::bench {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

httplib::Client client_for(const ServeTarget& t, int timeout_seconds) {
  httplib::Client c(t.host, t.port);
  c.set_connection_timeout(10, 0);
  c.set_read_timeout(timeout_seconds, 0);
  c.set_write_timeout(timeout_seconds, 0);
  if (!t.api_key.empty()) c.set_bearer_token_auth(t.api_key);
  return c;
}

// One server-sent event's data line into `r`; false where the stream says it failed or makes no sense.
bool take_event(const std::string& data, double at, Response& r) {
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (!j.is_object()) {
    r.error = "a stream event that is not a JSON object: " + data.substr(0, 200);
    return false;
  }
  if (j.contains("error")) {
    r.error = "the stream ended in an error: " + j["error"].dump();
    return false;
  }
  if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("completion_tokens"))
    r.completion_tokens = j["usage"]["completion_tokens"].get<std::int64_t>();
  if (!j.contains("choices") || !j["choices"].is_array()) return true;
  for (const auto& c : j["choices"]) {
    const std::string text = c.contains("text") && c["text"].is_string() ? c["text"].get<std::string>() : std::string();
    if (!text.empty()) {
      if (r.chunks.empty()) r.first = at;
      r.chunks.push_back(at);
      r.text += text;
    }
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) r.finish_reason = c["finish_reason"].get<std::string>();
  }
  return true;
}

}  // namespace

ServeTarget parse_serve_url(const std::string& url) {
  const std::string scheme = "http://";
  auto bad = [&](const std::string& why) { return std::invalid_argument("--url: '" + url + "': " + why); };
  if (url.rfind(scheme, 0) != 0) throw bad("give http://HOST:PORT");
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) throw bad("no path after HOST:PORT (the API's paths are fixed)");
  const std::size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) throw bad("give http://HOST:PORT");
  const std::string port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw bad("the port is not a number");
  const int p = std::stoi(port);
  if (p < 1 || p > 65535) throw bad("the port is outside 1..65535");
  ServeTarget t;
  t.host = rest.substr(0, colon);
  if (t.host.size() > 2 && t.host.front() == '[' && t.host.back() == ']') t.host = t.host.substr(1, t.host.size() - 2);
  t.port = p;
  return t;
}

Response complete(const ServeTarget& target, const LoadRequest& request, double clock_origin, int timeout_seconds) {
  Response r;
  nlohmann::json body = {{"prompt", request.prompt},
                         {"max_tokens", request.max_tokens},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}},
                         {"temperature", request.temperature}};
  if (request.temperature > 0) body["seed"] = request.seed;
  if (!target.model.empty()) body["model"] = target.model;
  httplib::Client c = client_for(target, timeout_seconds);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.headers.emplace("Content-Type", "application/json");
  std::string pending, raw;
  bool done = false, failed = false;
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    const double at = now_seconds() - clock_origin;
    raw.append(data, std::min<std::size_t>(n, raw.size() < 4096 ? 4096 - raw.size() : 0));
    pending.append(data, n);
    for (std::size_t end; !failed && (end = pending.find("\n\n")) != std::string::npos;) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") done = true;
      else if (!take_event(payload, at, r)) failed = true;
    }
    return true;
  };
  r.start = now_seconds() - clock_origin;
  const httplib::Result res = c.send(req);
  r.end = now_seconds() - clock_origin;
  if (!res) {
    r.error = "no response from " + target.host + ":" + std::to_string(target.port) + " (" + httplib::to_string(res.error()) + ")";
  } else if (res->status != 200) {
    r.error = "HTTP " + std::to_string(res->status) + ": " + (raw.empty() ? res->body.substr(0, 4096) : raw);
  } else if (!failed && !done) {
    r.error = "the stream ended without [DONE]";
  } else if (!failed) {
    r.ok = true;
  }
  return r;
}

BatchWidths batch_widths(const ServeTarget& target) {
  httplib::Client c = client_for(target, 30);
  const httplib::Result res = c.Get("/metrics");
  BatchWidths w;
  if (!res || res->status != 200) return w;
  auto value = [&](const std::string& name) {
    const std::size_t at = res->body.find("\n" + name + " ");
    return at == std::string::npos ? 0.0 : std::strtod(res->body.c_str() + at + name.size() + 2, nullptr);
  };
  w.sum = value("exactq_batch_width_sum");
  w.count = value("exactq_batch_width_count");
  return w;
}

LevelResult run_level(const ServeTarget& target, const std::vector<LoadRequest>& requests, const LevelOptions& options) {
  if (requests.empty()) throw std::invalid_argument("run_level: no requests");
  if (options.concurrency < 1) throw std::invalid_argument("run_level: concurrency " + std::to_string(options.concurrency));
  LevelResult level;
  level.concurrency = options.concurrency;
  const BatchWidths before = batch_widths(target);
  std::mutex mutex;
  const double origin = now_seconds();
  std::vector<std::thread> clients;
  for (int c = 0; c < options.concurrency; ++c) {
    clients.emplace_back([&, c] {
      for (std::size_t k = 0;; ++k) {
        if (now_seconds() - origin >= options.seconds) return;
        const std::size_t index = (std::size_t(c) + k * std::size_t(options.concurrency)) % requests.size();
        Response r = complete(target, requests[index], origin, options.timeout_seconds);
        std::lock_guard lock(mutex);
        level.request_index.push_back(index);
        level.responses.push_back(std::move(r));
      }
    });
  }
  for (auto& t : clients) t.join();
  level.wall_seconds = now_seconds() - origin;
  const BatchWidths after = batch_widths(target);
  if (after.count > before.count) level.batch_width_mean = (after.sum - before.sum) / (after.count - before.count);
  return level;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double at = std::clamp(p, 0.0, 100.0) / 100.0 * double(values.size() - 1);
  const std::size_t lo = std::size_t(std::floor(at)), hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (at - double(lo));
}

nlohmann::json summarize(const LevelResult& level, const std::vector<Response>& solo) {
  std::vector<double> ttft, tpot, gaps;
  std::int64_t tokens = 0, ok = 0, mismatches = 0;
  std::map<std::string, std::int64_t> errors;
  nlohmann::json first_mismatch;
  for (std::size_t i = 0; i < level.responses.size(); ++i) {
    const Response& r = level.responses[i];
    if (!r.ok) {
      ++errors[r.error.substr(0, 120)];
      continue;
    }
    ++ok;
    tokens += r.completion_tokens;
    if (!r.chunks.empty()) ttft.push_back(1e3 * (r.first - r.start));
    if (r.completion_tokens > 1 && r.chunks.size() > 1)
      tpot.push_back(1e3 * (r.chunks.back() - r.first) / double(r.completion_tokens - 1));
    for (std::size_t k = 1; k < r.chunks.size(); ++k) gaps.push_back(1e3 * (r.chunks[k] - r.chunks[k - 1]));
    const Response& s = solo.at(level.request_index[i]);
    if (r.text != s.text || r.completion_tokens != s.completion_tokens || r.finish_reason != s.finish_reason) {
      if (mismatches++ == 0)
        first_mismatch = {{"request", level.request_index[i]}, {"text", r.text}, {"solo_text", s.text},
                          {"completion_tokens", r.completion_tokens}, {"solo_completion_tokens", s.completion_tokens},
                          {"finish_reason", r.finish_reason}, {"solo_finish_reason", s.finish_reason}};
    }
  }
  auto pcts = [](const std::vector<double>& v) {
    return nlohmann::json{{"p50", percentile(v, 50)}, {"p90", percentile(v, 90)}, {"p99", percentile(v, 99)}};
  };
  nlohmann::json e = nlohmann::json::object();
  for (const auto& [what, n] : errors) e[what] = n;
  nlohmann::json j = {{"concurrency", level.concurrency},
                      {"requests", level.responses.size()},
                      {"completed", ok},
                      {"wall_seconds", level.wall_seconds},
                      {"requests_per_second", level.wall_seconds > 0 ? double(ok) / level.wall_seconds : 0.0},
                      {"output_tokens", tokens},
                      {"output_tokens_per_second", level.wall_seconds > 0 ? double(tokens) / level.wall_seconds : 0.0},
                      {"ttft_ms", pcts(ttft)},
                      {"tpot_ms", pcts(tpot)},
                      {"chunk_gap_ms", pcts(gaps)},
                      {"batch_width_mean", level.batch_width_mean},
                      {"errors", e},
                      {"mismatches", mismatches}};
  if (mismatches > 0) j["first_mismatch"] = first_mismatch;
  return j;
}

}  // namespace exactq::bench
