// Finding added tokens in text: a byte trie walked from each position, the longest token that
// satisfies its options winning at the leftmost position where one does.
#include "model/tokenizer_parts.h"

namespace exactq::tok {

void AddedMatcher::add(std::string_view content, std::size_t index) {
  std::uint32_t node = 0;
  for (unsigned char b : content) {
    const std::uint64_t key = (std::uint64_t(node) << 8) | b;
    auto it = edges_.find(key);
    if (it == edges_.end()) {
      it = edges_.emplace(key, std::uint32_t(nodes_.size())).first;
      nodes_.push_back(Node{});
    }
    node = it->second;
  }
  first_[static_cast<unsigned char>(content[0])] = true;
  nodes_[node].token = std::int64_t(index);
}

namespace {

// The code point that ends at `end` (valid UTF-8 before it).
char32_t last_char(std::string_view text, std::size_t end, std::size_t& begin) {
  begin = end - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xc0) == 0x80) --begin;
  std::size_t i = begin;
  return utf8_next(text, i);
}

}  // namespace

std::vector<AddedMatcher::Match> AddedMatcher::find(std::string_view text, const std::vector<Added>& tokens) const {
  std::vector<Match> out;
  std::size_t last_end = 0;
  for (std::size_t at = 0; at < text.size();) {
    if (!first_[static_cast<unsigned char>(text[at])]) {
      ++at;
      continue;
    }
    // single_word: no word character may touch the match on either side.
    const auto single_word_ok = [&](std::size_t begin, std::size_t end) {
      std::size_t b = 0, e = end;
      if (begin > 0 && is_word_char(last_char(text, begin, b))) return false;
      return end >= text.size() || !is_word_char(utf8_next(text, e));
    };
    std::int64_t best = -1;
    std::size_t best_end = 0;
    std::uint32_t node = 0;
    for (std::size_t i = at; i < text.size(); ++i) {
      const auto it = edges_.find((std::uint64_t(node) << 8) | static_cast<unsigned char>(text[i]));
      if (it == edges_.end()) break;
      node = it->second;
      const std::int64_t t = nodes_[node].token;
      if (t >= 0 && (!tokens[std::size_t(t)].single_word || single_word_ok(at, i + 1))) {
        best = t;
        best_end = i + 1;
      }
    }
    if (best < 0) {
      ++at;
      continue;
    }
    const Added& token = tokens[std::size_t(best)];
    std::size_t begin = at, end = best_end;
    if (token.lstrip) {
      std::size_t b = 0;
      while (begin > last_end && is_white_space(last_char(text, begin, b))) begin = b;
    }
    if (token.rstrip) {
      std::size_t e = end;
      while (end < text.size() && is_white_space(utf8_next(text, e))) end = e;
    }
    out.push_back({begin, end, std::size_t(best)});
    last_end = end;
    at = end;
  }
  return out;
}

}  // namespace exactq::tok
