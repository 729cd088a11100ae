// `exactq inspect DIR`: what a checkpoint holds (src/model/inspect.cpp counts it), as a table on
// stdout and optionally as JSON.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "exactq/inspect.h"
#include "make_model.h"

namespace exactq::cli {

namespace {

std::string grouped(std::int64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

nlohmann::json to_json(const CheckpointSummary& s, const std::string& dir) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : s.groups)
    groups.push_back({{"role", g.role}, {"count", g.count}, {"n", g.n}, {"k", g.k}, {"storage", g.storage},
                      {"parameters", g.parameters}, {"bytes", g.bytes}});
  return {{"dir", dir},
          {"arch", s.arch},
          {"model_type", s.model_type},
          {"layers", s.layers},
          {"tied_lm_head", s.tied},
          {"parameters", s.parameters},
          {"file_bytes", s.file_bytes},
          {"tensor_bytes", s.tensor_bytes},
          {"decode_bytes_per_token", s.decode_bytes_per_token},
          {"modules", groups},
          {"ignored_tensors", s.ignored_tensors}};
}

}  // namespace

void add_inspect_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("inspect", "Describe a checkpoint: architecture, parameters, quantization, bytes");
  cmd->footer("Exit status: 0 described, 2 bad arguments or a malformed checkpoint (the message names file, tensor, value).");
  struct Args {
    std::string dir, json;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("dir", a->dir, "the model directory")->required();
  cmd->add_option("--json", a->json, "also write the description as JSON to this file");
  cmd->callback([cmd, a, &exit_code] {
    if (cmd->count("--json") && a->json.empty()) throw std::invalid_argument("--json: empty path");
    if (!a->json.empty()) check_writable(a->json, "--json");
    const Checkpoint c = Checkpoint::open(a->dir);
    const CheckpointSummary s = summarize(c);
    fmt::print("exactq inspect {}\n", a->dir);
    fmt::print("  architecture        {} (model_type {}), {} layers, LM head {}\n", s.arch, s.model_type, s.layers,
               s.tied ? "tied to the embedding" : "separate");
    fmt::print("  parameters          {}\n", grouped(s.parameters));
    fmt::print("  bytes on disk       {} ({:.3f} GB in {} file(s))\n", grouped(std::int64_t(s.file_bytes)), double(s.file_bytes) / 1e9,
               c.files().size());
    fmt::print("  decode bytes/token  {} ({:.3f} GB: every weight once, one embedding row{})\n", grouped(s.decode_bytes_per_token),
               double(s.decode_bytes_per_token) / 1e9, s.tied ? "; the tied head reads the whole embedding" : "");
    fmt::print("\n  {:<56} {:>5} {:>15} {:<16} {:>15} {:>15}\n", "module", "count", "N x K", "storage", "parameters", "bytes");
    for (const auto& g : s.groups)
      fmt::print("  {:<56} {:>5} {:>15} {:<16} {:>15} {:>15}\n", g.role, g.count,
                 g.k ? fmt::format("{} x {}", g.n, g.k) : std::to_string(g.n), g.storage, grouped(g.parameters), grouped(g.bytes));
    if (!s.ignored_tensors.empty())
      fmt::print("\n  {} tensor(s) outside the text model ignored (e.g. {})\n", s.ignored_tensors.size(), s.ignored_tensors.front());
    if (!a->json.empty()) write_json(a->json, to_json(s, a->dir));
    exit_code = 0;
  });
}

}  // namespace exactq::cli
