// Text to token ids and back, from a Hugging Face `tokenizer.json` (as the `tokenizers` library
// writes it) and the model directory's config files.
//
// Supported, as `tokenizers` defines them:
// - model: BPE (vocab; merges as "a b" strings or ["a", "b"] pairs; merges by rank, the lowest
//   rank first and the leftmost on ties; ignore_merges; byte_fallback to <0xNN> tokens; unk_token
//   and fuse_unk). dropout must be null or 0; continuing_subword_prefix and end_of_word_suffix
//   must be null or empty.
// - normalizer: null, Sequence, Prepend, Replace (String or Regex pattern), Strip (strip_left,
//   strip_right), NFC, NFD, NFKC, NFKD (utf8proc's Unicode normalization).
// - pre_tokenizer: null, Sequence, Split (String or Regex pattern; behavior Removed, Isolated,
//   MergedWithPrevious, MergedWithNext or Contiguous; invert), ByteLevel (add_prefix_space,
//   use_regex with the GPT-2 pattern), Metaspace (replacement, prepend_scheme always/first/never
//   or the older add_prefix_space, split).
// - post_processor: null, Sequence, ByteLevel (changes no id), TemplateProcessing (special
//   tokens before and after the sequence $A).
// - decoder: null (tokens joined by spaces), Sequence, ByteLevel, Replace (String pattern),
//   ByteFallback, Fuse, Strip (start and stop; start only after Fuse), Metaspace.
// - added_tokens: split off first, longest match leftmost, with lstrip, rstrip, single_word and
//   normalized (matched after normalization) as `tokenizers` does; never merged across.
// Refused by name: other model types (WordPiece, Unigram, WordLevel) and decoders when the file
// is opened; normalizers (Lowercase, BertNormalizer, ...), pre-tokenizers (Whitespace, Digits,
// ...), post-processors and BPE options that only encoding uses when text is encoded, so that a
// model whose prompt is given as ids still decodes. The `truncation` and `padding` sections are
// not applied.
//
// Decoding is as `tokenizers` decodes: each token gives its bytes (ByteLevel's byte map, text
// otherwise), the whole read as UTF-8 with each maximal invalid sequence replaced by U+FFFD (as
// Rust's from_utf8_lossy does); a run of <0xNN> byte tokens (ByteFallback) gives its text where
// it is valid UTF-8 and one U+FFFD per byte otherwise. An id that no token has (a model's
// embedding is often padded past its tokenizer) decodes to nothing.
//
// Every refusal of a malformed file is a CheckpointError naming the file and the field.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exactq/safetensors.h"  // CheckpointError

namespace exactq {

// The texts of the files a tokenizer is built from; the config files are optional.
struct TokenizerFiles {
  std::string tokenizer_json;
  std::optional<std::string> tokenizer_config;   // tokenizer_config.json
  std::optional<std::string> config;             // config.json
  std::optional<std::string> generation_config;  // generation_config.json
  std::string dir = ".";                         // named in error messages
};

class Tokenizer {
 public:
  struct Impl;

  // Reads DIR/tokenizer.json, and DIR/tokenizer_config.json, DIR/config.json and
  // DIR/generation_config.json where present. Throws CheckpointError naming the file and field.
  static Tokenizer open(const std::string& model_dir);
  static Tokenizer from_files(const TokenizerFiles& files);
  // tokenizer.json alone: no BOS beyond the post-processor's, no EOS beyond tokenizer.json's.
  static Tokenizer from_json(std::string_view tokenizer_json, const std::string& file_name = "tokenizer.json");

  // `text` must be valid UTF-8 (std::invalid_argument naming the byte offset otherwise). Throws
  // CheckpointError where tokenizer.json has a section the encoder does not support.
  // add_special: add the post-processor's special tokens (BOS), or as add_bos_token /
  // add_eos_token in tokenizer_config.json say where they are set.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special = true) const;
  // An id no token has decodes to nothing (has_token tells which those are).
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const;

  // Decodes one token at a time: step() returns the text that is complete after this token,
  // holding back an incomplete UTF-8 sequence and a run of <0xNN> byte tokens until it completes
  // or can no longer; finish() returns what is held back. The concatenation of every step() and finish()
  // equals decode() of all the ids.
  class Stream {
   public:
    std::string step(std::int32_t id);
    std::string finish();

   private:
    friend class Tokenizer;
    struct State;
    std::shared_ptr<const Impl> impl_;
    std::shared_ptr<State> state_;
  };
  Stream stream(bool skip_special = false) const;

  std::optional<std::int32_t> bos_id() const;
  // The union of tokenizer_config.json's eos_token, config.json's eos_token_id (int or list, also
  // in text_config) and generation_config.json's eos_token_id; sorted, each once.
  const std::vector<std::int32_t>& eos_ids() const;
  bool is_eos(std::int32_t id) const;
  // One more than the largest id of the vocabulary and the added tokens.
  std::int32_t vocab_size() const;
  // Whether a token (of the vocabulary or added) has this id.
  bool has_token(std::int32_t id) const;
  // The token's string as tokenizer.json writes it (e.g. "Ġthe", "▁the", "<0x0A>").
  // Throws std::invalid_argument on an id no token has.
  const std::string& token_text(std::int32_t id) const;
  std::optional<std::int32_t> token_id(std::string_view text) const;
  bool is_special(std::int32_t id) const;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace exactq
