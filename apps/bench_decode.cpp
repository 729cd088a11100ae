// `exactq bench-decode --model DIR [--context 512,4096] [--tokens 64] [--kernels exact,mma]`:
// classic greedy decode after a prefill of C random tokens, per kernel family and context C:
// tokens per second, and the fraction of the roofline: the bytes one step must read (every weight
// once, one embedding row, and the KV cache up to C) at the read ceiling measured in the same run.
// A profiled pass then records the step's timeline (exactq/profile.h: marks on the backend's own
// clock between ops, no wait between them) and splits a step's time by op class; --profile prints
// every op ranked by its time, with the bytes it moves and the rate it reaches; --trace writes a
// Chrome-trace file of one profiled step per point.
#include "bench_decode.h"

#include <chrono>
#include <map>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "exactq/decoder.h"
#include "exactq/inspect.h"
#include "exactq/profile.h"
#include "step_profile.h"
#include "timer.h"

namespace exactq::cli {

namespace {

struct Args {
  std::string model, contexts = "512,4096", kernels = "exact,mma", backend = "auto", json, trace;
  std::int64_t tokens = 64;
  int threads = 0;
  bool profile = false;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void run(const Args& a) {
  check_outputs({{"--json", a.json}, {"--trace", a.trace}});
  check_threads(a.threads);
  const std::vector<std::int64_t> contexts = parse_int_list(a.contexts, "--context");
  for (std::int64_t c : contexts)
    if (c < 1 || c > (std::int64_t(1) << 20)) throw std::invalid_argument(fmt::format("--context: {} is out of range [1, 2^20]", c));
  std::vector<KernelFamily> families;
  for (std::size_t at = 0; at <= a.kernels.size();) {
    const std::size_t comma = std::min(a.kernels.find(',', at), a.kernels.size());
    families.push_back(parse_kernel_family(a.kernels.substr(at, comma - at)));
    at = comma + 1;
  }
  const Checkpoint checkpoint = Checkpoint::open(a.model);
  const ModelConfig& c = checkpoint.config();
  QmvOptions qmv_options;
  qmv_options.threads = a.threads;
  auto inner = make_backend(a.backend, qmv_options);
  ProfiledBackend profiled_backend(*inner);
  Backend* backend = &profiled_backend;
  const double ceiling = bench::make_timer(backend->name(), qmv_options)->read_ceiling_bytes_per_s();
  const std::int64_t weights = summarize(checkpoint).decode_bytes_per_token;
  fmt::print("exactq bench-decode {} ({}), {}: read ceiling (same run) {:.1f} GB/s, {:.3f} GB of weights per step\n",
             a.model, c.model_type, backend->description(), ceiling / 1e9, double(weights) / 1e9);
  const auto header = [] {
    fmt::print("{:<8} {:>7} {:>10} {:>10} {:>9} {:>10} {:>11} {:>11} {:>9} {:>9} {:>9}\n", "kernels", "context",
               "prefill s", "tok/s", "us/step", "roofline", "linears us", "attention", "norms", "argmax", "other");
  };
  header();
  nlohmann::json trace_events = nlohmann::json::array();
  nlohmann::json rows = nlohmann::json::array();
  std::mt19937_64 rng(1);
  for (KernelFamily family : families)
    for (std::int64_t context : contexts) {
      if (a.profile && !rows.empty()) header();
      Decoder d(*backend, checkpoint, {family, context + a.tokens + 16});
      std::uniform_int_distribution<std::int32_t> pick(0, std::int32_t(checkpoint.embed_tokens().n - 1));
      std::vector<std::int32_t> prompt(static_cast<std::size_t>(context));
      for (auto& t : prompt) t = pick(rng);
      auto start = Clock::now();
      d.forward(prompt, 0, Decoder::Rows::last);
      std::int32_t token = d.greedy().front();
      const double prefill = seconds_since(start);
      start = Clock::now();
      for (std::int64_t i = 0; i < a.tokens; ++i) {
        d.forward({&token, 1}, d.length());
        token = d.greedy().front();
      }
      const double step_s = seconds_since(start) / double(a.tokens);
      // The profiled pass: a few steps on the timeline.
      const int profiled = 8;
      std::vector<OpRecord> records, last_step;
      for (int i = 0; i < profiled; ++i) {
        profiled_backend.start();
        d.forward({&token, 1}, d.length());
        token = d.greedy().front();
        last_step = profiled_backend.stop();
        records.insert(records.end(), last_step.begin(), last_step.end());
      }
      const bench::StepProfile profile = bench::summarize_steps(records, profiled);
      std::map<std::string, double> split;
      for (const bench::OpSummary& o : profile.ops) split[bench::op_class(o.kind)] += o.us_per_step;
      bench::append_trace_events(trace_events, last_step, int(rows.size()),
                          fmt::format("{} context {}", to_string(family), context));
      const std::int64_t kv = c.num_layers * 2 * context * c.kv_dim() * std::int64_t(dtype_size(d.dtype()));
      const double roofline = double(weights + kv) / step_s / ceiling;
      fmt::print("{:<8} {:>7} {:>10.3f} {:>10.1f} {:>9.1f} {:>9.1f}% {:>11.1f} {:>11.1f} {:>9.1f} {:>9.1f} {:>9.1f}\n",
                 to_string(family), context, prefill, 1.0 / step_s, step_s * 1e6, 100 * roofline, split["linears"],
                 split["attention"], split["norms"], split["argmax"], split["other"]);
      if (a.profile) fmt::print("{}", bench::profile_table(profile, 16));
      std::fflush(stdout);
      rows.push_back({{"kernels", to_string(family)}, {"context", context}, {"prefill_seconds", prefill},
                      {"tokens_per_second", 1.0 / step_s}, {"replayed_forwards", d.replayed_forwards()}, {"us_per_step", step_s * 1e6},
                      {"bytes_per_step", weights + kv}, {"fraction_of_roofline", roofline},
                      {"profile", bench::profile_json(profile)}});
    }
  if (!a.trace.empty()) write_json(a.trace, {{"traceEvents", trace_events}, {"displayTimeUnit", "ns"}});
  if (!a.json.empty())
    write_json(a.json, {{"model", a.model}, {"model_type", c.model_type}, {"device", backend->description()},
                        {"read_ceiling_gb_s", ceiling / 1e9}, {"weight_bytes_per_step", weights},
                        {"tokens_per_context", a.tokens}, {"rows", rows}});
}

}  // namespace

void add_bench_decode_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench-decode", "Classic greedy decode speed against the same-run read ceiling");
  cmd->footer("Exit status: 0 measured, 1 a run failed, 2 bad arguments or a malformed checkpoint.");
  auto a = std::make_shared<Args>();
  add_text_option(cmd, "--model", a->model, "the model directory")->required();
  add_text_option(cmd, "--context", a->contexts, "prompt lengths before the timed steps (default 512,4096)");
  add_integer_option(cmd, "--tokens", a->tokens, "timed decode steps per point (default 64)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 16));
  add_text_option(cmd, "--kernels", a->kernels, "kernel families, e.g. exact,mma (default)");
  add_text_option(cmd, "--backend", a->backend, "auto (default), cuda or cpu")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  add_integer_option(cmd, "--threads", a->threads, "CPU threads (0: all)");
  add_path_option(cmd, "--json", a->json, "also write the results as JSON to this file");
  cmd->add_flag("--profile", a->profile, "print every op of the step ranked by its time on the backend's clock");
  add_path_option(cmd, "--trace", a->trace, "write a Chrome-trace timeline of one profiled step per point to this file");
  cmd->callback([a, &exit_code] {
    run(*a);
    exit_code = 0;
  });
}

}  // namespace exactq::cli
