// `exactq demo`: the main job (the README's first command).
#pragma once

#include <CLI/CLI.hpp>

namespace exactq::cli {

void add_demo_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
