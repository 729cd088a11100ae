// `exactq generate`: greedy text generation from a checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace exactq::cli {

// "1,2,3": token ids in base 10, repeats allowed; std::invalid_argument naming `option` otherwise.
std::vector<std::int32_t> parse_token_ids(const std::string& text, std::string_view option);

void add_generate_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
