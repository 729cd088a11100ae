// The normalizer and the pre-tokenizer: parsed from tokenizer.json and applied as the tokenizers
// library defines each step.
#include <algorithm>

#include <fmt/format.h>

#include "model/text.h"
#include "model/tokenizer_parts.h"

namespace exactq::tok {

namespace {

// GPT-2's split, which ByteLevel applies with use_regex.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

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

// ---- normalizer ------------------------------------------------------------------------------

Normalizer parse_normalizer(const json* j, const Where& w) {
  Normalizer n;
  if (j == nullptr) return n;
  for (const auto& [step, ws] : steps_of(*j, w, "normalizers")) {
    const std::string type = ws.string(*step, "type");
    if (type == "Prepend") n.steps.push_back({NormStep::Kind::prepend, ws.string(*step, "prepend"), "", nullptr});
    else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
      NormStep s{NormStep::Kind::unicode, "", "", nullptr};
      s.form = type == "NFC" ? NormForm::nfc : type == "NFD" ? NormForm::nfd : type == "NFKC" ? NormForm::nfkc : NormForm::nfkd;
      n.steps.push_back(std::move(s));
    } else if (type == "Strip") {
      NormStep s{NormStep::Kind::strip, "", "", nullptr};
      s.left = ws.boolean(*step, "strip_left", false);
      s.right = ws.boolean(*step, "strip_right", false);
      n.steps.push_back(std::move(s));
    } else if (type == "Replace") {
      auto [pattern, literal] = pattern_of(*step, ws);
      NormStep s{NormStep::Kind::replace, pattern, ws.string(*step, "content"), nullptr};
      if (literal && pattern.empty()) (ws / "pattern").fail("the String pattern is empty");
      if (!literal) s.regex = std::make_shared<Regex>(pattern, false, ws / "pattern");
      n.steps.push_back(std::move(s));
    } else {
      (ws / "type").fail(fmt::format("normalizer '{}' is not supported (Sequence, Prepend, Replace, Strip, NFC, NFD, NFKC, NFKD)",
                                     printable(type)));
    }
  }
  return n;
}

std::string Normalizer::apply(std::string s) const {
  for (const NormStep& step : steps) {
    if (s.empty()) break;  // every step maps empty to empty (Prepend adds nothing to an empty text)
    switch (step.kind) {
      case NormStep::Kind::prepend: s = step.text + s; break;
      case NormStep::Kind::unicode: s = unicode_normalize(s, step.form); break;
      case NormStep::Kind::strip: {
        std::size_t begin = 0, end = s.size();
        for (std::size_t i = 0; step.left && i < end;) {
          if (!is_white_space(utf8_next(s, i))) break;
          begin = i;
        }
        while (step.right && end > begin) {
          std::size_t b = end - 1;
          while (b > begin && (static_cast<unsigned char>(s[b]) & 0xc0) == 0x80) --b;
          std::size_t i = b;
          if (!is_white_space(utf8_next(s, i))) break;
          end = b;
        }
        s = s.substr(begin, end - begin);
        break;
      }
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
      if (behavior == "Removed") s.behavior = SplitBehavior::removed;
      else if (behavior == "Isolated") s.behavior = SplitBehavior::isolated;
      else if (behavior == "MergedWithPrevious") s.behavior = SplitBehavior::merged_with_previous;
      else if (behavior == "MergedWithNext") s.behavior = SplitBehavior::merged_with_next;
      else if (behavior == "Contiguous") s.behavior = SplitBehavior::contiguous;
      else
        (ws / "behavior").fail(fmt::format(
            "Split behavior '{}' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous", printable(behavior)));
      s.invert = ws.boolean(*step, "invert", false);
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

void split_piece(const Piece& p, const std::vector<std::pair<std::size_t, std::size_t>>& matches, SplitBehavior behavior,
                 bool invert, std::vector<Piece>& out) {
  // The text as alternating stretches, each flagged as a delimiter (a match, or with invert a
  // stretch between matches) or not; then the behavior decides where the pieces end.
  struct Part {
    std::size_t begin, end;
    bool delimiter;
  };
  std::vector<Part> parts;
  std::size_t at = 0;
  for (const auto& [b, e] : matches) {
    if (b > at) parts.push_back({at, b, invert});
    parts.push_back({b, e, !invert});
    at = e;
  }
  if (at < p.text.size()) parts.push_back({at, p.text.size(), invert});

  std::vector<Part> pieces;  // delimiter: dropped (Removed)
  bool previous = false;     // the last part was a delimiter
  switch (behavior) {
    case SplitBehavior::removed: pieces = parts; break;
    case SplitBehavior::isolated:
      for (Part q : parts) pieces.push_back({q.begin, q.end, false});
      break;
    case SplitBehavior::contiguous:  // a run of delimiters (or of the others) is one piece
      for (const Part& q : parts) {
        if (q.delimiter == previous && !pieces.empty()) pieces.back().end = q.end;
        else pieces.push_back({q.begin, q.end, false});
        previous = q.delimiter;
      }
      break;
    case SplitBehavior::merged_with_previous:  // a delimiter ends the piece before it
      for (const Part& q : parts) {
        if (q.delimiter && !previous && !pieces.empty()) pieces.back().end = q.end;
        else pieces.push_back({q.begin, q.end, false});
        previous = q.delimiter;
      }
      break;
    case SplitBehavior::merged_with_next:  // a delimiter starts the piece after it
      for (auto q = parts.rbegin(); q != parts.rend(); ++q) {
        if (q->delimiter && !previous && !pieces.empty()) pieces.back().begin = q->begin;
        else pieces.push_back({q->begin, q->end, false});
        previous = q->delimiter;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
  }
  for (const Part& q : pieces)
    if (!q.delimiter && q.end > q.begin) out.push_back({p.text.substr(q.begin, q.end - q.begin), p.at_start && q.begin == 0});
}

namespace {

// The non-overlapping occurrences of a non-empty `what` in `text`, leftmost first.
std::vector<std::pair<std::size_t, std::size_t>> find_literal(std::string_view text, std::string_view what) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t hit = text.find(what); hit != std::string_view::npos; hit = text.find(what, hit + what.size()))
    out.emplace_back(hit, hit + what.size());
  return out;
}

}  // namespace

void PreTokenizer::apply(Piece piece, std::vector<Piece>& out) const {
  std::vector<Piece> pieces{std::move(piece)}, next;
  for (const PreStep& step : steps) {
    next.clear();
    for (Piece& p : pieces) {
      switch (step.kind) {
        case PreStep::Kind::split: split_piece(p, step.regex->find_all(p.text), step.behavior, step.invert, next); break;
        case PreStep::Kind::byte_level: {
          if (step.add_prefix_space && !p.text.starts_with(' ')) p.text.insert(0, 1, ' ');
          const std::size_t first = next.size();
          if (step.regex) split_piece(p, step.regex->find_all(p.text), SplitBehavior::isolated, false, next);
          else next.push_back(std::move(p));
          for (std::size_t i = first; i < next.size(); ++i) next[i].text = byte_level_map(next[i].text);
          break;
        }
        case PreStep::Kind::metaspace: {
          Piece t{replace_all(p.text, " ", step.replacement), p.at_start};
          const bool prepend = step.prepend == PreStep::Prepend::always || (step.prepend == PreStep::Prepend::first && p.at_start);
          if (prepend && !t.text.starts_with(step.replacement)) t.text.insert(0, step.replacement);
          // Each replacement character starts a piece.
          if (step.split) split_piece(t, find_literal(t.text, step.replacement), SplitBehavior::merged_with_next, false, next);
          else next.push_back(std::move(t));
          break;
        }
      }
    }
    std::swap(pieces, next);
  }
  for (Piece& p : pieces)
    if (!p.text.empty()) out.push_back(std::move(p));
}

}  // namespace exactq::tok
