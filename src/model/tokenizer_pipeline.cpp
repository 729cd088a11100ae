// The normalizer, the pre-tokenizer and the decoder: parsed from tokenizer.json and applied as
// the tokenizers library defines each step.
#include <fmt/format.h>

#include "model/text.h"
#include "model/tokenizer_parts.h"

namespace exactq::tok {

namespace {

// GPT-2's split, which ByteLevel applies with use_regex.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kMetaspace = "\xe2\x96\x81";  // U+2581, SentencePiece's space

// The members of a Sequence, or the one step itself.
std::vector<std::pair<const json*, Where>> steps_of(const json& j, const Where& w, const char* list_key) {
  std::vector<std::pair<const json*, Where>> out;
  if (w.string(j, "type") != "Sequence") return {{&j, w}};
  const json* list = w.get(j, list_key);
  if (list == nullptr || !list->is_array()) (w / list_key).fail("is missing or not a list");
  for (std::size_t i = 0; i < list->size(); ++i) {
    const Where wi = (w / list_key)[i];
    if (!(*list)[i].is_object()) wi.fail("is not an object");
    if (wi.string((*list)[i], "type") == "Sequence") wi.fail("a Sequence inside a Sequence is not supported");
    out.emplace_back(&(*list)[i], wi);
  }
  return out;
}

// A Replace or Split pattern: {"String": s} or {"Regex": r}.
std::pair<std::string, bool> pattern_of(const json& j, const Where& w) {
  const json* p = w.get(j, "pattern");
  const Where wp = w / "pattern";
  if (p == nullptr || !p->is_object() || p->size() != 1) wp.fail("is not {\"String\": ...} or {\"Regex\": ...}");
  if (auto s = wp.opt_string(*p, "String")) return {*s, true};
  if (auto r = wp.opt_string(*p, "Regex")) return {*r, false};
  wp.fail(fmt::format("{} is not {{\"String\": ...}} or {{\"Regex\": ...}}", printable(p->dump())));
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t at = 0;
  for (std::size_t hit; (hit = s.find(from, at)) != std::string_view::npos; at = hit + from.size()) {
    out.append(s.substr(at, hit - at));
    out.append(to);
  }
  out.append(s.substr(at));
  return out;
}

}  // namespace

// ---- normalizer ------------------------------------------------------------------------------

Normalizer parse_normalizer(const json* j, const Where& w) {
  Normalizer n;
  if (j == nullptr) return n;
  for (const auto& [step, ws] : steps_of(*j, w, "normalizers")) {
    const std::string type = ws.string(*step, "type");
    if (type == "Prepend") n.steps.push_back({NormStep::Kind::prepend, ws.string(*step, "prepend"), "", nullptr});
    else if (type == "NFC") n.steps.push_back({NormStep::Kind::nfc, "", "", nullptr});
    else if (type == "Replace") {
      auto [pattern, literal] = pattern_of(*step, ws);
      NormStep s{NormStep::Kind::replace, pattern, ws.string(*step, "content"), nullptr};
      if (literal && pattern.empty()) (ws / "pattern").fail("the String pattern is empty");
      if (!literal) s.regex = std::make_shared<Regex>(pattern, false, ws / "pattern");
      n.steps.push_back(std::move(s));
    } else (ws / "type").fail(fmt::format("normalizer '{}' is not supported (Sequence, Prepend, Replace, NFC)", printable(type)));
  }
  return n;
}

std::string Normalizer::apply(std::string s) const {
  for (const NormStep& step : steps) {
    if (s.empty()) break;  // every step maps empty to empty (Prepend adds nothing to an empty text)
    switch (step.kind) {
      case NormStep::Kind::prepend: s = step.text + s; break;
      case NormStep::Kind::nfc: s = nfc(s); break;
      case NormStep::Kind::replace:
        if (!step.regex) s = replace_all(s, step.text, step.content);
        else {
          std::string out;
          std::size_t at = 0;
          for (const auto& [b, e] : step.regex->find_all(s)) {
            out.append(s, at, b - at);
            out += step.content;
            at = e;
          }
          s = out + s.substr(at);
        }
        break;
    }
  }
  return s;
}

// ---- pre-tokenizer ---------------------------------------------------------------------------

PreTokenizer parse_pre_tokenizer(const json* j, const Where& w) {
  PreTokenizer p;
  if (j == nullptr) return p;
  for (const auto& [step, ws] : steps_of(*j, w, "pretokenizers")) {
    const std::string type = ws.string(*step, "type");
    PreStep s{};
    if (type == "Split") {
      s.kind = PreStep::Kind::split;
      auto [pattern, literal] = pattern_of(*step, ws);
      const std::string behavior = ws.string(*step, "behavior");
      if (behavior != "Isolated")
        (ws / "behavior").fail(fmt::format("Split behavior '{}' is not supported (Isolated)", printable(behavior)));
      if (ws.boolean(*step, "invert", false)) (ws / "invert").fail("Split with invert true is not supported");
      s.regex = std::make_shared<Regex>(pattern, literal, ws / "pattern");
    } else if (type == "ByteLevel") {
      s.kind = PreStep::Kind::byte_level;
      s.add_prefix_space = ws.boolean(*step, "add_prefix_space", true);
      if (ws.boolean(*step, "use_regex", true)) s.regex = std::make_shared<Regex>(kGpt2Pattern, false, ws);
    } else if (type == "Metaspace") {
      s.kind = PreStep::Kind::metaspace;
      s.replacement = ws.string(*step, "replacement");
      std::size_t i = 0;
      if (s.replacement.empty() || utf8_invalid_at(s.replacement) || (utf8_next(s.replacement, i), i != s.replacement.size()))
        (ws / "replacement").fail(fmt::format("'{}' is not one character", printable(s.replacement)));
      if (auto scheme = ws.opt_string(*step, "prepend_scheme")) {
        if (*scheme == "always") s.prepend = PreStep::Prepend::always;
        else if (*scheme == "first") s.prepend = PreStep::Prepend::first;
        else if (*scheme == "never") s.prepend = PreStep::Prepend::never;
        else (ws / "prepend_scheme").fail(fmt::format("'{}' is not always, first or never", printable(*scheme)));
      } else {
        s.prepend = ws.boolean(*step, "add_prefix_space", true) ? PreStep::Prepend::always : PreStep::Prepend::never;
      }
      s.split = ws.boolean(*step, "split", true);
    } else {
      (ws / "type").fail(fmt::format("pre-tokenizer '{}' is not supported (Sequence, Split, ByteLevel, Metaspace)", printable(type)));
    }
    p.steps.push_back(std::move(s));
  }
  return p;
}

void PreTokenizer::apply(Piece piece, std::vector<Piece>& out) const {
  std::vector<Piece> pieces{std::move(piece)}, next;
  // Each match of a regex becomes a piece, and so does each stretch between matches (Isolated).
  const auto split_isolated = [&next](const Regex& re, Piece& p) {
    std::size_t at = 0;
    for (const auto& [b, e] : re.find_all(p.text)) {
      if (b > at) next.push_back({p.text.substr(at, b - at), p.at_start && at == 0});
      next.push_back({p.text.substr(b, e - b), p.at_start && b == 0});
      at = e;
    }
    if (at < p.text.size()) next.push_back({p.text.substr(at), p.at_start && at == 0});
  };
  for (const PreStep& step : steps) {
    next.clear();
    for (Piece& p : pieces) {
      switch (step.kind) {
        case PreStep::Kind::split: split_isolated(*step.regex, p); break;
        case PreStep::Kind::byte_level: {
          if (step.add_prefix_space && !p.text.starts_with(' ')) p.text.insert(0, 1, ' ');
          const std::size_t first = next.size();
          if (step.regex) split_isolated(*step.regex, p);
          else next.push_back(std::move(p));
          for (std::size_t i = first; i < next.size(); ++i) next[i].text = byte_level_map(next[i].text);
          break;
        }
        case PreStep::Kind::metaspace: {
          std::string t = replace_all(p.text, " ", step.replacement);
          const bool prepend = step.prepend == PreStep::Prepend::always || (step.prepend == PreStep::Prepend::first && p.at_start);
          if (prepend && !t.starts_with(step.replacement)) t.insert(0, step.replacement);
          if (!step.split) {
            next.push_back({std::move(t), p.at_start});
            break;
          }
          // Split before each replacement character, which starts the next piece.
          std::size_t at = 0;
          for (std::size_t hit = t.find(step.replacement, 1); hit != std::string::npos; hit = t.find(step.replacement, hit + 1)) {
            next.push_back({t.substr(at, hit - at), p.at_start && at == 0});
            at = hit;
          }
          if (at < t.size()) next.push_back({t.substr(at), p.at_start && at == 0});
          break;
        }
      }
    }
    std::swap(pieces, next);
  }
  for (Piece& p : pieces)
    if (!p.text.empty()) out.push_back(std::move(p));
}

// ---- decoder ---------------------------------------------------------------------------------

Decoder parse_decoder(const json* j, const Where& w) {
  Decoder d;
  if (j == nullptr) {
    d.join_with_spaces = true;
    return d;
  }
  bool fused = false;
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
      if (ws.integer(*step, "stop", 0, 1 << 20) != 0) (ws / "stop").fail("Strip with stop > 0 is not supported");
      std::size_t i = 0;
      if (s.content.empty() || utf8_invalid_at(s.content) || (utf8_next(s.content, i), i != s.content.size()))
        (ws / "content").fail(fmt::format("'{}' is not one character", printable(s.content)));
      if (fused) {
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
    d.per_token.push_back(std::move(s));
  }
  return d;
}

std::string Decoder::piece(std::string_view token, bool first) const {
  if (join_with_spaces) {
    std::string t(first ? "" : " ");
    t.append(token);
    return t;
  }
  std::string t(token);
  for (const DecStep& s : per_token) {
    switch (s.kind) {
      case DecStep::Kind::replace: t = replace_all(t, s.pattern, s.content); break;
      case DecStep::Kind::byte_fallback: {
        const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
        if (t.size() == 6 && t.starts_with("<0x") && t[5] == '>' && hex(t[3]) && hex(t[4]))
          t = std::string(1, char(std::stoi(t.substr(3, 2), nullptr, 16)));
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
      case DecStep::Kind::strip:
        for (int k = 0; k < s.start && t.starts_with(s.content); ++k) t.erase(0, s.content.size());
        break;
      case DecStep::Kind::metaspace:
        // As tokenizers does: in the first token every replacement character goes, not only a
        // leading one.
        t = replace_all(t, s.content, first && s.strip_first ? "" : " ");
        break;
    }
  }
  return t;
}

}  // namespace exactq::tok
