// The decoder: parsed from tokenizer.json and applied to each token as the tokenizers library
// defines each step; the joining of the pieces (byte-fallback runs, UTF-8) is Tokenizer::Stream's.
#include <fmt/format.h>

#include "model/text.h"
#include "model/tokenizer_parts.h"

namespace exactq::tok {

Decoder parse_decoder(const json* j, const Where& w) {
  Decoder d;
  if (j == nullptr) {
    d.join_with_spaces = true;
    return d;
  }
  bool fused = false, byte_fallback = false;
  for (const auto& [step, ws] : steps_of(*j, w, "decoders")) {
    const std::string type = ws.string(*step, "type");
    DecStep s{};
    if (type == "Fuse") {
      fused = true;
      continue;
    }
    if (type == "Strip") {
      s.kind = DecStep::Kind::strip;
      s.content = ws.string(*step, "content");
      s.start = int(ws.integer(*step, "start", 0, 1 << 20));
      s.stop = int(ws.integer(*step, "stop", 0, 1 << 20));
      std::size_t i = 0;
      if (s.content.empty() || utf8_invalid_at(s.content) || (utf8_next(s.content, i), i != s.content.size()))
        (ws / "content").fail(fmt::format("'{}' is not one character", printable(s.content)));
      if (fused) {
        // Once the tokens are one text, the end of the text is known only when decoding ends:
        // the streaming decoder could not hold back what a stop would remove.
        if (s.stop != 0) (ws / "stop").fail("Strip with stop > 0 after Fuse is not supported");
        if (d.strip_start > 0) ws.fail("two Strip steps after Fuse are not supported");
        d.strip_content = s.content;
        d.strip_start = s.start;
        continue;
      }
    } else if (fused) {
      (ws / "type").fail(fmt::format("decoder '{}' after Fuse is not supported (Strip)", printable(type)));
    } else if (type == "Replace") {
      s.kind = DecStep::Kind::replace;
      auto [pattern, literal] = pattern_of(*step, ws);
      if (!literal || pattern.empty()) (ws / "pattern").fail("only a non-empty String pattern is supported");
      s.pattern = pattern;
      s.content = ws.string(*step, "content");
    } else if (type == "ByteFallback") {
      s.kind = DecStep::Kind::byte_fallback;
    } else if (type == "ByteLevel") {
      s.kind = DecStep::Kind::byte_level;
    } else if (type == "Metaspace") {
      s.kind = DecStep::Kind::metaspace;
      s.content = ws.string(*step, "replacement");
      const auto scheme = ws.opt_string(*step, "prepend_scheme");
      s.strip_first = scheme ? *scheme != "never" : ws.boolean(*step, "add_prefix_space", true);
    } else {
      (ws / "type").fail(fmt::format(
          "decoder '{}' is not supported (Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace)", printable(type)));
    }
    // ByteFallback joins runs of byte tokens: a step after it would see the joined text.
    if (byte_fallback)
      (ws / "type").fail(fmt::format("decoder '{}' after ByteFallback is not supported (Fuse, Strip after Fuse)", printable(type)));
    byte_fallback = byte_fallback || s.kind == DecStep::Kind::byte_fallback;
    d.per_token.push_back(std::move(s));
  }
  return d;
}

namespace {

// Up to `start` leading and `stop` trailing copies of the one character `c` removed from t.
void strip_chars(std::string& t, const std::string& c, int start, int stop) {
  std::size_t begin = 0, end = t.size();
  for (int k = 0; k < start && t.compare(begin, c.size(), c) == 0; ++k) begin += c.size();
  for (int k = 0; k < stop && end >= begin + c.size() && t.compare(end - c.size(), c.size(), c) == 0; ++k) end -= c.size();
  t = t.substr(begin, end - begin);
}

}  // namespace

DecodedPiece Decoder::piece(std::string_view token, bool first) const {
  if (join_with_spaces) {
    std::string t(first ? "" : " ");
    t.append(token);
    return {t};
  }
  std::string t(token);
  for (const DecStep& s : per_token) {
    switch (s.kind) {
      case DecStep::Kind::replace: t = replace_all(t, s.pattern, s.content); break;
      case DecStep::Kind::byte_fallback: {
        const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
        if (t.size() == 6 && t.starts_with("<0x") && t[5] == '>' && hex(t[3]) && hex(t[4]))
          return {std::string(1, char(std::stoi(t.substr(3, 2), nullptr, 16))), true};
        break;
      }
      case DecStep::Kind::byte_level: {
        // Every character mapped back to its byte; a token with a character outside the map
        // (an added token's text, say) keeps its own bytes.
        std::string bytes;
        bool all = utf8_invalid_at(t) == std::nullopt;
        for (std::size_t i = 0; all && i < t.size();) {
          const int b = char_to_byte(utf8_next(t, i));
          if (b < 0) all = false;
          else bytes += char(b);
        }
        if (all) t = std::move(bytes);
        break;
      }
      case DecStep::Kind::strip: strip_chars(t, s.content, s.start, s.stop); break;
      case DecStep::Kind::metaspace:
        // As tokenizers does: in the first token every replacement character goes, not only a
        // leading one.
        t = replace_all(t, s.content, first && s.strip_first ? "" : " ");
        break;
    }
  }
  return {t};
}

}  // namespace exactq::tok
