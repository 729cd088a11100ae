// `exactq generate`: greedy text generation from a checkpoint.
#pragma once

#include <CLI/CLI.hpp>

namespace exactq::cli {

void add_generate_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
