// `exactq tokenize`: a model's tokenizer on its own, text to ids and ids to text.
#pragma once

#include <CLI/CLI.hpp>

namespace exactq::cli {

void add_tokenize_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
