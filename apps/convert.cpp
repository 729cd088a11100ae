// `exactq convert`: a Hugging Face checkpoint to MLX's quantized layout (what is quantized and
// why: src/model/convert.cpp).
#include <chrono>

#include <fmt/format.h>

#include "cli_common.h"
#include "exactq/checkpoint_writer.h"
#include "make_model.h"

namespace exactq::cli {

void add_convert_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("convert", "Quantize a Hugging Face checkpoint into the mlx-community layout");
  cmd->footer(
      "Quantizes every linear layer and embedding whose input size divides by the group, as mlx_lm.convert -q does;\n"
      "norms, biases and the rest stay in the model dtype. Exit status: 0 written, 2 bad arguments or a malformed input.");
  struct Args {
    std::string from, out, bits = "4", group = "64", threads = "0", max_shard_bytes = std::to_string(kMlxShardBytes);
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--from", a->from, "the Hugging Face model directory (config.json, safetensors)")->required();
  cmd->add_option("--out", a->out, "the model directory to create (absent or empty)")->required();
  cmd->add_option("--bits", a->bits, "2, 3, 4, 5, 6 or 8")->capture_default_str();
  cmd->add_option("--group", a->group, "32, 64 or 128")->capture_default_str();
  cmd->add_option("--max-shard-bytes", a->max_shard_bytes, "tensor bytes per shard (mlx-lm: 5 GiB)")->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all; no byte depends on it)")->capture_default_str();
  cmd->callback([a, &exit_code] {
    ConvertOptions o;
    o.bits = int(decimal_value(a->bits, "--bits", 0, 64));
    o.group = int(decimal_value(a->group, "--group", 0, 1 << 20));
    o.threads = int(decimal_value(a->threads, "--threads", 0, 1 << 20));
    check_threads(o.threads);
    o.max_shard_bytes = std::uint64_t(decimal_value(a->max_shard_bytes, "--max-shard-bytes", 1, INT64_MAX));
    if (a->from.empty() || a->out.empty()) throw std::invalid_argument("--from/--out: empty path");
    const auto t0 = std::chrono::steady_clock::now();
    const ConvertResult r = convert_hf(a->from, a->out, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("exactq convert: {} -> {}: {} modules quantized ({}-bit, group {}), {} tensors kept dense, {} file(s), {:.1f} s\n",
               a->from, a->out, r.quantized_modules, o.bits, o.group, r.unquantized_tensors, r.files.size(), s);
    exit_code = 0;
  });
}

}  // namespace exactq::cli
