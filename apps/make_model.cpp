// `exactq make-model`: a random checkpoint in the mlx-community layout (weights' statistics:
// src/model/make_model.cpp).
#include "make_model.h"

#include <charconv>
#include <chrono>

#include <fmt/format.h>

#include "cli_common.h"
#include "exactq/checkpoint_writer.h"

namespace exactq::cli {

std::int64_t decimal_value(const std::string& text, std::string_view option, std::int64_t lo, std::int64_t hi) {
  const std::size_t sign = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  const bool digits = text.size() > sign && text.find_first_not_of("0123456789", sign) == std::string::npos;
  std::int64_t v = 0;
  const char* begin = text.data() + (sign && text[0] == '+' ? 1 : 0);
  const auto [end, ec] = std::from_chars(begin, text.data() + text.size(), v);
  if (!digits || ec != std::errc() || end != text.data() + text.size())
    throw std::invalid_argument(fmt::format("{} '{}' is not a base-10 integer", option, text));
  if (v < lo || v > hi) throw std::invalid_argument(fmt::format("{} {} is out of range [{}, {}]", option, text, lo, hi));
  return v;
}

void add_make_model_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("make-model", "Write a random checkpoint in the mlx-community 4-bit layout");
  cmd->footer(
      "Shapes: tiny (seconds, for CI), small, and the full llama3-8b, qwen3-8b and gemma3-12b (GPU machine).\n"
      "The same options and seed give the same bytes. Exit status: 0 written, 2 bad arguments.");
  struct Args {
    std::string arch = "llama", shape = "tiny", dtype = "bf16", out;
    std::string bits = "4", group = "64", threads = "0", seed = "0", max_shard_bytes = std::to_string(kMlxShardBytes);
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--arch", a->arch, "llama, qwen3 or gemma3")->capture_default_str();
  cmd->add_option("--shape", a->shape, "tiny, small, llama3-8b, qwen3-8b or gemma3-12b")->capture_default_str();
  cmd->add_option("--bits", a->bits, "2, 3, 4, 5, 6 or 8")->capture_default_str();
  cmd->add_option("--group", a->group, "32, 64 or 128")->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "bf16, f16 or f32 (scales, biases, norms)")->capture_default_str();
  cmd->add_option("--seed", a->seed, "random seed (0 to 2^63-1)")->capture_default_str();
  cmd->add_option("--max-shard-bytes", a->max_shard_bytes, "tensor bytes per shard (mlx-lm: 5 GiB)")->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all; no byte depends on it)")->capture_default_str();
  cmd->add_option("--out", a->out, "the model directory to create (absent or empty)")->required();
  cmd->callback([a, &exit_code] {
    MakeModelOptions o;
    o.arch = a->arch;
    o.shape = a->shape;
    o.bits = int(decimal_value(a->bits, "--bits", 0, 64));
    o.group = int(decimal_value(a->group, "--group", 0, 1 << 20));
    o.dtype = parse_dtype(a->dtype);
    o.seed = std::uint64_t(decimal_value(a->seed, "--seed", 0, INT64_MAX));
    o.threads = int(decimal_value(a->threads, "--threads", 0, 1 << 20));
    check_threads(o.threads);
    o.max_shard_bytes = std::uint64_t(decimal_value(a->max_shard_bytes, "--max-shard-bytes", 1, INT64_MAX));
    if (a->out.empty()) throw std::invalid_argument("--out: empty path");
    make_model_config(o);  // every option checked before anything is written
    const auto t0 = std::chrono::steady_clock::now();
    const MakeModelResult r = make_model(o, a->out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("exactq make-model: {} {} ({} parameters), {}-bit group {} {}, seed {}: {} in {} file(s), {:.3f} GB, {:.1f} s\n",
               o.arch, o.shape, r.parameters, o.bits, o.group, to_string(o.dtype), o.seed, a->out, r.files.size(),
               double(r.bytes) / 1e9, s);
    exit_code = 0;
  });
}

}  // namespace exactq::cli
