// `exactq probe --model DIR [--block 2-16] [--draws 3] [--kernels F] [--backend B] [--json F]`:
// for each block width and draw, K single-token forwards against one K-wide forward, the logit
// bytes compared; a table of verdicts, and where a case diverges, the first op and layer that differ.
#include "probe.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "exactq/probe.h"

namespace exactq::cli {

namespace {

struct Args {
  std::string model, blocks = "2-16", backend = "auto", kernels = "exact", json;
  int draws = 3, threads = 0;
  std::int64_t seed = 1, long_context = 1024;
};

void run(const Args& a, int& exit_code) {
  if (!a.json.empty()) check_writable(a.json, "--json");
  check_threads(a.threads);
  ProbeOptions o;
  o.blocks = parse_int_list(a.blocks, "--block");
  for (std::int64_t k : o.blocks)
    if (k < 2 || k > 64) throw std::invalid_argument(fmt::format("--block: {} is out of range [2, 64]", k));
  o.draws = a.draws;
  o.seed = std::uint64_t(a.seed);
  o.long_context = a.long_context;
  const KernelFamily family = parse_kernel_family(a.kernels);
  const Checkpoint checkpoint = Checkpoint::open(a.model);
  QmvOptions qmv_options;
  qmv_options.threads = a.threads;
  auto backend = make_backend(a.backend, qmv_options);
  fmt::print("exactq probe {} ({}), {} backend, kernels {}: chain of K single steps vs one K-wide forward\n", a.model,
             checkpoint.config().model_type, backend->name(), to_string(family));
  fmt::print("{:>5} {:>5} {:>7}  {}\n", "K", "draw", "start", "verdict");
  const ProbeReport r = probe(*backend, checkpoint, family, o, [](const ProbeCase& c) {
    if (c.equal)
      fmt::print("{:>5} {:>5} {:>7}  equal ({} logit bytes)\n", c.block, c.draw, c.start, c.total_bytes);
    else
      fmt::print("{:>5} {:>5} {:>7}  DIVERGES at row {}: {} of {} bytes differ; first at {} (layer {})\n", c.block,
                 c.draw, c.start, c.first_row, c.differing_bytes, c.total_bytes, c.first_op, c.first_layer);
    std::fflush(stdout);
  });
  const auto diverging = std::count_if(r.cases.begin(), r.cases.end(), [](const ProbeCase& c) { return !c.equal; });
  fmt::print("verdict: {} ({} of {} cases diverge)\n", r.equal() ? "equal" : "diverges", diverging, r.cases.size());
  if (r.equal() && !is_width_invariant(family))
    fmt::print("note: {} is not width-invariant by construction; 'equal' here only means these shapes and draws did "
               "not tell its orders apart (the T-rounded activations hid every difference)\n",
               to_string(family));
  if (!a.json.empty()) {
    nlohmann::json cases = nlohmann::json::array();
    for (const ProbeCase& c : r.cases)
      cases.push_back({{"block", c.block}, {"draw", c.draw}, {"start", c.start}, {"equal", c.equal},
                       {"first_row", c.first_row}, {"differing_bytes", c.differing_bytes},
                       {"total_bytes", c.total_bytes}, {"first_op", c.first_op}, {"first_layer", c.first_layer}});
    write_json(a.json, {{"model", a.model}, {"backend", backend->name()}, {"device", backend->description()},
                        {"kernels", to_string(family)}, {"seed", a.seed}, {"verdict", r.equal() ? "equal" : "diverges"},
                        {"cases", cases}});
  }
  exit_code = r.equal() ? 0 : kExitFailed;
}

}  // namespace

void add_probe_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("probe", "Exactness probe: K single-token forwards against one K-wide forward, byte for byte");
  cmd->footer("Exit status: 0 every case equal, 1 some case diverges, 2 bad arguments or a malformed checkpoint.");
  auto a = std::make_shared<Args>();
  add_text_option(cmd, "--model", a->model, "the model directory")->required();
  add_text_option(cmd, "--block", a->blocks, "block widths K: a range 2-16 or a list 2,4,8 (default 2-16)");
  add_integer_option(cmd, "--draws", a->draws, "draws per width (default 3; the last of 3+ starts past --long-context)")
      ->check(CLI::Range(1, 100));
  add_integer_option(cmd, "--long-context", a->long_context, "the long draw's minimum start position (default 1024)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20));
  add_integer_option(cmd, "--seed", a->seed, "the draws' seed (default 1)")
      ->check(CLI::Range(std::int64_t(0), std::numeric_limits<std::int64_t>::max()));
  add_text_option(cmd, "--backend", a->backend, "auto (default: cuda when a GPU is usable), cuda or cpu")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  add_text_option(cmd, "--kernels", a->kernels, "exact (default), mma, narrow or wide")
      ->check(CLI::IsMember({"exact", "mma", "narrow", "wide"}));
  add_integer_option(cmd, "--threads", a->threads, "CPU threads (0: all)");
  add_path_option(cmd, "--json", a->json, "also write every case as JSON to this file");
  cmd->callback([a, &exit_code] { run(*a, exit_code); });
}

}  // namespace exactq::cli
