// `exactq serve --model DIR`: OpenAI's completions and chat API over HTTP. The model is opened as
// `exactq generate` opens it (backend, kernel family, drafter, exactness gate), and every request
// runs as that command runs it alone, so each response carries the solo run's tokens.
#include "serve.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <pthread.h>

#include "cli_common.h"
#include "exactq/decoder.h"
#include "exactq/probe.h"
#include "exactq/speculative.h"
#include "exactq/tokenizer.h"

#ifdef EXACTQ_HAVE_SERVE
#include "serve/batch_scheduler.h"
#include "serve/http_server.h"
#endif

namespace exactq::cli {

namespace {

struct Args {
  std::string model, draft, backend = "auto", kernels = "exact", host = "127.0.0.1", api_key;
  std::int64_t lookup = 0, block = 4, context = 0, max_queue = 64, max_batch = 8, prefill_chunk = 512;
  int port = 8000, threads = 0;
};

#ifdef EXACTQ_HAVE_SERVE
std::string model_id(const std::string& dir) {
  std::filesystem::path p(dir);
  while (p.has_parent_path() && p.filename().empty()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() ? dir : name;
}

void run(const Args& a) {
  if (!a.draft.empty() && a.lookup > 0) throw std::invalid_argument("serve: give at most one drafter: --draft or --lookup");
  check_threads(a.threads);
  const KernelFamily family = parse_kernel_family(a.kernels);
  const Checkpoint checkpoint = Checkpoint::open(a.model);
  if (!std::filesystem::exists(std::filesystem::path(a.model) / "tokenizer.json"))
    throw std::invalid_argument("--model: '" + a.model + "' has no tokenizer.json (the server speaks text)");
  const Tokenizer tokenizer = Tokenizer::open(a.model);
  std::optional<Checkpoint> draft_checkpoint;
  if (!a.draft.empty()) draft_checkpoint = Checkpoint::open(a.draft);

  // SIGINT and SIGTERM go to one thread that shuts down in order; blocked before any other
  // thread starts, so that every thread inherits the mask. A shell starts a background job with
  // SIGINT ignored, and POSIX lets a system discard an ignored signal even while it is blocked:
  // once blocked, the default disposition is restored so that sigwait sees it. A client gone
  // mid-write is a failed write, not a signal that ends the process.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGPIPE, SIG_IGN);

  // Up to --max-batch requests in each forward, each in its own sequence of the cache (and of the
  // draft model's).
  DecodingSetup setup = open_decoding(a.backend, a.threads, checkpoint, family, a.context, draft_checkpoint, a.draft,
                                      a.lookup, a.max_batch);
  const std::unique_ptr<Backend>& backend = setup.backend;
  Decoder& decoder = *setup.decoder;
  BatchDrafter* drafter = nullptr;
  std::string mode = "classic decode";
  if (setup.batch_drafter) {
    // The gate `exactq generate` applies: speculative decoding only where the exactness probe finds
    // the verify forward equal to as many decode steps; classic decode otherwise.
    ExactnessGate gate;
    ProbeOptions probe_options;
    probe_options.draws = 2;
    if (gate.allows(*backend, checkpoint, a.model, a.block, family, probe_options)) {
      drafter = setup.batch_drafter.get();
      mode = fmt::format("speculative decode ({}, block {})", drafter->name(), a.block);
    } else {
      fmt::print(stderr, "exactq serve: the exactness probe found the {}-wide verify forward unequal to {} decode steps; "
                         "serving with classic decode\n", a.block, a.block);
    }
  }
  mode += fmt::format(", up to {} requests a forward", a.max_batch);
  serve::Metrics metrics;
  serve::BatchScheduler scheduler(decoder, tokenizer, metrics, std::size_t(a.max_queue), drafter, a.block, a.prefill_chunk);

  const std::optional<std::int32_t> bos = tokenizer.bos_id();
  const std::string bos_text = bos && tokenizer.has_token(*bos) ? tokenizer.token_text(*bos) : std::string();
  const serve::TemplateLookup lookup = serve::find_chat_template(a.model, bos_text);
  serve::ApiContext api{model_id(a.model), &tokenizer, decoder.vocab_size(), decoder.context_length(), &lookup.chat_template,
                        lookup.error};
  // A connection thread per waiting request and a few for /health and /metrics, up to a bound
  // on the threads started at once: past it, connections wait for a thread before being read.
  const std::size_t connection_threads = std::min<std::size_t>(std::size_t(a.max_queue) + 8, 256);
  serve::ServerOptions server_options{a.host, a.port, a.api_key, connection_threads, drafter != nullptr};
  serve::HttpServer server(server_options, api, scheduler, metrics);
  const int port = server.bind();

  std::atomic<bool> signalled{false};
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    signalled.store(true);
    fmt::print(stderr, "exactq serve: {}: stopping: in-flight and queued requests are cancelled\n",
               signal == SIGINT ? "SIGINT" : "SIGTERM");
    scheduler.shutdown();
    server.stop();
  });
  // The log line first: whoever reads the address from stdout finds the log already written.
  fmt::print(stderr, "exactq serve: {} on {} ({}, {}), {}, context {}, chat: {}; listening on http://{}:{}\n", api.model_id,
             backend->name(), backend->description(), to_string(family), mode, decoder.context_length(),
             lookup.chat_template ? serve::to_string(lookup.chat_template->format) : "none", a.host, port);
  std::fflush(stderr);
  fmt::print("http://{}:{}\n", a.host, port);
  std::fflush(stdout);
  const bool listened = server.listen();
  if (!signalled.load()) pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  scheduler.shutdown();
  if (!listened && !signalled.load()) throw std::runtime_error("serve: the server stopped listening");
}
#endif

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server: every response is the solo run's, byte for byte");
  cmd->footer(
      "Endpoints: GET /health, GET /v1/models, GET /metrics, POST /v1/completions, POST /v1/chat/completions.\n"
      "Up to --max-batch requests run in each forward (with a drafter, each its verify block). Every response is the\n"
      "one `exactq generate` gives for it alone, byte for byte.\n"
      "The first line on stdout is the address listened on (with --port 0, the port picked).\n"
      "SIGINT or SIGTERM: stop taking requests, cancel those in flight, exit 0.");
  auto a = std::make_shared<Args>();
  add_text_option(cmd, "--model", a->model, "the model directory (with its tokenizer.json)")->required();
  add_text_option(cmd, "--draft", a->draft, "speculative decoding with this draft model");
  add_integer_option(cmd, "--lookup", a->lookup, "speculative decoding with prompt lookup of n-grams up to N tokens")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1024)));
  auto* block = add_integer_option(cmd, "--block", a->block, "speculative block width (2..64)")->check(CLI::Range(kMinBlock, kMaxBlock));
  add_text_option(cmd, "--kernels", a->kernels, "the linears' kernel family: exact (default), mma or narrow")
      ->check(CLI::IsMember({"exact", "mma", "narrow"}));
  add_text_option(cmd, "--backend", a->backend, "auto (default), cuda or cpu")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  add_integer_option(cmd, "--threads", a->threads, "CPU threads (0: all)");
  add_text_option(cmd, "--host", a->host, "the address to listen on (default 127.0.0.1: this machine only)");
  add_integer_option(cmd, "--port", a->port, "the port (default 8000; 0: a free one, printed first on stdout)")
      ->check(CLI::Range(0, 65535));
  add_integer_option(cmd, "--max-queue", a->max_queue, "requests that may wait; more are answered 429 (default 64)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(4096)));
  add_integer_option(cmd, "--max-batch", a->max_batch,
                     "requests run together in each forward, each in its own cache (default 8)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(256)));
  add_integer_option(cmd, "--prefill-chunk", a->prefill_chunk,
                     "prompt tokens a step runs, over all new requests: longer prompts take several steps, while others keep "
                     "decoding (default 512)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 24));
  add_integer_option(cmd, "--context", a->context, "KV cache positions (default: the model's, at most 4096)")
      ->check(CLI::Range(std::int64_t(2), std::int64_t(1) << 24));
  add_text_option(cmd, "--api-key", a->api_key, "require 'Authorization: Bearer KEY' on /v1/ and /metrics");
  cmd->callback([a, block, &exit_code] {
    if (block->count() > 0 && a->draft.empty() && a->lookup == 0)
      throw std::invalid_argument("--block: only speculative decoding has a block width (add --draft DIR or --lookup N)");
#ifdef EXACTQ_HAVE_SERVE
    run(*a);
    exit_code = 0;
#else
    (void)exit_code;
    throw std::invalid_argument("serve: this build has no HTTP library (install libcpp-httplib-dev, scripts/setup.sh, and rebuild)");
#endif
  });
}

}  // namespace exactq::cli
