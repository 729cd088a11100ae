#include "serve/http_server.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>
#include <httplib.h>

namespace exactq::serve {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The start of the request this connection thread is serving, for its log line.
thread_local Clock::time_point request_start;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

// Compares every byte of equal-length keys whatever the first difference, so the time taken does
// not tell how much of a guessed key was right.
bool same_key(const std::string& given, const std::string& expected) {
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return diff == 0;
}

}  // namespace

struct HttpServer::Impl {
  ServerOptions options;
  ApiContext api;
  Scheduler& scheduler;
  Metrics& metrics;
  httplib::Server server;
  std::atomic<std::uint64_t> next_id{1};
  std::atomic<bool> closing{false};

  Impl(ServerOptions o, ApiContext a, Scheduler& s, Metrics& m) : options(std::move(o)), api(std::move(a)), scheduler(s), metrics(m) {}

  void routes();
  void generate(const httplib::Request& req, httplib::Response& res, bool chat);
};

void HttpServer::Impl::routes() {
  const std::size_t threads = options.connection_threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(std::size_t(16) << 20);
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    request_start = Clock::now();
    const bool guarded = req.path.starts_with("/v1/") || req.path == "/metrics";
    if (guarded && !options.api_key.empty() && !same_key(req.get_header_value("Authorization"), "Bearer " + options.api_key)) {
      send_error(res, ApiError(401, "Incorrect or missing API key: send the header 'Authorization: Bearer KEY'", "",
                               "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string message = res.status == 404 ? fmt::format("no route {} {}", req.method, req.path)
                                                  : fmt::format("HTTP {} for {} {}", res.status, req.method, req.path);
    res.set_content(error_body(ApiError(res.status, message)), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "internal error: " + what, "", "", "server_error"));
  });
  server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics.count_response(res.status);
    const double seconds = std::chrono::duration<double>(Clock::now() - request_start).count();
    fmt::print(stderr, "{} {} {} {} {:.3f}s\n", req.remote_addr, req.method, req.path, res.status, seconds);
    std::fflush(stderr);
  });

  server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", api.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "exactq"}};
    res.set_content(dump({{"object", "list"}, {"data", json::array({model})}}), "application/json");
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(scheduler.queue_depth(), options.speculative), "text/plain; version=0.0.4");
  });
  server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, false); });
  server.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, true); });
}

void HttpServer::Impl::generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  ParsedRequest r;
  try {
    r = chat ? parse_chat(req.body, api) : parse_completion(req.body, api);
  } catch (const ApiError& e) {
    send_error(res, e);
    return;
  }
  auto job = std::make_shared<Job>(r.spec);
  if (closing.load()) {
    send_error(res, ApiError(503, "the server is shutting down", "", "shutting_down", "server_error"));
    return;
  }
  if (!scheduler.submit(job)) {
    if (closing.load())
      send_error(res, ApiError(503, "the server is shutting down", "", "shutting_down", "server_error"));
    else
      send_error(res, ApiError(429, "the request queue is full; retry later", "", "queue_full", "rate_limit_error"));
    return;
  }
  const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id.fetch_add(1));
  const std::int64_t created = std::int64_t(std::time(nullptr));
  const std::string model = api.model_id;
  if (!r.stream) {
    const Outcome& o = job->wait();
    if (o.finish == Finish::failed)
      send_error(res, ApiError(500, "generation failed: " + o.error, "", "", "server_error"));
    else if (o.finish == Finish::cancelled)
      send_error(res, ApiError(503, "the request was cancelled: the server is shutting down", "", "cancelled", "server_error"));
    else
      res.set_content(dump(completion_response(id, model, created, r, o, chat, api.tokenizer)), "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  struct StreamState {
    Job::Seen seen;
    std::size_t offset = 0;  // the decoded text of the tokens sent (logprobs' text_offset)
    bool started = false;
  };
  auto progress = std::make_shared<StreamState>();
  const Tokenizer* tokenizer = r.spec.logprobs >= 0 ? api.tokenizer : nullptr;
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, progress, r, id, created, chat, model, tokenizer](std::size_t, httplib::DataSink& sink) {
        // A failed write is a client that went away: its request is cancelled.
        auto send = [&](const std::string& event) {
          if (sink.write(event.data(), event.size())) return true;
          job->cancel();
          return false;
        };
        auto chunk = [&](const std::string& text, const char* finish) {
          return send("data: " + dump(completion_chunk(id, model, created, chat, text, finish)) + "\n\n");
        };
        // New text, with the logprobs of the tokens it completes where they were asked for.
        auto piece = [&](const Progress& p) {
          if (p.text.empty() && (!tokenizer || p.tokens.empty())) return true;
          const json logprobs =
              tokenizer ? logprobs_json(*tokenizer, r, p.tokens, p.logprobs, progress->offset, progress->seen.text, chat)
                        : json(nullptr);
          return send("data: " + dump(completion_chunk(id, model, created, chat, p.text, nullptr, logprobs)) + "\n\n");
        };
        if (chat && !progress->started) {
          json first = completion_chunk(id, model, created, true, "", nullptr);
          first["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
          if (!send("data: " + dump(first) + "\n\n")) return false;
        }
        progress->started = true;
        if (!piece(job->wait_progress(progress->seen, std::chrono::milliseconds(200)))) return false;
        if (!job->done()) return true;
        const Outcome& o = job->wait();
        if (!piece(job->wait_progress(progress->seen, std::chrono::milliseconds(0)))) return false;
        if (o.finish == Finish::failed) {
          const ApiError e(500, "generation failed: " + o.error, "", "", "server_error");
          if (!send("data: " + error_body(e) + "\n\n")) return false;
        } else if (!chunk("", to_string(o.finish))) {
          return false;
        }
        if (progress->started && r.stream_usage) {
          json last = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
                       {"model", model}, {"choices", json::array()}, {"usage", usage(r, o)}};
          if (!send("data: " + dump(last) + "\n\n")) return false;
        }
        if (!send("data: [DONE]\n\n")) return false;
        sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancel();
      });
}

HttpServer::HttpServer(ServerOptions options, ApiContext api, Scheduler& scheduler, Metrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(api), scheduler, metrics)) {
  impl_->routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const int port = impl_->options.port == 0 ? impl_->server.bind_to_any_port(impl_->options.host)
                                            : (impl_->server.bind_to_port(impl_->options.host, impl_->options.port)
                                                   ? impl_->options.port
                                                   : -1);
  if (port < 0)
    throw std::runtime_error(fmt::format("could not listen on {}:{} (the address is in use or not this machine's)",
                                         impl_->options.host, impl_->options.port));
  return port;
}

bool HttpServer::listen() { return impl_->server.listen_after_bind(); }

void HttpServer::stop() {
  impl_->closing.store(true);
  impl_->server.stop();
}

}  // namespace exactq::serve
