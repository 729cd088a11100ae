// `exactq demo`: the main job (the README's first command).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "exactq/backend.h"

namespace exactq::cli {

void add_demo_command(CLI::App& app, int& exit_code);

// The end-to-end part: a made checkpoint, the probe, classic against speculative decode compared
// byte for byte. Appends one summary line per comparison; returns 1 where an output differs.
int run_engine_demo(Backend& backend, int threads, std::vector<std::string>& summaries);

}  // namespace exactq::cli
