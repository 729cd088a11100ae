// `exactq make-model`, `exactq convert` and `exactq inspect`: checkpoints in the mlx-community
// layout (written, converted, described).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace exactq::cli {

// An integer option of these commands, given as text: base 10 only (an optional sign and
// digits; CLI11 alone would read 010 as octal and 0x20 as hex) and within [lo, hi]. Throws
// std::invalid_argument naming the option and the text.
std::int64_t decimal_value(const std::string& text, std::string_view option, std::int64_t lo, std::int64_t hi);

void add_make_model_command(CLI::App& app, int& exit_code);
void add_convert_command(CLI::App& app, int& exit_code);
void add_inspect_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
