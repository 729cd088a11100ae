// Typed, range-checked reads of config.json fields; every refusal names the file, the field
// (with its enclosing object, e.g. text_config.hidden_size) and the value.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/text.h"

namespace exactq {

class Fields {
 public:
  // `where` prefixes field names in messages ("" or "text_config.").
  Fields(const nlohmann::json& object, std::string file, std::string where)
      : j_(object), file_(std::move(file)), where_(std::move(where)) {}

  bool has(const char* key) const {
    const auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  const nlohmann::json* get(const char* key) const {
    const auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  [[noreturn]] void fail(const char* key, const std::string& what) const {
    checkpoint_fail(file_, fmt::format("{}{}: {}", where_, key, what));
  }

  std::optional<std::int64_t> optional_int(const char* key, std::int64_t lo, std::int64_t hi) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer()) fail(key, fmt::format("{} is not an integer", printable(v->dump())));
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t(INT64_MAX))
      fail(key, fmt::format("{} is out of range [{}, {}]", v->get<std::uint64_t>(), lo, hi));
    const std::int64_t x = v->get<std::int64_t>();
    if (x < lo || x > hi) fail(key, fmt::format("{} is out of range [{}, {}]", x, lo, hi));
    return x;
  }
  std::int64_t integer(const char* key, std::int64_t lo, std::int64_t hi) const {
    const auto v = optional_int(key, lo, hi);
    if (!v) fail(key, "is missing");
    return *v;
  }
  std::int64_t integer(const char* key, std::int64_t lo, std::int64_t hi, std::int64_t fallback) const {
    return optional_int(key, lo, hi).value_or(fallback);
  }

  // A finite number in (lo, hi] (lo exclusive: every real use is a positive quantity).
  std::optional<double> optional_real(const char* key, double lo, double hi) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) fail(key, fmt::format("{} is not a number", printable(v->dump())));
    const double x = v->get<double>();
    if (!std::isfinite(x) || !(x > lo) || !(x <= hi)) fail(key, fmt::format("{} is out of range ({}, {}]", x, lo, hi));
    return x;
  }
  double real(const char* key, double lo, double hi) const {
    const auto v = optional_real(key, lo, hi);
    if (!v) fail(key, "is missing");
    return *v;
  }
  double real(const char* key, double lo, double hi, double fallback) const {
    return optional_real(key, lo, hi).value_or(fallback);
  }

  std::optional<bool> optional_bool(const char* key) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) fail(key, fmt::format("{} is not true or false", printable(v->dump())));
    return v->get<bool>();
  }
  bool boolean(const char* key, bool fallback) const { return optional_bool(key).value_or(fallback); }

  std::optional<std::string> optional_string(const char* key) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) fail(key, fmt::format("{} is not a string", printable(v->dump())));
    return v->get<std::string>();
  }

  const std::string& file() const { return file_; }
  const std::string& where() const { return where_; }
  const nlohmann::json& json() const { return j_; }

 private:
  const nlohmann::json& j_;
  std::string file_;
  std::string where_;
};

}  // namespace exactq
