// UTF-8, ByteLevel's byte map, and the typed reads of tokenizer.json's fields.
#include <fmt/format.h>

#include "model/text.h"
#include "model/tokenizer_parts.h"

namespace exactq::tok {

// ---- Where -----------------------------------------------------------------------------------

void Where::fail(const std::string& what) const { checkpoint_fail(*file, path.empty() ? what : path + ": " + what); }

Where Where::operator/(std::string_view key) const {
  return Where{file, path.empty() ? std::string(key) : path + "." + std::string(key)};
}
Where Where::operator[](std::size_t i) const { return Where{file, fmt::format("{}[{}]", path, i)}; }

const json* Where::get(const json& object, const char* key) const {
  if (!object.is_object()) fail(fmt::format("{} is not an object", printable(object.dump())));
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::optional<std::string> Where::opt_string(const json& object, const char* key) const {
  const json* v = get(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) (*this / key).fail(fmt::format("{} is not a string", printable(v->dump())));
  return v->get<std::string>();
}

std::string Where::string(const json& object, const char* key) const {
  auto s = opt_string(object, key);
  if (!s) (*this / key).fail("is missing");
  return *s;
}

bool Where::boolean(const json& object, const char* key, bool fallback) const {
  const json* v = get(object, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) (*this / key).fail(fmt::format("{} is not true or false", printable(v->dump())));
  return v->get<bool>();
}

std::int64_t Where::integer(const json& object, const char* key, std::int64_t lo, std::int64_t hi) const {
  const json* v = get(object, key);
  if (v == nullptr) (*this / key).fail("is missing");
  if (!v->is_number_integer()) (*this / key).fail(fmt::format("{} is not an integer", printable(v->dump())));
  const bool big = v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t(INT64_MAX);
  const std::int64_t x = big ? INT64_MAX : v->get<std::int64_t>();
  if (x < lo || x > hi) (*this / key).fail(fmt::format("{} is out of range [{}, {}]", printable(v->dump()), lo, hi));
  return x;
}

std::int32_t Where::id(const json& value) const {
  if (!value.is_number_integer()) fail(fmt::format("token id {} is not an integer", printable(value.dump())));
  const bool big = value.is_number_unsigned() && value.get<std::uint64_t>() >= std::uint64_t(kMaxId);
  if (big || value.get<std::int64_t>() < 0 || value.get<std::int64_t>() >= kMaxId)
    fail(fmt::format("token id {} is out of range [0, {})", printable(value.dump()), kMaxId));
  return std::int32_t(value.get<std::int64_t>());
}

// ---- UTF-8 -----------------------------------------------------------------------------------

namespace {

// The length of the valid sequence at s[i], or 0 where s[i] starts none. `complete` tells
// whether the sequence was cut short by the end of s (then the return is 0 and *prefix is set).
std::size_t valid_sequence(std::string_view s, std::size_t i, bool* prefix) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (prefix) *prefix = false;
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) {
      if (prefix) *prefix = true;
      return 0;
    }
    const unsigned char x = b(i + k);
    if (x < (k == 1 ? lo : 0x80) || x > (k == 1 ? hi : 0xbf)) return 0;
  }
  return n;
}

}  // namespace

std::optional<std::size_t> utf8_invalid_at(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = valid_sequence(s, i, nullptr);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

char32_t utf8_next(std::string_view s, std::size_t& i) {
  const auto b = [&](std::size_t k) { return char32_t(static_cast<unsigned char>(s[k])); };
  const char32_t c = b(i);
  if (c < 0x80) return ++i, c;
  if (c < 0xe0) return i += 2, ((c & 0x1f) << 6) | (b(i - 1) & 0x3f);
  if (c < 0xf0) return i += 3, ((c & 0x0f) << 12) | ((b(i - 2) & 0x3f) << 6) | (b(i - 1) & 0x3f);
  i += 4;
  return ((c & 0x07) << 18) | ((b(i - 3) & 0x3f) << 12) | ((b(i - 2) & 0x3f) << 6) | (b(i - 1) & 0x3f);
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) out += char(cp);
  else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const std::size_t n = valid_sequence(bytes, i, nullptr);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    }
    // A maximal subpart: the longest prefix of a valid sequence starting here (at least 1 byte).
    std::size_t len = 1;
    for (std::size_t k = 1; k <= 3 && i + k <= bytes.size(); ++k) {
      bool prefix = false;
      if (valid_sequence(bytes.substr(0, i + k), i, &prefix) == 0 && prefix) len = k;
      else break;
    }
    out += "\xef\xbf\xbd";
    i += len;
  }
  return out;
}

std::size_t utf8_incomplete_tail(std::string_view bytes) {
  for (std::size_t k = 1; k <= 3 && k <= bytes.size(); ++k) {
    bool prefix = false;
    if (valid_sequence(bytes, bytes.size() - k, &prefix) == 0 && prefix) return k;
  }
  return 0;
}

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// ---- ByteLevel -------------------------------------------------------------------------------

const std::array<char32_t, 256>& byte_to_char() {
  static const std::array<char32_t, 256> map = [] {
    std::array<char32_t, 256> m{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      m[std::size_t(b)] = printable ? char32_t(b) : next++;
    }
    return m;
  }();
  return map;
}

int char_to_byte(char32_t cp) {
  static const std::array<std::int16_t, 324> inverse = [] {
    std::array<std::int16_t, 324> inv;
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[byte_to_char()[std::size_t(b)]] = std::int16_t(b);
    return inv;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

std::string byte_level_map(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_to_char()[b]);
  return out;
}

}  // namespace exactq::tok
