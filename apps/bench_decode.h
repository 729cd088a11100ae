// `exactq bench-decode`: classic greedy decode speed against the same-run read ceiling.
#pragma once

#include <CLI/CLI.hpp>

namespace exactq::cli {

void add_bench_decode_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
