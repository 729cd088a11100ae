// `exactq serve`: an OpenAI-compatible HTTP server over one model.
#pragma once

#include <CLI/CLI.hpp>

namespace exactq::cli {

void add_serve_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
