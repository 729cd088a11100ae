// The first part of `exactq demo`: the trained pair shipped under models/ (a code model and its
// draft model, one tokenizer) completes a few code prompts with classic greedy decode and with
// speculative decode drafted by the small model; it prints each completion, whether the two are
// byte-identical, the acceptance rate, the tokens per round and the speed-up.
#include <filesystem>

#include <fmt/format.h>

#include "demo.h"
#include "exactq/speculative.h"
#include "exactq/tokenizer.h"

namespace exactq::cli {

namespace {

// Each prompt ends at the end of a line, before its newline: the tokenizer joins a newline with the
// indentation that follows it, so a prompt ending at the newline would end inside such a token.
const char* const kPrompts[] = {
    "def _read_file(path):\n    \"\"\"Return the contents of the file at path.\"\"\"",
    "import os\nimport sys\n\n\ndef main():",
    "    def __eq__(self, other):",
};

double rate(const GreedyResult& r) {
  return r.decode_seconds > 0 ? double(r.tokens.size() - 1) / r.decode_seconds : 0.0;
}

}  // namespace

int run_pair_demo(Backend& backend, const std::string& models_dir, std::vector<std::string>& summaries) {
  namespace fs = std::filesystem;
  const fs::path target_dir = fs::path(models_dir) / kPairTarget, draft_dir = fs::path(models_dir) / kPairDraft;
  if (!fs::exists(target_dir / "config.json") || !fs::exists(draft_dir / "config.json")) {
    const std::string line = fmt::format("trained pair: not found under {} (skipped)", models_dir);
    fmt::print("{}\n\n", line);
    summaries.push_back(line);
    return 0;
  }
  const Checkpoint target_checkpoint = Checkpoint::open(target_dir.string());
  const Checkpoint draft_checkpoint = Checkpoint::open(draft_dir.string());
  const Tokenizer tokenizer = Tokenizer::open(target_dir.string());
  fmt::print("== the trained pair: {} drafted by {} ({}) ==\n", kPairTarget, kPairDraft, backend.name());
  GreedyOptions options;
  options.max_tokens = kPairDemoTokens;
  options.stop_ids = tokenizer.eos_ids();
  int worst = 0;
  std::int64_t drafted = 0, accepted = 0, rounds = 0;
  double classic_seconds = 0, speculative_seconds = 0;
  std::int64_t classic_tokens = 0, speculative_tokens = 0;
  bool all_identical = true;
  for (const char* prompt_text : kPrompts) {
    const std::vector<std::int32_t> prompt = tokenizer.encode(prompt_text);
    Decoder target(backend, target_checkpoint, {KernelFamily::exact, 1024});
    Decoder draft(backend, draft_checkpoint, {KernelFamily::exact, 1024});
    const GreedyResult classic = greedy_decode(target, prompt, options);
    DraftModelDrafter drafter(draft, target);
    const SpeculativeResult s = speculative_decode(target, drafter, prompt, options, {kPairDemoBlock, false});
    const bool identical = s.tokens == classic.tokens && s.stop == classic.stop;
    all_identical = all_identical && identical;
    fmt::print("--- prompt and completion ({} tokens) ---\n{}{}\n", classic.tokens.size(), prompt_text,
               tokenizer.decode(classic.tokens, true));
    fmt::print("--- classic {:.1f} tok/s; speculative {:.1f} tok/s (block {}), acceptance {:.3f}, {:.2f} tokens/round; "
               "byte-identical: {}\n\n",
               rate(classic), rate(s), kPairDemoBlock, s.acceptance(), s.tokens_per_round(), identical ? "yes" : "NO");
    std::fflush(stdout);
    drafted += s.drafted;
    accepted += s.accepted;
    rounds += s.rounds;
    classic_seconds += classic.decode_seconds;
    speculative_seconds += s.decode_seconds;
    classic_tokens += std::int64_t(classic.tokens.size()) - 1;
    speculative_tokens += std::int64_t(s.tokens.size()) - 1;
    if (!identical) worst = 1;
  }
  const double classic_rate = classic_seconds > 0 ? double(classic_tokens) / classic_seconds : 0.0;
  const double speculative_rate = speculative_seconds > 0 ? double(speculative_tokens) / speculative_seconds : 0.0;
  const std::string line = fmt::format(
      "{} trained pair, {} prompts: speculative output byte-identical to classic: {}; acceptance {:.3f}, "
      "{:.2f} tokens/round; classic {:.1f} tok/s, speculative {:.1f} tok/s, speed-up {:.2f}x",
      backend.name(), std::size(kPrompts), all_identical ? "yes" : "NO",
      drafted > 0 ? double(accepted) / double(drafted) : 0.0, rounds > 0 ? double(speculative_tokens) / double(rounds) : 0.0,
      classic_rate, speculative_rate, classic_rate > 0 ? speculative_rate / classic_rate : 0.0);
  fmt::print("{}\n\n", line);
  summaries.push_back(line);
  return worst;
}

}  // namespace exactq::cli
