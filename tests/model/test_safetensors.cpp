// The safetensors header parser, one test per malformed-file kind. Every file is built here
// byte by byte (the length, the JSON text, the data) without exactq's writer; each negative
// case starts from a valid file that parses (the positive control) and changes one thing.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "exactq/safetensors.h"
#include "test_util.h"

namespace exactq::test {
namespace {

using Bytes = std::vector<std::byte>;

Bytes file_of(const std::string& header, std::size_t data_bytes, std::uint64_t stated_length) {
  Bytes b(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) b[std::size_t(i)] = std::byte((stated_length >> (8 * i)) & 0xff);
  std::memcpy(b.data() + 8, header.data(), header.size());
  for (std::size_t i = 0; i < data_bytes; ++i) b[8 + header.size() + i] = std::byte(i * 7 + 1);
  return b;
}
Bytes file_of(const std::string& header, std::size_t data_bytes) { return file_of(header, data_bytes, header.size()); }

// Two tensors: a [2, 3] F32 (24 bytes) and a [4] BF16 (8 bytes), 32 data bytes.
const std::string kValid =
    R"({"__metadata__":{"format":"mlx"},"a.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
    R"("b.scales":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Expects CheckpointError whose message names the file and contains every needle.
void expect_refused(const Bytes& file, std::initializer_list<std::string> needles) {
  try {
    parse_safetensors_header(file, "shard-7.safetensors");
    ADD_FAILURE() << "accepted a malformed file";
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("shard-7.safetensors"), std::string::npos) << m;
    for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "'" << n << "' not in: " << m;
  }
}

TEST(Safetensors, ValidFileParses) {
  const Bytes f = file_of(kValid, 32);
  const SafetensorsHeader h = parse_safetensors_header(f, "x");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.data_offset, 8 + kValid.size());
  const TensorInfo* a = h.find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, StDType::F32);
  EXPECT_EQ(a->shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(a->begin, 0u);
  EXPECT_EQ(a->end, 24u);
  EXPECT_EQ(h.find("b.scales")->dtype, StDType::BF16);
  EXPECT_EQ(h.metadata.at("format"), "mlx");
  // Trailing spaces pad a header (writers align the data this way).
  EXPECT_NO_THROW(parse_safetensors_header(file_of(kValid + "   ", 32), "x"));
}

TEST(Safetensors, RefusesFileShorterThanTheLength) { expect_refused(Bytes(5), {"5 bytes"}); }

TEST(Safetensors, RefusesHeaderLengthPastTheFile) {
  EXPECT_NO_THROW(parse_safetensors_header(file_of(kValid, 32), "x"));
  expect_refused(file_of(kValid, 32, kValid.size() + 33), {std::to_string(kValid.size() + 33), "past the end"});
}

TEST(Safetensors, RefusesAbsurdHeaderLength) {
  expect_refused(file_of(kValid, 32, std::uint64_t(1) << 62), {std::to_string(std::uint64_t(1) << 62), "over the limit"});
}

TEST(Safetensors, RefusesMalformedJson) {
  expect_refused(file_of(replaced(kValid, "[0,24]},", "[0,24]"), 32), {"JSON"});
  expect_refused(file_of("{\"a\":", 0), {"JSON"});
}

TEST(Safetensors, RefusesNonUtf8Json) {
  // A name holding a lone continuation byte: same length, so only the encoding changes.
  expect_refused(file_of(replaced(kValid, "a.weight", "a.weig\x80t"), 32), {"UTF-8"});
}

TEST(Safetensors, RefusesNonObjectHeader) { expect_refused(file_of("[1,2,3]", 0), {"{"}); }

TEST(Safetensors, RefusesUnknownDtype) {
  expect_refused(file_of(replaced(kValid, "\"F32\"", "\"F31\""), 32), {"a.weight", "F31", "dtype"});
}

TEST(Safetensors, RefusesShapeNotMatchingByteSpan) {
  // [2,4] F32 is 32 bytes, but the offsets still span 24.
  expect_refused(file_of(replaced(kValid, "[2,3]", "[2,4]"), 32), {"a.weight", "32 bytes", "span 24"});
  // The same span read as F16: 12 bytes needed.
  expect_refused(file_of(replaced(kValid, "\"F32\"", "\"F16\""), 32), {"a.weight", "12 bytes"});
}

TEST(Safetensors, RefusesOffsetsPastTheData) {
  expect_refused(file_of(kValid, 31), {"b.scales", "32", "past the data"});
}

TEST(Safetensors, RefusesOverlappingTensors) {
  // b starts inside a: [20, 28) overlaps [0, 24).
  const std::string h = replaced(kValid, "[24,32]", "[20,28]");
  expect_refused(file_of(h, 32), {"b.scales", "overlap", "a.weight"});
}

TEST(Safetensors, RefusesHolesAndTrailingBytes) {
  expect_refused(file_of(replaced(kValid, "[24,32]", "[28,36]"), 36), {"b.scales", "hole of 4"});
  expect_refused(file_of(kValid, 40), {"8 bytes after the last tensor"});
}

TEST(Safetensors, RefusesDecreasingOffsets) {
  expect_refused(file_of(replaced(kValid, "[24,32]", "[32,24]"), 32), {"b.scales", "[32, 24]"});
}

TEST(Safetensors, RefusesRepeatedTensorName) {
  expect_refused(file_of(replaced(kValid, "b.scales", "a.weight"), 32), {"a.weight", "twice"});
}

TEST(Safetensors, RefusesBadShapeEntries) {
  expect_refused(file_of(replaced(kValid, "[2,3]", "[-2,3]"), 32), {"a.weight", "-2"});
  expect_refused(file_of(replaced(kValid, "[2,3]", "[2.5,3]"), 32), {"a.weight", "2.5"});
  expect_refused(file_of(replaced(kValid, "[2,3]", "[18446744073709551615,0]"), 32), {"a.weight", "absurdly large"});
  expect_refused(file_of(replaced(kValid, "\"shape\"", "\"shope\""), 32), {"a.weight", "shope"});
}

TEST(Safetensors, RefusesHugeShapeWithoutOverflow) {
  // 2^40 x 2^40 elements: the byte count wraps 64 bits if computed naively, to 0 x 4 = 0.
  const std::string h = R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})";
  expect_refused(file_of(h, 0), {"'a'", "over 2^64"});
}

TEST(Safetensors, RefusesNonStringMetadata) {
  expect_refused(file_of(replaced(kValid, "\"mlx\"", "7"), 32), {"__metadata__", "format"});
}

TEST(Safetensors, RefusesDeepNesting) {
  expect_refused(file_of(R"({"a":{"dtype":[[[["F32"]]]]}})", 0), {"deeper"});
}

// The writer, read back by the parser and by hand: header keys, offsets and data in order.
TEST(Safetensors, WriterRoundTripsAndAlignsData) {
  std::mt19937_64 rng(fresh_seed());
  TensorToWrite a{"z.first", StDType::U32, {3, 2}, Bytes(24)}, b{"a.second", StDType::BF16, {5}, Bytes(10)};
  for (auto* t : {&a, &b})
    for (auto& x : t->data) x = std::byte(rng());
  const Bytes bytes = safetensors_bytes({&a, &b}, {{"format", "mlx"}});
  std::uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | std::uint64_t(bytes[std::size_t(i)]);
  EXPECT_EQ((8 + len) % 8, 0u) << "data start not 8-byte aligned";
  const SafetensorsHeader h = parse_safetensors_header(bytes, "w");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "z.first");  // data in the order given
  EXPECT_EQ(std::memcmp(bytes.data() + h.data_offset, a.data.data(), 24), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + h.data_offset + 24, b.data.data(), 10), 0);
  EXPECT_EQ(h.metadata.at("format"), "mlx");
  EXPECT_EQ(safetensors_bytes({&a, &b}, {{"format", "mlx"}}), bytes) << "writer is not deterministic";
  b.data.pop_back();
  EXPECT_THROW(safetensors_bytes({&a, &b}, {}), CheckpointError);
}

TEST(Safetensors, MappedFileViewsTheBytes) {
  const auto path = std::filesystem::temp_directory_path() / ("exactq-st-" + std::to_string(fresh_seed()) + ".safetensors");
  const Bytes f = file_of(kValid, 32);
  write_file(path.string(), f);
  {
    const SafetensorsFile st(path.string());
    const auto d = st.data(*st.header().find("b.scales"));
    ASSERT_EQ(d.size(), 8u);
    EXPECT_EQ(std::memcmp(d.data(), f.data() + 8 + kValid.size() + 24, 8), 0);
  }
  std::filesystem::remove(path);
  EXPECT_THROW(SafetensorsFile(path.string()), CheckpointError);
}

}  // namespace
}  // namespace exactq::test
