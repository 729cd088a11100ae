// Helpers for the checkpoint layer: error messages that print names and values from a file
// escaped (a hostile file may hold any bytes), and a JSON parse stricter than nlohmann's.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "exactq/safetensors.h"

namespace exactq {

// `text` with bytes outside printable ASCII written as \xNN, cut to `limit` characters.
std::string printable(std::string_view text, std::size_t limit = 120);

// Throws CheckpointError("<file>: <what>").
[[noreturn]] void checkpoint_fail(const std::string& file, const std::string& what);

// Why parse_json_strict refused its input, in words (escaped, position included).
class JsonRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses JSON text, refusing (JsonRefused) what nlohmann would accept silently or what no
// checkpoint file needs: malformed JSON or invalid UTF-8, a key repeated within one object
// (nlohmann would keep the last), and nesting deeper than `max_depth`.
nlohmann::json parse_json_strict(std::string_view text, int max_depth);

}  // namespace exactq
