// `exactq bench-spec`: classic and speculative decode, every arm in one run, their speed and
// whether each output equals classic decode's byte for byte.
#pragma once

#include <CLI/CLI.hpp>

namespace exactq::cli {

void add_bench_spec_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
