// The MLX packing rule and the matrix view (include/exactq/format.h):
//  * pack_code / unpack_code / unpack_chunk against a bit-by-bit stream oracle for every bits,
//    and against MLX's uint32-word description for the power-of-two widths;
//  * chunk geometry;
//  * QuantizedMatrixView::validate and validate_shape: each error names the offending value.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/dispatch.h"
#include "exactq/format.h"
#include "test_util.h"

namespace exactq::test {
namespace {

constexpr int kBits[] = {2, 3, 4, 5, 6, 8};

TEST(Format, SupportedValues) {
  for (int b = -1; b <= 33; ++b) EXPECT_EQ(is_supported_bits(b), b == 2 || b == 3 || b == 4 || b == 5 || b == 6 || b == 8) << b;
  for (int g = -1; g <= 300; ++g) EXPECT_EQ(is_supported_group(g), g == 32 || g == 64 || g == 128) << g;
  for (int b : kSupportedBits) EXPECT_TRUE(is_supported_bits(b));
  for (int g : kSupportedGroups) EXPECT_TRUE(is_supported_group(g));
}

TEST(Format, ChunkGeometry) {
  EXPECT_EQ(kChunkValues, 32);
  for (int b : kBits) {
    EXPECT_EQ(chunk_bytes(b), 4 * b) << b;  // 32 codes * b bits / 8
    EXPECT_EQ(packed_row_bytes(32, b), chunk_bytes(b));
    EXPECT_EQ(packed_row_bytes(3840, b), 3840 / 32 * chunk_bytes(b));
  }
}

// Random codes for one row of k values.
std::vector<std::uint32_t> random_codes(std::int64_t k, int bits, std::mt19937_64& rng) {
  std::vector<std::uint32_t> c(static_cast<std::size_t>(k));
  for (auto& v : c) v = std::uint32_t(rng()) & ((1u << bits) - 1u);
  return c;
}

TEST(Format, PackAndUnpackMatchBitStreamOracle) {
  for (std::uint64_t seed : seeds_with_fresh({7, 8})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    std::int64_t msb_first_differs = 0, mutation_differs = 0;
    for (int bits : kBits) {
      SCOPED_TRACE("bits " + std::to_string(bits));
      for (int rep = 0; rep < 20; ++rep) {
        const std::int64_t k = 32 * (1 + std::int64_t(rng() % 48));
        const std::int64_t bytes = k * bits / 8;
        const std::vector<std::uint32_t> codes = random_codes(k, bits, rng);

        std::vector<std::uint8_t> want(std::size_t(bytes), 0);
        for (std::int64_t i = 0; i < k; ++i) ref_pack(want.data(), i, bits, codes[std::size_t(i)]);

        // The library's writer, into a zeroed row followed by guard bytes that must stay 0.
        std::vector<std::uint8_t> got(std::size_t(bytes) + 8, 0);
        for (std::int64_t i = 0; i < k; ++i) pack_code(got.data(), i, bits, codes[std::size_t(i)]);
        for (std::size_t g = std::size_t(bytes); g < got.size(); ++g) EXPECT_EQ(got[g], 0) << "write past the row";
        got.resize(std::size_t(bytes));
        EXPECT_EQ(got, want);

        // Readers: every code, and every 32-code chunk.
        std::int64_t bad = 0;
        for (std::int64_t i = 0; i < k; ++i) bad += unpack_code(want.data(), i, bits) != codes[std::size_t(i)];
        for (std::int64_t c = 0; c < k / 32; ++c) {
          std::uint8_t chunk[kChunkValues];
          unpack_chunk(want.data() + c * chunk_bytes(bits), bits, chunk);
          for (int i = 0; i < kChunkValues; ++i) bad += chunk[i] != codes[std::size_t(c * 32 + i)];
        }
        EXPECT_EQ(bad, 0);

        // Negative controls: an MSB-first bit order, and the same codes with one code changed,
        // must both produce other bytes than the library.
        std::vector<std::uint8_t> msb(std::size_t(bytes), 0);
        for (std::int64_t i = 0; i < k; ++i)
          for (int t = 0; t < bits; ++t) {
            const std::int64_t j = i * bits + t;
            msb[std::size_t(j / 8)] |= std::uint8_t(((codes[std::size_t(i)] >> t) & 1u) << (7 - j % 8));
          }
        msb_first_differs += msb != got;
        std::vector<std::uint32_t> changed = codes;
        const std::size_t at = std::size_t(rng() % std::uint64_t(k));
        changed[at] ^= 1u + std::uint32_t(rng() % ((1u << bits) - 1u));  // a different valid code
        std::vector<std::uint8_t> other(std::size_t(bytes), 0);
        for (std::int64_t i = 0; i < k; ++i) pack_code(other.data(), i, bits, changed[std::size_t(i)]);
        mutation_differs += other != want;
      }
    }
    EXPECT_EQ(msb_first_differs, 6 * 20);
    EXPECT_EQ(mutation_differs, 6 * 20);
  }
}

// The readers on arbitrary bytes (every byte pattern is a valid code sequence).
TEST(Format, UnpackArbitraryBytes) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int bits : kBits) {
    // An odd number of chunks, and enough codes that the coverage control below cannot miss by
    // chance: at 32 * 37 codes an 8-bit extreme is absent with probability 1 % per run (seen in
    // CI); at 32 * 297 it is 1e-16.
    const std::int64_t k = 32 * 297;
    std::vector<std::uint8_t> row(std::size_t(k * bits / 8));
    for (auto& b : row) b = std::uint8_t(rng());
    std::int64_t bad = 0;
    std::vector<int> histogram(1u << bits, 0);
    for (std::int64_t i = 0; i < k; ++i) {
      const std::uint32_t want = ref_unpack(row.data(), i, bits);
      ++histogram[want];
      bad += unpack_code(row.data(), i, bits) != want;
    }
    for (std::int64_t c = 0; c < k / 32; ++c) {
      std::uint8_t chunk[kChunkValues];
      unpack_chunk(row.data() + c * chunk_bytes(bits), bits, chunk);
      for (int i = 0; i < 32; ++i) bad += chunk[i] != ref_unpack(row.data(), c * 32 + i, bits);
    }
    EXPECT_EQ(bad, 0) << "bits " << bits;
    // Coverage control: the extreme codes occur (a reader that drops the top bit would fail).
    EXPECT_GT(histogram[0], 0);
    EXPECT_GT(histogram[(1u << bits) - 1], 0);
    // Negative control: reading the stream with its bytes in the wrong order is caught.
    std::int64_t swapped_differs = 0;
    std::vector<std::uint8_t> swapped(row.rbegin(), row.rend());
    for (std::int64_t i = 0; i < k; ++i) swapped_differs += unpack_code(swapped.data(), i, bits) != ref_unpack(row.data(), i, bits);
    EXPECT_GT(swapped_differs, k / 2);
  }
}

// MLX's own description for power-of-two widths (reference §1.2): element k sits in uint32 word
// k/(32/b) at bit offset b*(k mod 32/b), words stored little-endian.
TEST(Format, PowerOfTwoWidthsMatchMlxWordLayout) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int bits : {2, 4, 8}) {
    const std::int64_t k = 32 * 11;
    const std::vector<std::uint32_t> codes = random_codes(k, bits, rng);
    const int per_word = 32 / bits;
    std::vector<std::uint32_t> words(std::size_t(k / per_word), 0);
    for (std::int64_t i = 0; i < k; ++i)
      words[std::size_t(i / per_word)] |= codes[std::size_t(i)] << (bits * (i % per_word));
    std::vector<std::uint8_t> want(words.size() * 4);
    for (std::size_t w = 0; w < words.size(); ++w)
      for (int b = 0; b < 4; ++b) want[w * 4 + std::size_t(b)] = std::uint8_t(words[w] >> (8 * b));
    std::vector<std::uint8_t> got(want.size(), 0);
    for (std::int64_t i = 0; i < k; ++i) pack_code(got.data(), i, bits, codes[std::size_t(i)]);
    EXPECT_EQ(got, want) << "bits " << bits;
    // Negative control: big-endian words (another layout) give other bytes.
    std::vector<std::uint8_t> big_endian(want.size());
    for (std::size_t w = 0; w < words.size(); ++w)
      for (int b = 0; b < 4; ++b) big_endian[w * 4 + std::size_t(b)] = std::uint8_t(words[w] >> (8 * (3 - b)));
    EXPECT_NE(got, big_endian) << "bits " << bits;
  }
}

// Hand-derived bytes of the odd widths, from the per-byte table of reference §1.2.
TEST(Format, OddWidthByteTable) {
  auto pack = [](int bits, std::vector<std::uint32_t> codes) {
    std::vector<std::uint8_t> row(codes.size() * std::size_t(bits) / 8 + 1, 0);
    for (std::size_t i = 0; i < codes.size(); ++i) pack_code(row.data(), std::int64_t(i), bits, codes[i]);
    return row;
  };
  // 3-bit: e2 = b0[6:8] (low 2 bits) + b1[0] (high bit). e2 = 0b101 -> b0 = 0b01000000, b1 = 0b1.
  EXPECT_EQ(pack(3, {0, 0, 5, 0, 0, 0, 0, 0}), (std::vector<std::uint8_t>{0x40, 0x01, 0x00, 0x00}));
  // 3-bit: e5 = b1[7] (low bit) + b2[0:2]. e5 = 0b111 -> b1 = 0x80, b2 = 0x03.
  EXPECT_EQ(pack(3, {0, 0, 0, 0, 0, 7, 0, 0}), (std::vector<std::uint8_t>{0x00, 0x80, 0x03, 0x00}));
  // 5-bit: e3 = b1[7] (low bit) + b2[0:4]. e3 = 0b10011 -> b1 = 0x80, b2 = 0b1001.
  EXPECT_EQ(pack(5, {0, 0, 0, 19, 0, 0, 0, 0}), (std::vector<std::uint8_t>{0, 0x80, 0x09, 0, 0, 0}));
  // 6-bit: e1 = b0[6:8] (low 2) + b1[0:4]. e1 = 0b110110 -> b0 = 0x80, b1 = 0b1101.
  EXPECT_EQ(pack(6, {0, 54, 0, 0}), (std::vector<std::uint8_t>{0x80, 0x0d, 0x00, 0x00}));
  // Readers on the same bytes.
  const std::uint8_t six[] = {0x80, 0x0d, 0x00, 0x00};
  EXPECT_EQ(unpack_code(six, 1, 6), 54u);
  EXPECT_EQ(unpack_code(six, 0, 6), 0u);
}

// ---- the view and its validation -----------------------------------------------------------------

struct Buffers {
  std::vector<std::uint8_t> packed;
  std::vector<std::byte> scales, biases;
  QuantizedMatrixView view;
};

Buffers valid_buffers(std::int64_t n, std::int64_t k, int bits, int group, DType dtype) {
  Buffers b;
  b.packed.resize(std::size_t(n * k * bits / 8));
  b.scales.resize(std::size_t(n * (k / group)) * ref_size(dtype));
  b.biases.resize(b.scales.size());
  b.view = {b.packed, b.scales, b.biases, n, k, bits, group, dtype};
  return b;
}

TEST(Format, ViewGeometry) {
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (int bits : kBits) {
      Buffers b = valid_buffers(7, 384, bits, 128, t);
      EXPECT_NO_THROW(b.view.validate());
      EXPECT_EQ(b.view.groups_per_row(), 3);
      EXPECT_EQ(b.view.row_bytes(), 384 * bits / 8);
      EXPECT_EQ(b.view.weight_bytes(), std::int64_t(b.packed.size() + b.scales.size() + b.biases.size()));
    }
}

TEST(Format, ValidateNamesTheOffendingValue) {
  // Control: a valid view passes for every supported combination.
  for (int bits : kBits)
    for (int group : {32, 64, 128})
      for (DType t : {DType::f32, DType::f16, DType::bf16}) EXPECT_NO_THROW(valid_buffers(3, 384, bits, group, t).view.validate());

  // A valid 3x384 4-bit g64 bf16 view, changed by `mutate`; the buffers live on the heap so the
  // view's spans stay valid inside the returned call.
  auto with = [](auto mutate) {
    auto b = std::make_shared<Buffers>(valid_buffers(3, 384, 4, 64, DType::bf16));
    mutate(*b);
    return [b] { b->view.validate(); };
  };
  for (int bad_bits : {0, 1, 7, 9, 16, -4})
    expect_invalid(with([&](Buffers& b) { b.view.bits = bad_bits; }), "bits = " + std::to_string(bad_bits));
  for (int bad_group : {0, 16, 48, 96, 256, -64})
    expect_invalid(with([&](Buffers& b) { b.view.group = bad_group; }), "group = " + std::to_string(bad_group));
  expect_invalid(with([](Buffers& b) { b.view.k = 100; }), "K = 100");
  expect_invalid(with([](Buffers& b) { b.view.k = 96; }), "K = 96");  // a multiple of 32, not of 64
  expect_invalid(with([](Buffers& b) { b.view.k = 0; }), "K = 0");
  expect_invalid(with([](Buffers& b) { b.view.k = -64; }), "K = -64");
  expect_invalid(with([](Buffers& b) { b.view.n = 0; }), "N = 0");
  expect_invalid(with([](Buffers& b) { b.view.n = -5; }), "N = -5");
  expect_invalid(with([](Buffers& b) { b.view.n = std::int64_t(1) << 31; }), "N = 2147483648");

  // Buffer sizes: 3 rows * 384 * 4 / 8 = 576 packed bytes; 3 * 6 groups * 2 bytes = 36.
  expect_invalid(with([](Buffers& b) { b.view.packed = std::span<const std::uint8_t>(b.packed).first(575); }), "575");
  expect_invalid(with([](Buffers& b) { b.packed.resize(577); b.view.packed = b.packed; }), "577");
  expect_invalid(with([](Buffers& b) { b.view.scales = std::span<const std::byte>(b.scales).first(35); }), "scales have 35");
  expect_invalid(with([](Buffers& b) { b.view.biases = std::span<const std::byte>(b.biases).first(34); }), "biases have 34");
  // The dtype enters the expected size: bf16-sized parameters are wrong for an f32 view.
  expect_invalid(with([](Buffers& b) { b.view.dtype = DType::f32; }), "scales have 36");
  // A different N changes every expected size; the packed buffer is checked first.
  expect_invalid(with([](Buffers& b) { b.view.n = 4; }), "576");

  // Null spans.
  expect_invalid(with([](Buffers& b) { b.view.packed = {}; }), "packed weights are null");
  expect_invalid(with([](Buffers& b) { b.view.scales = {}; }), "scales are null");
  expect_invalid(with([](Buffers& b) { b.view.biases = {}; }), "biases are null");
}

TEST(Format, ValidateShape) {
  EXPECT_NO_THROW(validate_shape(1, 32, 2, 32));
  EXPECT_NO_THROW(validate_shape(20000, 3840, 8, 128));
  expect_invalid([] { validate_shape(1, 100, 4, 64); }, "K = 100");
  expect_invalid([] { validate_shape(0, 64, 4, 64); }, "N = 0");
  expect_invalid([] { validate_shape(1, 64, 7, 64); }, "bits = 7");
  expect_invalid([] { validate_shape(1, 64, 4, 63); }, "group = 63");
  expect_invalid([] { validate_shape(1, std::int64_t(1) << 31, 4, 64); }, "K = 2147483648");
}

}  // namespace
}  // namespace exactq::test

// The run-time to template dispatch used by every kernel launcher (src/support/dispatch.h).

TEST(Dispatch, CallsTheMatchingInstantiationOnlyAndRejectsOthers) {
  for (int v : {2, 3, 4, 5, 6, 8}) {
    int seen = 0, calls = 0;
    exactq::dispatch_value<2, 3, 4, 5, 6, 8>(v, "bits", [&]<int V>() {
      seen = V;
      ++calls;
    });
    EXPECT_EQ(seen, v);
    EXPECT_EQ(calls, 1);
  }
  for (int bad : {0, 1, 7, 9, -4}) {
    int calls = 0;
    try {
      exactq::dispatch_value<2, 3, 4, 5, 6, 8>(bad, "bits", [&]<int>() { ++calls; });
      ADD_FAILURE() << "no exception for " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("bits = " + std::to_string(bad)), std::string::npos) << e.what();
    }
    EXPECT_EQ(calls, 0);
  }
}
