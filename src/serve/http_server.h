// The HTTP front of `exactq serve` on cpp-httplib: routes, authentication, SSE streaming, one log
// line per request. It only parses, queues and answers; the Scheduler runs the model.
#pragma once

#include <memory>
#include <string>

#include "serve/api.h"
#include "serve/job.h"
#include "serve/metrics.h"

namespace exactq::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: a free port
  std::string api_key;  // empty: no authentication
  std::size_t connection_threads = 16;
  bool speculative = false;
};

class HttpServer {
 public:
  HttpServer(ServerOptions options, ApiContext api, Scheduler& scheduler, Metrics& metrics);
  ~HttpServer();
  // Binds; returns the port (throws std::runtime_error naming host and port where it cannot).
  int bind();
  // Serves until stop(); false where the listening failed.
  bool listen();
  // Stops taking connections and returns once the connection threads are done.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace exactq::serve
