#include "model/text.h"

#include <set>
#include <vector>

#include <fmt/format.h>

namespace exactq {

std::string printable(std::string_view text, std::size_t limit) {
  std::string out;
  for (unsigned char c : text) {
    if (out.size() >= limit) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\\') out += char(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

void checkpoint_fail(const std::string& file, const std::string& what) {
  throw CheckpointError(fmt::format("{}: {}", file, what));
}

namespace {
struct DepthExceeded {};
struct DuplicateKey {
  std::string key;
};
}  // namespace

nlohmann::json parse_json_strict(std::string_view text, int max_depth) {
  using nlohmann::json;
  // Keys seen so far in each open object, by depth (the callback reports an object's keys one
  // level below the object itself).
  std::vector<std::set<std::string>> keys;
  const json::parser_callback_t callback = [&keys, max_depth](int depth, json::parse_event_t event, json& value) {
    if (depth > max_depth) throw DepthExceeded{};
    if (event == json::parse_event_t::object_start) {
      keys.resize(std::size_t(depth) + 1);
      keys[std::size_t(depth)].clear();
    } else if (event == json::parse_event_t::key && depth >= 1) {
      const std::string& key = value.get_ref<const std::string&>();
      if (!keys[std::size_t(depth) - 1].insert(key).second) throw DuplicateKey{key};
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    throw JsonRefused(fmt::format("malformed JSON or not UTF-8: {}", printable(e.what(), 240)));
  } catch (const DepthExceeded&) {
    throw JsonRefused(fmt::format("JSON nests deeper than {} levels", max_depth));
  } catch (const DuplicateKey& d) {
    throw JsonRefused(fmt::format("key '{}' appears twice in one object", printable(d.key)));
  }
}

}  // namespace exactq
