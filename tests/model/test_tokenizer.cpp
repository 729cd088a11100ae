// The tokenizer on hand-written tokenizer.json files: encodings worked out by hand from the BPE
// rules (tokenizer_fixture.h lists the merges), added and special tokens, byte fallback,
// ignore_merges, decoding and the streaming decoder.
#include <gtest/gtest.h>

#include <vector>

#include "exactq/tokenizer.h"
#include "model/tokenizer_parts.h"
#include "model/tokenizer_fixture.h"

namespace exactq::test {
namespace {

using Ids = std::vector<std::int32_t>;

Tokenizer load(const nlohmann::json& j) { return Tokenizer::from_json(j.dump()); }

// The concatenated output of the streaming decoder.
std::string streamed(const Tokenizer& t, const Ids& ids, bool skip_special) {
  auto s = t.stream(skip_special);
  std::string out;
  for (auto id : ids) out += s.step(id);
  return out + s.finish();
}

class TokenizerByteLevel : public ::testing::TestWithParam<bool> {};  // merges as pairs or as "a b"

TEST_P(TokenizerByteLevel, MergesByRankThenLeftmost) {
  const Tokenizer t = load(byte_level_tokenizer(false, GetParam()));
  EXPECT_EQ(t.vocab_size(), 268);
  // "hello": (h,e) rank 1 first, then (l,l) rank 3; "he ll" is no merge, so "hello" is not reached.
  // " the" -> Ġ t h e: (Ġ,t) rank 0, (h,e) rank 1, then (Ġt,he) rank 2.
  EXPECT_EQ(t.encode("hello the", false), (Ids{257, 259, 'o', 258}));
  EXPECT_EQ(t.encode("hello the", true), (Ids{265, 257, 259, 'o', 258}));
  // "ell": (l,l) then (e,ll). "lll": two (l,l) of equal rank, the leftmost merges.
  EXPECT_EQ(t.encode("ell", false), (Ids{260}));
  EXPECT_EQ(t.encode("lll", false), (Ids{259, 'l'}));
  EXPECT_EQ(t.encode("", false), Ids{});
  EXPECT_EQ(t.encode("", true), Ids{265});
}

TEST_P(TokenizerByteLevel, IgnoreMergesEmitsAWordInTheVocabularyWhole) {
  const Tokenizer t = load(byte_level_tokenizer(true, GetParam()));
  EXPECT_EQ(t.encode("hello the", false), (Ids{262, 258}));
  EXPECT_EQ(t.encode("hellos", false), (Ids{257, 259, 'o', 's'}));  // "hellos" is not in the vocabulary
}

TEST_P(TokenizerByteLevel, PreTokenizerPatternSplits) {
  const Tokenizer t = load(byte_level_tokenizer(false, GetParam()));
  // \p{N}{1,3}: "1234" is "123" + "4", so the merge (3,4) never meets its pair.
  EXPECT_EQ(t.encode("1234", false), (Ids{'1', '2', '3', '4'}));
  EXPECT_EQ(t.encode("34", false), (Ids{263}));
  // \s+(?!\S) leaves the last space to the word after it: "a  b" is "a", " ", " b".
  EXPECT_EQ(t.encode("a  b", false), (Ids{'a', ' ', ' ', 'b'}));
  // At the end the whole run is one piece, and (Ġ,Ġ) merges.
  EXPECT_EQ(t.encode("a  ", false), (Ids{'a', 264}));
  // Bytes outside printable ASCII: their own ids (é is C3 A9; a newline is byte 10).
  EXPECT_EQ(t.encode("\xc3\xa9\n", false), (Ids{0xc3, 0xa9, 10}));
}

TEST_P(TokenizerByteLevel, AddedTokensSplitFirstAndNeverMerge) {
  const Tokenizer t = load(byte_level_tokenizer(false, GetParam()));
  EXPECT_EQ(t.encode("l<|end_of_text|>l", false), (Ids{'l', 266, 'l'}));
  EXPECT_EQ(t.encode("<tool><|begin_of_text|>", true), (Ids{265, 267, 265}));
  EXPECT_EQ(t.encode("<|end_of_text", false), (Ids{'<', '|', 'e', 'n', 'd', '_', 'o', 'f', '_', 't', 'e', 'x', 't'}));
  EXPECT_TRUE(t.is_special(266));
  EXPECT_FALSE(t.is_special(267));
  EXPECT_EQ(t.token_id("<tool>"), 267);
  EXPECT_EQ(t.token_text(258), "\xc4\xa0the");
}

TEST_P(TokenizerByteLevel, DecodeAndSkipSpecial) {
  const Tokenizer t = load(byte_level_tokenizer(false, GetParam()));
  const Ids ids = {265, 257, 259, 'o', 258, 267, 266};
  EXPECT_EQ(t.decode(ids), "<|begin_of_text|>hello the<tool><|end_of_text|>");
  EXPECT_EQ(t.decode(ids, true), "hello the<tool>");
  EXPECT_EQ(streamed(t, ids, false), t.decode(ids));
  EXPECT_EQ(streamed(t, ids, true), t.decode(ids, true));
  // Ids no token has (past the vocabulary, as a padded embedding's) decode to nothing.
  EXPECT_FALSE(t.has_token(268));
  EXPECT_FALSE(t.has_token(-1));
  EXPECT_TRUE(t.has_token(267));
  EXPECT_EQ(t.decode(Ids{257, 268, -1, 259, 1 << 20}), "hell");
  EXPECT_EQ(streamed(t, Ids{268, 257, -1}, false), "he");
}

TEST_P(TokenizerByteLevel, StreamHoldsBackIncompleteUtf8) {
  const Tokenizer t = load(byte_level_tokenizer(false, GetParam()));
  auto s = t.stream();
  // U+1F600 is F0 9F 98 80: nothing until its last byte.
  EXPECT_EQ(s.step('a'), "a");
  EXPECT_EQ(s.step(0xf0), "");
  EXPECT_EQ(s.step(0x9f), "");
  EXPECT_EQ(s.step(0x98), "");
  EXPECT_EQ(s.step(0x80), "\xf0\x9f\x98\x80");
  // A sequence cut short by another byte becomes U+FFFD, as decode() writes it.
  EXPECT_EQ(s.step(0xe4), "");
  EXPECT_EQ(s.step('b'), "\xef\xbf\xbd" "b");
  EXPECT_EQ(s.step(0xe4), "");
  EXPECT_EQ(s.finish(), "\xef\xbf\xbd");
  EXPECT_EQ(t.decode(Ids{'a', 0xe4, 'b', 0xe4}), "a\xef\xbf\xbd" "b\xef\xbf\xbd");
}

INSTANTIATE_TEST_SUITE_P(Merges, TokenizerByteLevel, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "pairs" : "strings"; });

TEST(TokenizerSentencePiece, LegacyNormalizerKnownAnswers) {
  const Tokenizer t = load(sentencepiece_tokenizer(true));
  // "▁hello▁hello": (▁,h) rank 0 twice, (l,l) rank 1 twice, (▁h,e), (ll,o), (▁he,llo).
  EXPECT_EQ(t.encode("hello hello", true), (Ids{1, 269, 269}));
  // é is a token; '!' falls back to its byte <0x21> (3 + 0x21).
  EXPECT_EQ(t.encode("h\xc3\xa9!", false), (Ids{265, 264, 3 + 0x21}));
  // 日 is E6 97 A5: three byte tokens after "▁".
  EXPECT_EQ(t.encode("\xe6\x97\xa5", false), (Ids{259, 3 + 0xe6, 3 + 0x97, 3 + 0xa5}));
  // Each stretch between added tokens gets its own "▁".
  EXPECT_EQ(t.encode("<s>hello", false), (Ids{1, 269}));
  EXPECT_EQ(t.bos_id(), 1);
}

TEST(TokenizerSentencePiece, MetaspaceFirstPrependsOnlyAtTheStart) {
  const Tokenizer t = load(sentencepiece_tokenizer(false));
  EXPECT_EQ(t.encode("hello hello", true), (Ids{1, 269, 269}));
  // After an added token the text is not at the start: no "▁", so "h e llo".
  EXPECT_EQ(t.encode("<s>hello", false), (Ids{1, 260, 261, 268}));
}

TEST(TokenizerSentencePiece, UnknownCharactersWithoutByteFallback) {
  // x and y are not tokens: one <unk> for the run with fuse_unk, one each without.
  EXPECT_EQ(load(sentencepiece_tokenizer(true, false, true)).encode("hxyh", false), (Ids{265, 0, 260}));
  EXPECT_EQ(load(sentencepiece_tokenizer(true, false, false)).encode("hxyh", false), (Ids{265, 0, 0, 260}));
}

TEST(TokenizerSentencePiece, DecodeReplacesBytesAndStripsOneLeadingSpace) {
  const Tokenizer t = load(sentencepiece_tokenizer(true));
  EXPECT_EQ(t.decode(Ids{1, 269, 269}), "<s> hello hello");
  EXPECT_EQ(t.decode(Ids{1, 269, 269}, true), "hello hello");
  EXPECT_EQ(t.decode(Ids{259, 3 + 0xe6, 3 + 0x97, 3 + 0xa5}), "\xe6\x97\xa5");
  EXPECT_EQ(t.decode(Ids{259, 259, 260}), " h");  // only one space goes
  for (const Ids& ids : {Ids{1, 269, 269}, Ids{259, 259, 260}, Ids{259, 3 + 0xe6, 3 + 0x97, 3 + 0xa5, 264}, Ids{3 + 0xe6, 1, 3 + 0x97}})
    for (bool skip : {false, true}) EXPECT_EQ(streamed(t, ids, skip), t.decode(ids, skip));
}

// A run of byte tokens is one piece, as tokenizers' ByteFallback decoder joins it: its text where
// the run is valid UTF-8, one U+FFFD per byte otherwise; the stream holds the run back.
TEST(TokenizerSentencePiece, ByteRunsDecodeWholeOrAsOneReplacementPerByte) {
  const Tokenizer t = load(sentencepiece_tokenizer(true));
  const std::string fffd = "\xef\xbf\xbd";
  const auto b = [](int x) { return 3 + x; };
  EXPECT_EQ(t.decode(Ids{260, b(0xe6), b(0x97)}), "h" + fffd + fffd);  // a character cut short
  EXPECT_EQ(t.decode(Ids{260, b(0xe6), b(0x97), b(0xa5), b(0xe6)}), "h" + fffd + fffd + fffd + fffd);
  EXPECT_EQ(t.decode(Ids{260, b(0xe6), b(0x97), b(0xa5), 260, b(0xe6)}), "h\xe6\x97\xa5h" + fffd);
  auto s = t.stream();
  EXPECT_EQ(s.step(260), "h");
  EXPECT_EQ(s.step(b(0xe6)), "");
  EXPECT_EQ(s.step(b(0x97)), "");
  EXPECT_EQ(s.step(b(0xa5)), "");
  EXPECT_EQ(s.step(261), "\xe6\x97\xa5" "e");
  EXPECT_EQ(s.step(b(0xe6)), "");
  EXPECT_EQ(s.finish(), fffd);
}

// Split's behaviors and invert, on the example of tokenizers' documentation.
TEST(TokenizerSplit, EveryBehaviorWithAndWithoutInvert) {
  using tok::SplitBehavior;
  const tok::Piece p{"the-final--countdown", true};
  const std::vector<std::pair<std::size_t, std::size_t>> dashes = {{3, 4}, {9, 10}, {10, 11}};
  const auto split = [&](SplitBehavior b, bool invert) {
    std::vector<tok::Piece> out;
    tok::split_piece(p, dashes, b, invert, out);
    std::vector<std::string> texts;
    for (const auto& x : out) texts.push_back(x.text);
    EXPECT_TRUE(out.empty() || out[0].at_start == (texts[0] == "the" || texts[0] == "the-")) << texts[0];
    return texts;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split(SplitBehavior::removed, false), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::isolated, false), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::merged_with_previous, false), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::merged_with_next, false), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(SplitBehavior::contiguous, false), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::removed, true), (V{"-", "-", "-"}));
  EXPECT_EQ(split(SplitBehavior::isolated, true), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::merged_with_previous, true), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(SplitBehavior::merged_with_next, true), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::contiguous, true), (V{"the", "-", "final", "--", "countdown"}));
}

// Unicode normalization is utf8proc's: composition, decomposition, compatibility, Hangul,
// reordering of combining marks, and text it leaves alone (Devanagari's virama, Thai).
TEST(TokenizerNormalize, FourFormsOnEveryKindOfText) {
  using tok::NormForm;
  using tok::unicode_normalize;
  EXPECT_EQ(unicode_normalize("e\xcc\x81", NormForm::nfc), "\xc3\xa9");                // e + U+0301 -> é
  EXPECT_EQ(unicode_normalize("\xc3\xa9", NormForm::nfd), "e\xcc\x81");
  EXPECT_EQ(unicode_normalize("\xe2\x84\xab", NormForm::nfc), "\xc3\x85");            // Ångström sign -> Å
  EXPECT_EQ(unicode_normalize("\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab", NormForm::nfc), "\xed\x95\x9c");  // jamo -> 한
  EXPECT_EQ(unicode_normalize("\xed\x95\x9c", NormForm::nfd), "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab");
  EXPECT_EQ(unicode_normalize("a\xcc\x81\xcc\xa3", NormForm::nfd), "a\xcc\xa3\xcc\x81");  // marks by class
  EXPECT_EQ(unicode_normalize("\xef\xac\x81", NormForm::nfc), "\xef\xac\x81");       // ﬁ stays under NFC
  EXPECT_EQ(unicode_normalize("\xef\xac\x81", NormForm::nfkc), "fi");
  EXPECT_EQ(unicode_normalize("\xe2\x91\xa0", NormForm::nfkd), "1");                    // ①
  EXPECT_EQ(unicode_normalize("\xef\xa4\x80", NormForm::nfc), "\xe8\xb1\x88");       // U+F900 -> U+8C48
  const std::string hindi = "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87";  // नमस्ते
  EXPECT_EQ(unicode_normalize(hindi, NormForm::nfc), hindi);
  EXPECT_EQ(unicode_normalize(std::string("a\0b", 3), NormForm::nfc), std::string("a\0b", 3));
  EXPECT_EQ(unicode_normalize("", NormForm::nfkc), "");
}

}  // namespace
}  // namespace exactq::test
