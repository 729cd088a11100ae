// `exactq generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3)`: greedy decoding on the CPU or
// CUDA backend, classic or speculative (--draft DIR, --lookup N), the text streamed as it is
// produced, then one line of prefill and decode speed (and optionally a JSON record of the run).
// --compare runs both on the same prompt and compares their token ids.
#include "generate.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "exactq/decoder.h"
#include "exactq/generate.h"
#include "exactq/probe.h"
#include "exactq/sampling.h"
#include "exactq/speculative.h"
#include "exactq/tokenizer.h"
#include "make_model.h"

namespace exactq::cli {

namespace {

struct Args {
  std::string model, prompt, prompt_ids, backend = "auto", kernels = "exact", json, draft;
  std::int64_t max_tokens = 128, context = 0, lookup = 0, block = 4;
  std::uint64_t replay_seed = 1;
  double replay_rate = 0;
  int threads = 0;
  bool ignore_eos = false, replay = false, compare = false, allow_inexact = false, replay_rate_given = false;
  bool adaptive = false;
  SamplingOptions sampling;
};

double per_second(std::int64_t tokens, double seconds) { return seconds > 0 ? double(tokens) / seconds : 0.0; }

// Tokens after the first (which comes from the prefill) per second of decoding.
double decode_rate(const GreedyResult& r) { return per_second(std::int64_t(r.tokens.size()) - 1, r.decode_seconds); }

std::string speed_line(const GreedyResult& r) {
  const std::int64_t decoded = std::int64_t(r.tokens.size()) - 1;
  return fmt::format("prefill {} tokens in {:.3f} s ({:.1f} tok/s); decode {} tokens in {:.3f} s ({:.1f} tok/s)", r.prompt_tokens,
                     r.prefill_seconds, per_second(r.prompt_tokens, r.prefill_seconds), decoded, r.decode_seconds,
                     decode_rate(r));
}

nlohmann::json speeds(const GreedyResult& r) {
  return {{"output_ids", r.tokens},
          {"stop", to_string(r.stop)},
          {"prefill_tokens", r.prompt_tokens},
          {"prefill_seconds", r.prefill_seconds},
          {"prefill_tokens_per_second", per_second(r.prompt_tokens, r.prefill_seconds)},
          {"decode_tokens", std::int64_t(r.tokens.size()) - 1},
          {"decode_seconds", r.decode_seconds},
          {"decode_tokens_per_second", decode_rate(r)}};
}

// One warning for a run whose output has ids the tokenizer does not have (a model's embedding is
// often padded past its tokenizer): they decode to nothing; the JSON keeps them.
void warn_ids_past_tokenizer(const Tokenizer& tokenizer, const std::vector<std::int32_t>& output, std::int64_t model_vocab) {
  std::int64_t n = 0;
  std::int32_t first = -1;
  for (const std::int32_t id : output)
    if (!tokenizer.has_token(id)) {
      if (n++ == 0) first = id;
    }
  if (n == 0) return;
  std::fflush(stdout);
  fmt::print(stderr,
             "exactq: warning: {} generated token id{} (first {}) {} no token in the tokenizer ({} ids; the model has {}): "
             "{} to nothing (--json keeps {} in output_ids)\n",
             n, n == 1 ? "" : "s", first, n == 1 ? "has" : "have", tokenizer.vocab_size(), model_vocab,
             n == 1 ? "it decodes" : "they decode", n == 1 ? "it" : "them");
}

void run(const Args& a) {
  if (a.prompt.empty() == a.prompt_ids.empty())
    throw std::invalid_argument("generate: give exactly one of --prompt and --prompt-ids");
  const bool replay = a.replay || a.replay_rate_given;
  const int drafters = int(!a.draft.empty()) + int(a.lookup > 0) + int(replay);
  if (drafters > 1) throw std::invalid_argument("generate: give at most one drafter: --draft, --lookup or --replay");
  bool speculative = drafters == 1;
  if (a.compare && !speculative)
    throw std::invalid_argument("--compare: needs a drafter to compare with classic decode (--draft DIR or --lookup N)");
  if (!a.json.empty()) check_writable(a.json, "--json");
  check_threads(a.threads);
  const KernelFamily family = parse_kernel_family(a.kernels);
  bool inexact = speculative && !speculation_allowed(family);
  if (inexact && !a.allow_inexact)
    throw std::invalid_argument(fmt::format(
        "--kernels {}: this family is not width-invariant, so speculative decoding may not give classic decode's "
        "output; refused (--allow-inexact runs it anyway)",
        to_string(family)));
  const Checkpoint checkpoint = Checkpoint::open(a.model);
  std::optional<Tokenizer> tokenizer;
  if (std::filesystem::exists(std::filesystem::path(a.model) / "tokenizer.json")) tokenizer = Tokenizer::open(a.model);
  if (!a.prompt.empty() && !tokenizer)
    throw std::invalid_argument("--prompt: '" + a.model + "' has no tokenizer.json (give --prompt-ids)");
  const std::vector<std::int32_t> prompt = a.prompt.empty() ? parse_token_ids(a.prompt_ids, "--prompt-ids") : tokenizer->encode(a.prompt);
  if (prompt.empty()) throw std::invalid_argument("--prompt: the text gives no tokens");
  const std::int64_t vocab = checkpoint.embed_tokens().n;
  for (std::int32_t id : prompt)
    if (id >= vocab)
      throw std::invalid_argument("--prompt-ids: token " + std::to_string(id) + " is outside the model's vocabulary [0, " +
                                  std::to_string(vocab) + ")");
  std::optional<Checkpoint> draft_checkpoint;
  if (!a.draft.empty()) draft_checkpoint = Checkpoint::open(a.draft);

  DecodingSetup setup = open_decoding(a.backend, a.threads, checkpoint, family, a.context, draft_checkpoint, a.draft, a.lookup);
  const std::unique_ptr<Backend>& backend = setup.backend;
  Decoder& decoder = *setup.decoder;
  std::unique_ptr<Drafter>& drafter = setup.drafter;
  // The gate: speculative decoding runs only where the exactness probe finds this model's verify
  // forward of --block tokens equal, byte for byte, to as many decode steps on this backend and
  // family (fail-closed); --allow-inexact skips it. Two draws per width (a short and a medium
  // prompt) keep it quick; `exactq probe` runs the long-context draw too.
  bool comparing = a.compare;
  nlohmann::json gate_json;
  if (speculative && !inexact) {
    ExactnessGate gate;
    ProbeOptions probe_options;
    probe_options.draws = 2;
    // An adaptive run verifies at every width up to --block, and the gate checks each of them.
    bool allowed = true;
    for (std::int64_t w = a.adaptive ? kMinBlock : a.block; w <= a.block && allowed; ++w)
      allowed = gate.allows(*backend, checkpoint, a.model, w, family, probe_options);
    gate_json = {{"verdict", allowed ? "equal" : "diverges"}, {"cases", gate.last_report().cases.size()}};
    if (!allowed) {
      const auto& cases = gate.last_report().cases;
      const auto bad = std::find_if(cases.begin(), cases.end(), [](const ProbeCase& c) { return !c.equal; });
      const std::string where = bad == cases.end() ? std::string() : fmt::format(" (first at {} in layer {})", bad->first_op, bad->first_layer);
      if (!a.allow_inexact) {
        fmt::print("declined: the exactness probe found the {}-wide verify forward unequal to {} decode steps{}; "
                   "running classic decode (--allow-inexact runs speculative decoding anyway)\n",
                   gate.last_report().cases.front().block, gate.last_report().cases.front().block, where);
        speculative = false;
        comparing = false;
        gate_json["declined"] = true;
      } else {
        inexact = true;
      }
    }
  }
  GreedyOptions options;
  options.max_tokens = a.max_tokens;
  if (tokenizer && !a.ignore_eos) options.stop_ids = tokenizer->eos_ids();
  options.picker = sampling_picker(a.sampling);

  // The text of one run, streamed; token ids where the model has no tokenizer.
  if (tokenizer) fmt::print("{}", a.prompt.empty() ? tokenizer->decode(prompt) : a.prompt);
  std::fflush(stdout);
  std::optional<Tokenizer::Stream> stream;
  auto printer = [&](bool on) -> std::function<void(std::int32_t)> {
    if (!on) return {};
    if (tokenizer) stream = tokenizer->stream(true);
    return [&](std::int32_t id) {
      if (stream)
        fmt::print("{}", stream->step(id));
      else
        fmt::print("{} ", id);
      std::fflush(stdout);
    };
  };
  auto finish = [&] {
    if (stream) fmt::print("{}", stream->finish());
    stream.reset();
    fmt::print("\n");
  };
  // Where the output is not streamed (the speculative half of --compare), a progress line on
  // stderr: rewritten in place on a terminal, a line per 256 tokens otherwise.
  auto progress = [](std::string what, std::int64_t limit) -> std::function<void(std::int32_t)> {
    const bool tty = isatty(2) != 0;
    return [what = std::move(what), limit, tty, n = std::int64_t(0)](std::int32_t) mutable {
      ++n;
      if (tty)
        fmt::print(stderr, "\r[{}] {} of at most {} tokens", what, n, limit);
      else if (n % 256 == 0)
        fmt::print(stderr, "[{}] {} of at most {} tokens\n", what, n, limit);
      std::fflush(stderr);
    };
  };
  const std::string label = fmt::format("{} {} {}", backend->name(), to_string(family), checkpoint.config().model_type);

  // Classic decode: the output itself, the reference of --comparing, or the replay instrument's source.
  std::optional<GreedyResult> classic;
  if (!speculative || comparing || replay) {
    const bool shown = !speculative || comparing;
    classic = greedy_decode(decoder, prompt, options, printer(shown));
    if (shown) {
      finish();
      fmt::print("[{}{}] {}; stopped: {}\n", label, speculative ? " classic" : "", speed_line(*classic), to_string(classic->stop));
    }
  }
  std::optional<SpeculativeResult> spec;
  if (speculative) {
    // The replay drafter is a benchmark instrument: it replays classic decode's own output with
    // tokens replaced at --replay-rate, so that acceptance is a controlled variable.
    if (replay) drafter = std::make_unique<ReplayDrafter>(classic->tokens, a.replay_rate, a.replay_seed, decoder.vocab_size());
    if (inexact)
      fmt::print("inexact: --allow-inexact runs speculative decoding with --kernels {}, which is not width-invariant; "
                 "its output may differ from classic decode's\n",
                 to_string(family));
    spec = speculative_decode(decoder, *drafter, prompt, options, {a.block, a.allow_inexact, a.adaptive},
                              comparing ? progress("speculative", a.max_tokens) : printer(true));
    if (!comparing) finish();
    else if (isatty(2)) fmt::print(stderr, "\r\033[K");
    fmt::print("[{} speculative: {}, block {}] {}; {} rounds, {:.2f} tokens/round, acceptance {:.3f} ({} of {} drafts); "
               "stopped: {}\n",
               label, drafter->name(), fmt::format("{}{}", a.adaptive ? "up to " : "", a.block), speed_line(*spec), spec->rounds, spec->tokens_per_round(),
               spec->acceptance(), spec->accepted, spec->drafted, to_string(spec->stop));
  }
  nlohmann::json compare;
  bool identical = true;
  if (comparing) {
    const auto& x = classic->tokens;
    const auto& y = spec->tokens;
    identical = x == y && classic->stop == spec->stop;
    const double speedup = decode_rate(*classic) > 0 ? decode_rate(*spec) / decode_rate(*classic) : 0.0;
    compare = {{"identical", identical}, {"classic_tokens_per_second", decode_rate(*classic)},
               {"speculative_tokens_per_second", decode_rate(*spec)}, {"speedup", speedup},
               {"tokens_per_round", spec->tokens_per_round()}, {"acceptance", spec->acceptance()}};
    std::string verdict = "yes";
    if (!identical) {
      std::size_t i = 0;
      while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
      auto at = [&](const std::vector<std::int32_t>& v) { return i < v.size() ? std::to_string(v[i]) : std::string("(end)"); };
      verdict = fmt::format("NO: first difference at output position {}: classic {}, speculative {}", i, at(x), at(y));
      compare["first_difference"] = {{"position", i}, {"classic", at(x)}, {"speculative", at(y)}};
    }
    fmt::print("compare: identical {} ({} tokens); {:.2f} tokens/round; acceptance {:.3f}; classic {:.1f} tok/s, "
               "speculative {:.1f} tok/s, speed-up {:.2f}x\n",
               verdict, y.size(), spec->tokens_per_round(), spec->acceptance(), decode_rate(*classic), decode_rate(*spec),
               speedup);
  }
  const GreedyResult& main_result = spec ? static_cast<const GreedyResult&>(*spec) : *classic;
  if (tokenizer) warn_ids_past_tokenizer(*tokenizer, main_result.tokens, vocab);
  if (!a.json.empty()) {
    const GreedyResult& main = main_result;
    nlohmann::json j = {{"model", a.model},
                        {"model_type", checkpoint.config().model_type},
                        {"backend", backend->name()},
                        {"device", backend->description()},
                        {"kernels", to_string(family)},
                        {"context_length", decoder.context_length()},
                        {"prompt_ids", prompt}};
    j.update(speeds(main));
    if (tokenizer) j["text"] = tokenizer->decode(main.tokens, true);
    if (spec) {
      j["speculative"] = {{"drafter", drafter->name()}, {"block", a.block}, {"adaptive", a.adaptive}, {"rounds", spec->rounds},
                          {"drafted", spec->drafted}, {"accepted", spec->accepted},
                          {"tokens_per_round", spec->tokens_per_round()}, {"acceptance", spec->acceptance()},
                          {"inexact", inexact}};
      if (!a.draft.empty()) j["speculative"]["draft_model"] = a.draft;
    }
    if (!gate_json.is_null()) j["exactness_gate"] = gate_json;
    if (comparing) {
      j["classic"] = speeds(*classic);
      j["compare"] = compare;
    }
    write_json(a.json, j);
  }
  // A width-invariant family that leaves classic's output is a failed check; an inexact run was
  // allowed to differ.
  if (!identical && !inexact) throw std::runtime_error("--compare: speculative output differs from classic decode");
}

}  // namespace

std::vector<std::int32_t> parse_token_ids(const std::string& text, std::string_view option) {
  std::vector<std::int32_t> ids;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.empty()) throw std::invalid_argument(fmt::format("{}: an empty item in '{}'", option, text));
    ids.push_back(std::int32_t(decimal_value(item, option, 0, std::numeric_limits<std::int32_t>::max())));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return ids;
}

void add_generate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("generate", "Greedy text generation from a checkpoint (mlx-community layout)");
  cmd->footer(
      "The text is streamed as it is produced; the last line gives prefill and decode speed.\n"
      "Speculative decoding (--draft DIR or --lookup N) gives classic decode's output byte for byte with the\n"
      "width-invariant families (exact, mma, narrow); --compare runs both and compares the token ids.\n"
      "Exit status: 0 generated (with --compare: the outputs are identical, or --allow-inexact let them differ),\n"
      "1 --compare found a difference, 2 bad arguments or a malformed checkpoint (the message names the value).");
  auto a = std::make_shared<Args>();
  add_text_option(cmd, "--model", a->model, "the model directory")->required();
  add_text_option(cmd, "--prompt", a->prompt, "the prompt text (needs the model's tokenizer.json)");
  add_text_option(cmd, "--prompt-ids", a->prompt_ids, "the prompt as token ids, e.g. 1,2,3");
  add_integer_option(cmd, "--max-tokens", a->max_tokens, "tokens to generate at most (default 128)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 24));
  add_integer_option(cmd, "--context", a->context, "KV cache positions (default: the model's, at most 4096)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 24));
  add_text_option(cmd, "--backend", a->backend, "auto (default: cuda when a GPU is usable), cuda or cpu")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  add_text_option(cmd, "--kernels", a->kernels,
                  "the linears' kernel family: exact (default), mma, narrow, or wide (not width-invariant)")
      ->check(CLI::IsMember({"exact", "mma", "narrow", "wide"}));
  add_integer_option(cmd, "--threads", a->threads, "CPU threads (0: all)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "do not stop at the tokenizer's end-of-sequence tokens");
  add_path_option(cmd, "--json", a->json, "also write the run (ids, text, speeds) as JSON to this file");
  add_text_option(cmd, "--draft", a->draft,
                  "speculative decoding with this draft model (a checkpoint of the target's vocabulary)");
  add_integer_option(cmd, "--lookup", a->lookup,
                     "speculative decoding with prompt lookup: n-grams of up to N tokens matched in the prompt and output")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1024)));
  auto* block = add_integer_option(cmd, "--block", a->block,
                                   "speculative block width: the last token and up to BS - 1 drafts (2..64)")
                    ->check(CLI::Range(kMinBlock, kMaxBlock));
  cmd->add_flag("--adaptive", a->adaptive,
                "adaptive block width up to --block: one draft more after a fully accepted round, back to just past "
                "the accepted drafts otherwise (the output is the same at every width)");
  add_seconds_option(cmd, "--temperature", a->sampling.temperature,
                     "sample at this temperature (default 0: greedy); the token at each position is picked by "
                     "Gumbel-max with noise keyed by (--seed, position), so speculative decoding gives the same text")
      ->check(CLI::Range(0.0, 1e6));
  add_integer_option(cmd, "--top-k", a->sampling.top_k, "with --temperature: sample among the K most likely tokens (0: all)")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 31));
  add_seconds_option(cmd, "--top-p", a->sampling.top_p,
                     "with --temperature: sample among the most likely tokens whose probabilities reach P, in (0, 1]")
      ->check(CLI::Range(1e-9, 1.0));
  add_integer_option(cmd, "--seed", a->sampling.seed, "with --temperature: the seed of the sampling noise (default 0)");
  cmd->add_flag("--compare", a->compare,
                "run classic and speculative decode on the same prompt and compare the output ids byte for byte");
  cmd->add_flag("--allow-inexact", a->allow_inexact,
                "run speculative decoding with a family that is not width-invariant (--kernels wide); the output may differ");
  // The replay drafter is a benchmark instrument, hidden from the help's option list.
  cmd->add_flag("--replay", a->replay,
                "benchmark instrument: draft classic decode's own output (computed first) with tokens replaced at "
                "--replay-rate")
      ->group("");
  auto* replay_rate = add_seconds_option(cmd, "--replay-rate", a->replay_rate,
                                        "benchmark instrument, not a drafter for real use: replay classic decode's own "
                                        "output (computed first) with this fraction of its tokens replaced, 0..1")
                          ->check(CLI::Range(0.0, 1.0));
  add_integer_option(cmd, "--replay-seed", a->replay_seed, "benchmark instrument: the seed of the replaced tokens")->group("");
  cmd->callback([a, replay_rate, block, &exit_code] {
    a->replay_rate_given = replay_rate->count() > 0;
    const bool speculative = !a->draft.empty() || a->lookup > 0 || a->replay || a->replay_rate_given;
    if (block->count() > 0 && !speculative)
      throw std::invalid_argument("--block: only speculative decoding has a block width (add --draft DIR or --lookup N)");
    if (a->adaptive && !speculative)
      throw std::invalid_argument("--adaptive: only speculative decoding has a block width (add --draft DIR or --lookup N)");
    run(*a);
    exit_code = 0;
  });
}

}  // namespace exactq::cli
