// Load against a running `exactq serve` (or any OpenAI-compatible completions server): N clients,
// each sending streamed completions back to back for a while, every response timed (time to first
// token, time per output token, gaps between chunks) and compared byte for byte with the same
// request's response when it ran alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace exactq::bench {

struct ServeTarget {
  std::string host;
  int port = 0;
  std::string api_key;  // sent as a bearer token where not empty
  std::string model;    // the request's "model"; "" leaves it out
};

// "http://HOST:PORT" (no path, no https); throws std::invalid_argument naming the text otherwise.
ServeTarget parse_serve_url(const std::string& url);

struct LoadRequest {
  std::string prompt;
  std::int64_t max_tokens = 64;
  double temperature = 0;  // 0: greedy; otherwise sampled with `seed`
  std::uint64_t seed = 0;
};

struct Response {
  bool ok = false;
  std::string error;  // why not ok: the transport's error, the status and body, or a malformed stream
  std::string text;
  std::int64_t completion_tokens = 0;
  std::string finish_reason;
  double start = 0, first = 0, end = 0;  // seconds since the level began; first: the first text
  std::vector<double> chunks;            // arrival of every chunk that carried text
};

// One streamed completion; never throws for the server's answers (they land in `error`).
Response complete(const ServeTarget& target, const LoadRequest& request, double clock_origin, int timeout_seconds);

// The server's exactq_batch_width histogram (sum and count of steps), from GET /metrics; both 0
// where the server has none.
struct BatchWidths {
  double sum = 0, count = 0;
};
BatchWidths batch_widths(const ServeTarget& target);

struct LevelOptions {
  int concurrency = 1;
  double seconds = 10;  // clients start new requests until then; those started finish
  int timeout_seconds = 600;
};
struct LevelResult {
  int concurrency = 0;
  double wall_seconds = 0;
  std::vector<std::size_t> request_index;  // which of the requests each response answers
  std::vector<Response> responses;
  double batch_width_mean = 0;  // mean requests a scheduler step over the level (0: not reported)
};
// Client c sends requests[(c + k * concurrency) % size] for k = 0, 1, ..., so every request runs
// beside different neighbours at every level.
LevelResult run_level(const ServeTarget& target, const std::vector<LoadRequest>& requests, const LevelOptions& options);

// The level's figures: requests/s, output tok/s, percentiles of TTFT, TPOT and chunk gaps (ms),
// errors, and identity against `solo` (the responses of each request alone): mismatches are
// responses whose text, token count or finish reason differ from their request's solo response.
nlohmann::json summarize(const LevelResult& level, const std::vector<Response>& solo);

// The p-th percentile (0..100) by linear interpolation between order statistics; 0 for none.
double percentile(std::vector<double> values, double p);

}  // namespace exactq::bench
