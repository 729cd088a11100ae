// `exactq demo`: the main job (the README's first command).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "exactq/backend.h"

namespace exactq::cli {

void add_demo_command(CLI::App& app, int& exit_code);

// The end-to-end part: a made checkpoint, the probe, classic against speculative decode compared
// byte for byte. Appends one summary line per comparison; returns 1 where an output differs.
int run_engine_demo(Backend& backend, int threads, std::vector<std::string>& summaries);

// The trained pair under models_dir (models/ in the repository): classic against speculative decode
// drafted by the small model on a few code prompts, the completions printed. Appends a summary
// line; returns 1 where an output differs. Says so and returns 0 where the pair is not there.
inline constexpr const char* kPairTarget = "pycode-target";
inline constexpr const char* kPairDraft = "pycode-draft";
inline constexpr std::int64_t kPairDemoTokens = 96;
inline constexpr std::int64_t kPairDemoBlock = 4;
int run_pair_demo(Backend& backend, const std::string& models_dir, std::vector<std::string>& summaries);

}  // namespace exactq::cli
