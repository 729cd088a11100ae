// MLX's quantization entry of config.json: `quantization` and its twin `quantization_config`.
#include <fmt/format.h>

#include "model/config_parts.h"
#include "model/json_fields.h"

namespace exactq {

const QuantSpec* QuantizationConfig::override_for(std::string_view path) const {
  const auto it = modules.find(std::string(path));
  return it == modules.end() ? nullptr : &it->second;
}

namespace {

void check_spec(const Fields& f, const std::string& key, const QuantSpec& s) {
  if (!is_supported_bits(s.bits))
    f.fail(key.c_str(), fmt::format("bits {} is not served by the kernels (2, 3, 4, 5, 6 or 8)", s.bits));
  if (!is_supported_group(s.group))
    f.fail(key.c_str(), fmt::format("group_size {} is not served by the kernels (32, 64 or 128)", s.group));
}

void check_mode(const Fields& f, const nlohmann::json& entry, const std::string& key) {
  const auto mode = entry.find("mode");
  if (mode == entry.end() || mode->is_null()) return;
  if (!mode->is_string() || mode->get<std::string>() != "affine")
    f.fail(key.c_str(), fmt::format("mode {} is not supported (only affine)", printable(mode->dump())));
}

// One entry ({"group_size", "bits"[, "mode"]} or false); `base` fills what an override omits.
QuantSpec parse_entry(const Fields& f, const std::string& key, const nlohmann::json& entry, const QuantSpec* base) {
  if (entry.is_boolean() && !entry.get<bool>()) return QuantSpec{};
  if (!entry.is_object()) f.fail(key.c_str(), fmt::format("{} is neither an object nor false", printable(entry.dump())));
  const Fields e(entry, f.file(), f.where() + key + ".");
  check_mode(f, entry, key);
  QuantSpec s;
  s.quantized = true;
  s.bits = int(base ? e.integer("bits", 0, 64, base->bits) : e.integer("bits", 0, 64));
  s.group = int(base ? e.integer("group_size", 0, 1 << 20, base->group) : e.integer("group_size", 0, 1 << 20));
  check_spec(f, key, s);
  return s;
}

QuantizationConfig parse_one(const Fields& root, const char* name, const nlohmann::json& q) {
  if (!q.is_object()) root.fail(name, fmt::format("{} is not an object", printable(q.dump(), 60)));
  const Fields f(q, root.file(), std::string(name) + ".");
  if (const auto method = f.optional_string("quant_method"))
    root.fail(name, fmt::format("quant_method '{}' is not MLX's affine quantization", printable(*method)));
  QuantizationConfig c;
  // The base entry: the object's own group_size/bits/mode.
  c.base = parse_entry(root, name, q, nullptr);
  for (const auto& [key, value] : q.items()) {
    if (key == "group_size" || key == "bits" || key == "mode") continue;
    c.modules[key] = parse_entry(f, key, value, &*c.base);
  }
  return c;
}

bool same(const QuantizationConfig& a, const QuantizationConfig& b) { return a.base == b.base && a.modules == b.modules; }

}  // namespace

QuantizationConfig parse_quantization(const Fields& root) {
  const nlohmann::json* q = root.get("quantization");
  const nlohmann::json* twin = root.get("quantization_config");
  if (q == nullptr && twin == nullptr) return {};
  if (q == nullptr) return parse_one(root, "quantization_config", *twin);
  QuantizationConfig c = parse_one(root, "quantization", *q);
  if (twin != nullptr && !same(c, parse_one(root, "quantization_config", *twin)))
    root.fail("quantization_config", "disagrees with quantization (MLX writes them as twins)");
  return c;
}

}  // namespace exactq
