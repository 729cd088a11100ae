// `exactq generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3)`: greedy decoding on the CPU or
// CUDA backend, the text streamed as it is produced, then one line of prefill and decode speed
// (and optionally a JSON record of the run).
#include "generate.h"

#include <cstdio>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "exactq/decoder.h"
#include "exactq/generate.h"
#include "exactq/tokenizer.h"
#include "make_model.h"

namespace exactq::cli {

namespace {

struct Args {
  std::string model, prompt, prompt_ids, backend = "cpu", kernels = "exact", json;
  std::int64_t max_tokens = 128, context = 0;
  int threads = 0;
  bool ignore_eos = false;
};

// "1,2,3": token ids in base 10, repeats allowed.
std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.empty()) throw std::invalid_argument("--prompt-ids: an empty item in '" + text + "'");
    ids.push_back(std::int32_t(decimal_value(item, "--prompt-ids", 0, std::numeric_limits<std::int32_t>::max())));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return ids;
}

double per_second(std::int64_t tokens, double seconds) { return seconds > 0 ? double(tokens) / seconds : 0.0; }

void run(const Args& a) {
  if (a.prompt.empty() == a.prompt_ids.empty())
    throw std::invalid_argument("generate: give exactly one of --prompt and --prompt-ids");
  if (!a.json.empty()) check_writable(a.json, "--json");
  check_threads(a.threads);
  const KernelFamily family = parse_kernel_family(a.kernels);
  const Checkpoint checkpoint = Checkpoint::open(a.model);
  std::optional<Tokenizer> tokenizer;
  if (std::filesystem::exists(std::filesystem::path(a.model) / "tokenizer.json")) tokenizer = Tokenizer::open(a.model);
  if (!a.prompt.empty() && !tokenizer)
    throw std::invalid_argument("--prompt: '" + a.model + "' has no tokenizer.json (give --prompt-ids)");
  const std::vector<std::int32_t> prompt = a.prompt.empty() ? parse_ids(a.prompt_ids) : tokenizer->encode(a.prompt);
  if (prompt.empty()) throw std::invalid_argument("--prompt: the text gives no tokens");
  const std::int64_t vocab = checkpoint.embed_tokens().n;
  for (std::int32_t id : prompt)
    if (id >= vocab)
      throw std::invalid_argument("--prompt-ids: token " + std::to_string(id) + " is outside the model's vocabulary [0, " +
                                  std::to_string(vocab) + ")");

  QmvOptions qmv_options;
  qmv_options.threads = a.threads;
  auto backend = make_backend(a.backend, qmv_options);
  Decoder decoder(*backend, checkpoint, {family, a.context});
  GreedyOptions options;
  options.max_tokens = a.max_tokens;
  if (tokenizer && !a.ignore_eos) options.stop_ids = tokenizer->eos_ids();

  std::optional<Tokenizer::Stream> stream;
  if (tokenizer) stream = tokenizer->stream(true);
  if (tokenizer) fmt::print("{}", a.prompt.empty() ? tokenizer->decode(prompt) : a.prompt);
  std::fflush(stdout);
  const GreedyResult r = greedy_decode(decoder, prompt, options, [&](std::int32_t id) {
    if (stream)
      fmt::print("{}", stream->step(id));
    else
      fmt::print("{} ", id);
    std::fflush(stdout);
  });
  if (stream) fmt::print("{}", stream->finish());
  const std::int64_t decoded = std::int64_t(r.tokens.size()) - 1;  // the first token comes from the prefill
  fmt::print("\n[{} {} {}] prefill {} tokens in {:.3f} s ({:.1f} tok/s); decode {} tokens in {:.3f} s ({:.1f} tok/s); "
             "stopped: {}\n",
             backend->name(), to_string(family), checkpoint.config().model_type, r.prompt_tokens, r.prefill_seconds,
             per_second(r.prompt_tokens, r.prefill_seconds), decoded, r.decode_seconds,
             per_second(decoded, r.decode_seconds), to_string(r.stop));
  if (!a.json.empty()) {
    nlohmann::json j = {{"model", a.model},
                        {"model_type", checkpoint.config().model_type},
                        {"backend", backend->name()},
                        {"device", backend->description()},
                        {"kernels", to_string(family)},
                        {"context_length", decoder.context_length()},
                        {"prompt_ids", prompt},
                        {"output_ids", r.tokens},
                        {"stop", to_string(r.stop)},
                        {"prefill_tokens", r.prompt_tokens},
                        {"prefill_seconds", r.prefill_seconds},
                        {"prefill_tokens_per_second", per_second(r.prompt_tokens, r.prefill_seconds)},
                        {"decode_tokens", decoded},
                        {"decode_seconds", r.decode_seconds},
                        {"decode_tokens_per_second", per_second(decoded, r.decode_seconds)}};
    if (tokenizer) j["text"] = tokenizer->decode(r.tokens, true);
    write_json(a.json, j);
  }
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("generate", "Greedy text generation from a checkpoint (mlx-community layout)");
  cmd->footer(
      "The text is streamed as it is produced; the last line gives prefill and decode speed.\n"
      "Exit status: 0 generated, 2 bad arguments or a malformed checkpoint (the message names the value).");
  auto a = std::make_shared<Args>();
  add_text_option(cmd, "--model", a->model, "the model directory")->required();
  add_text_option(cmd, "--prompt", a->prompt, "the prompt text (needs the model's tokenizer.json)");
  add_text_option(cmd, "--prompt-ids", a->prompt_ids, "the prompt as token ids, e.g. 1,2,3");
  add_integer_option(cmd, "--max-tokens", a->max_tokens, "tokens to generate at most (default 128)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 24));
  add_integer_option(cmd, "--context", a->context, "KV cache positions (default: the model's, at most 4096)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 24));
  add_text_option(cmd, "--backend", a->backend, "cpu (default), cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  add_text_option(cmd, "--kernels", a->kernels,
                  "the linears' kernel family: exact (default), mma, narrow, or wide (not width-invariant)")
      ->check(CLI::IsMember({"exact", "mma", "narrow", "wide"}));
  add_integer_option(cmd, "--threads", a->threads, "CPU threads (0: all)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "do not stop at the tokenizer's end-of-sequence tokens");
  add_path_option(cmd, "--json", a->json, "also write the run (ids, text, speeds) as JSON to this file");
  cmd->callback([a, &exit_code] {
    run(*a);
    exit_code = 0;
  });
}

}  // namespace exactq::cli
