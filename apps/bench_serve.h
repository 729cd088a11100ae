// `exactq bench-serve`: concurrent clients against a running `exactq serve`, with the identity check.
#pragma once

#include <CLI/CLI.hpp>

namespace exactq::cli {

void add_bench_serve_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
