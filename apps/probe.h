// `exactq probe`: the exactness probe on a checkpoint.
#pragma once

#include <CLI/CLI.hpp>

namespace exactq::cli {

void add_probe_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
