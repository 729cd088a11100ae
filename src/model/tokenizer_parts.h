// The pieces of the tokenizer (include/exactq/tokenizer.h): UTF-8 helpers, the PCRE2 regex, the
// normalizer, the pre-tokenizer, the BPE model, the decoder and the added-token matcher. Each is
// built from its section of tokenizer.json by a parse_* function that refuses what it does not
// support with a CheckpointError naming the file and the field.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "exactq/tokenizer.h"

namespace exactq::tok {

using nlohmann::json;

// ---- reading tokenizer.json ------------------------------------------------------------------

// A section of a file: refusals read "<file>: <path>: <what>".
struct Where {
  const std::string* file;
  std::string path;
  [[noreturn]] void fail(const std::string& what) const;
  Where operator/(std::string_view key) const;  // path.key
  Where operator[](std::size_t i) const;         // path[i]
  // The member `key` of `object` (an object), or nullptr where it is absent or null.
  const json* get(const json& object, const char* key) const;
  std::string string(const json& object, const char* key) const;  // required
  std::optional<std::string> opt_string(const json& object, const char* key) const;
  bool boolean(const json& object, const char* key, bool fallback) const;
  std::int64_t integer(const json& object, const char* key, std::int64_t lo, std::int64_t hi) const;  // required
  // `value` as a token id in [0, kMaxId).
  std::int32_t id(const json& value) const;
};

// The members of a Sequence (under `list_key`), or the one step itself.
std::vector<std::pair<const json*, Where>> steps_of(const json& j, const Where& w, const char* list_key);
// A Replace or Split pattern, {"String": s} or {"Regex": r}: the text and whether it is literal.
std::pair<std::string, bool> pattern_of(const json& j, const Where& w);
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);

// Token ids are below this: a file naming a larger id is refused rather than sized for.
inline constexpr std::int64_t kMaxId = std::int64_t(1) << 24;

// ---- UTF-8 -----------------------------------------------------------------------------------

// The offset of the first byte that does not start a valid sequence, or nullopt if all is valid.
std::optional<std::size_t> utf8_invalid_at(std::string_view s);
// The code point at s[i] of valid UTF-8, advancing i past it.
char32_t utf8_next(std::string_view s, std::size_t& i);
void append_utf8(std::string& out, char32_t cp);
// Bytes read as UTF-8, each maximal invalid subpart replaced by U+FFFD (Rust's from_utf8_lossy).
std::string utf8_lossy(std::string_view bytes);
// How many trailing bytes form a proper prefix of a valid sequence (0 to 3).
std::size_t utf8_incomplete_tail(std::string_view bytes);
bool is_white_space(char32_t cp);  // Unicode White_Space
bool is_word_char(char32_t cp);    // letters, marks, digits and connector punctuation
// Unicode normalization of valid UTF-8 (utf8proc): the canonical or compatibility composition
// or decomposition, as tokenizers' NFC, NFD, NFKC and NFKD normalizers.
enum class NormForm : std::uint8_t { nfc, nfd, nfkc, nfkd };
std::string unicode_normalize(std::string_view s, NormForm form);

// ByteLevel's map: byte -> code point (printable bytes map to themselves, the others to 256+).
const std::array<char32_t, 256>& byte_to_char();
// The inverse: code point -> byte, or -1.
int char_to_byte(char32_t cp);
std::string byte_level_map(std::string_view bytes);

// ---- regex (PCRE2, UTF and Unicode properties) -----------------------------------------------

class Regex {
 public:
  // `literal`: the pattern is matched as plain text. A bad pattern fails at `where`.
  Regex(std::string_view pattern, bool literal, const Where& where);
  // The [begin, end) byte ranges of the successive non-empty, non-overlapping matches (leftmost
  // first, as Perl) in valid UTF-8 text.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

 private:
  std::shared_ptr<void> code_;
};

// ---- normalizer ------------------------------------------------------------------------------

struct NormStep {
  enum class Kind : std::uint8_t { prepend, replace, unicode, strip } kind;
  std::string text;                 // prepend: what; replace: the literal pattern
  std::string content;              // replace: the replacement
  std::shared_ptr<Regex> regex;     // replace with a Regex pattern
  NormForm form = NormForm::nfc;    // unicode
  bool left = false, right = false; // strip: white space at the start, at the end
};
struct Normalizer {
  std::vector<NormStep> steps;
  std::string apply(std::string s) const;
};
Normalizer parse_normalizer(const json* j, const Where& w);

// ---- pre-tokenizer ---------------------------------------------------------------------------

struct Piece {
  std::string text;
  bool at_start = false;  // begins at offset 0 of the input (Metaspace's prepend_scheme "first")
};
// What Split does with the matches of its pattern (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior : std::uint8_t { removed, isolated, merged_with_previous, merged_with_next, contiguous };
// The non-empty pieces of `p` split at `matches` ([begin, end) byte ranges, in order, not
// overlapping); `invert`: the text between the matches is what the behavior applies to.
void split_piece(const Piece& p, const std::vector<std::pair<std::size_t, std::size_t>>& matches, SplitBehavior behavior,
                 bool invert, std::vector<Piece>& out);

struct PreStep {
  enum class Kind : std::uint8_t { split, byte_level, metaspace } kind;
  std::shared_ptr<Regex> regex;      // split; byte_level with use_regex
  SplitBehavior behavior = SplitBehavior::isolated;  // split
  bool invert = false;               // split
  bool add_prefix_space = false;     // byte_level
  std::string replacement;           // metaspace
  enum class Prepend : std::uint8_t { always, first, never } prepend = Prepend::always;
  bool split = true;                 // metaspace
};
struct PreTokenizer {
  std::vector<PreStep> steps;
  void apply(Piece piece, std::vector<Piece>& out) const;
};
PreTokenizer parse_pre_tokenizer(const json* j, const Where& w);

// ---- BPE -------------------------------------------------------------------------------------

struct Bpe {
  std::unordered_map<std::string, std::int32_t> vocab;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges;
  std::optional<std::int32_t> unk;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  std::array<std::int32_t, 256> byte_tokens{};  // <0xNN>'s id, or -1
  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const;
};
// A refusal of what only encoding uses (dropout, ...) goes to encode_refusal, where it is empty.
Bpe parse_bpe(const json& model, const Where& w, std::string& encode_refusal);

// ---- decoder ---------------------------------------------------------------------------------

struct DecStep {
  enum class Kind : std::uint8_t { replace, byte_fallback, byte_level, strip, metaspace } kind;
  std::string pattern, content;  // replace; strip's content; metaspace's replacement
  int start = 0, stop = 0;       // strip: leading and trailing copies of content removed
  bool strip_first = false;      // metaspace: the first token loses its replacement characters
};
// One token's part of the decoded text: bytes, or one byte of a <0xNN> token (ByteFallback),
// which joins the byte tokens next to it: a run of them that is valid UTF-8 gives its text,
// any other run one U+FFFD per byte, as tokenizers' ByteFallback decoder does.
struct DecodedPiece {
  std::string bytes;
  bool byte_token = false;
};
struct Decoder {
  bool join_with_spaces = false;  // no decoder: tokens joined by " "
  std::vector<DecStep> per_token;  // the steps up to Fuse, applied to each token
  std::string strip_content;       // Strip after Fuse: up to strip_start leading copies, once
  int strip_start = 0;
  // The piece of the token that is the `first` one decoded (after skipped specials).
  DecodedPiece piece(std::string_view token, bool first) const;
};
Decoder parse_decoder(const json* j, const Where& w);

// ---- added tokens ----------------------------------------------------------------------------

struct Added {
  std::int32_t id = 0;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, normalized = false, single_word = false;
};
// Finds added tokens in text: leftmost, then longest, as tokenizers' Aho-Corasick in
// leftmost-longest mode; lstrip/rstrip take the neighbouring white space into the match.
class AddedMatcher {
 public:
  void add(std::string_view content, std::size_t index);
  struct Match {
    std::size_t begin, end, index;
  };
  // `tokens` are the Added the indices refer to.
  std::vector<Match> find(std::string_view text, const std::vector<Added>& tokens) const;
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    std::int64_t token = -1;
  };
  std::vector<Node> nodes_{Node{}};
  std::unordered_map<std::uint64_t, std::uint32_t> edges_;  // (node << 8 | byte) -> node
  std::array<bool, 256> first_{};
};

}  // namespace exactq::tok

namespace exactq {

struct Tokenizer::Impl {
  std::string file;  // tokenizer.json's path, for messages
  tok::Normalizer normalizer;
  tok::PreTokenizer pre_tokenizer;
  tok::Bpe bpe;
  tok::Decoder decoder;
  std::vector<tok::Added> added;
  tok::AddedMatcher raw_added, normalized_added;  // matched before / after normalization
  // By id: the token's text (empty for an id no token has) and whether it is special.
  std::vector<std::string> text;
  std::vector<std::uint8_t> kind;  // 0 none, 1 token, 2 special token
  std::vector<std::int32_t> prefix, suffix;  // added around the sequence by encode(add_special)
  std::optional<std::int32_t> bos;
  std::vector<std::int32_t> eos;
  // Why text cannot be encoded (a section the encoder does not support), or empty: refused when
  // text is encoded, not when the file is opened, so that token ids can still be decoded.
  std::string encode_refusal;

  void check_id(std::int32_t id) const;
  bool has(std::int32_t id) const { return id >= 0 && std::size_t(id) < text.size() && kind[std::size_t(id)] != 0; }
  void encode_text(std::string_view text, std::vector<std::int32_t>& out) const;
};

// Parses tokenizer.json (every section but the config files' BOS/EOS).
std::shared_ptr<Tokenizer::Impl> parse_tokenizer_json(std::string_view text, const std::string& file);

}  // namespace exactq
