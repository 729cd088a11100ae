// Small tokenizer.json files written by the tests: a byte-level BPE in Llama 3's form and a
// SentencePiece-style BPE with byte fallback in Llama 2's form. The expected encodings in the
// tests are worked out by hand from the merges listed here.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace exactq::test {

// ByteLevel's printable form of a byte, written out from the rule (bytes 0x21-0x7e, 0xa1-0xac
// and 0xae-0xff stand for themselves; the others take 256, 257, ... in byte order).
inline std::string byte_symbol(int b) {
  int code = b;
  const auto printable = [](int x) { return (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff); };
  if (!printable(b)) {
    int n = 0;
    for (int x = 0; x < b; ++x) n += printable(x) ? 0 : 1;
    code = 256 + n;
  }
  std::string s;
  if (code < 0x80) s += char(code);
  else {
    s += char(0xc0 | (code >> 6));
    s += char(0x80 | (code & 0x3f));
  }
  return s;
}

inline const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Byte-level BPE: byte b has id b; then the merges below, each adding the next id:
//   256 "Ġt" (Ġ t), 257 "he" (h e), 258 "Ġthe" (Ġt he), 259 "ll" (l l), 260 "ell" (e ll),
//   261 "hell" (h ell), 262 "hello" (hell o), 263 "34" (3 4), 264 "ĠĠ" (Ġ Ġ);
// added: 265 <|begin_of_text|>, 266 <|end_of_text|> (special), 267 "<tool>" (not special).
inline nlohmann::json byte_level_tokenizer(bool ignore_merges, bool pair_merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_symbol(b)] = b;
  const std::string G = "\xc4\xa0";  // Ġ, the space's symbol
  const std::vector<std::pair<std::string, std::string>> merges = {
      {G, "t"}, {"h", "e"}, {G + "t", "he"}, {"l", "l"}, {"e", "ll"}, {"h", "ell"}, {"hell", "o"}, {"3", "4"}, {G, G}};
  nlohmann::json m = nlohmann::json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    if (pair_merges) m.push_back({a, b});
    else m.push_back(a + " " + b);
  }
  const auto added = [](int i, const char* content, bool special) {
    return nlohmann::json{{"id", i}, {"content", content}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false}, {"normalized", false}, {"special", special}};
  };
  nlohmann::json t;
  t["version"] = "1.0";
  t["added_tokens"] = {added(265, "<|begin_of_text|>", true), added(266, "<|end_of_text|>", true), added(267, "<tool>", false)};
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", kLlama3Pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  t["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
        {{"type", "TemplateProcessing"},
         {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
         {"pair", nlohmann::json::array()},
         {"special_tokens", {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {265}}, {"tokens", {"<|begin_of_text|>"}}}}}}}}}};
  t["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  t["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                {"ignore_merges", ignore_merges}, {"vocab", vocab}, {"merges", m}};
  return t;
}

// SentencePiece-style BPE: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then
//   259 "▁", 260 "h", 261 "e", 262 "l", 263 "o", 264 "é", and the merges
//   265 "▁h" (▁ h), 266 "ll" (l l), 267 "▁he" (▁h e), 268 "llo" (ll o), 269 "▁hello" (▁he llo).
// legacy: Llama 2's normalizer (Prepend ▁, Replace " " -> ▁); else no normalizer and a
// Metaspace pre-tokenizer with prepend_scheme "first" (newer conversions).
inline nlohmann::json sentencepiece_tokenizer(bool legacy, bool byte_fallback = true, bool fuse_unk = true) {
  const std::string S = "\xe2\x96\x81";  // ▁
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int id = 259;
  for (const std::string& t : {S, std::string("h"), std::string("e"), std::string("l"), std::string("o"), std::string("\xc3\xa9")})
    vocab[t] = id++;
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{{S, "h"}, {"l", "l"}, {S + "h", "e"}, {"ll", "o"}, {S + "he", "llo"}}) {
    vocab[a + b] = id++;
    merges.push_back({a, b});
  }
  const auto added = [](int i, const char* content) {
    return nlohmann::json{{"id", i}, {"content", content}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  nlohmann::json t;
  t["added_tokens"] = {added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")};
  if (legacy) {
    t["normalizer"] = {{"type", "Sequence"},
                       {"normalizers", {{{"type", "Prepend"}, {"prepend", S}},
                                        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", S}}}}};
    t["pre_tokenizer"] = nullptr;
  } else {
    t["normalizer"] = nullptr;
    t["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", S}, {"prepend_scheme", "first"}, {"split", false}};
  }
  t["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  t["decoder"] = {{"type", "Sequence"},
                  {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", S}}}, {"content", " "}},
                                {{"type", "ByteFallback"}},
                                {{"type", "Fuse"}},
                                {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  t["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr}, {"fuse_unk", fuse_unk}, {"byte_fallback", byte_fallback},
                {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}};
  return t;
}

}  // namespace exactq::test
