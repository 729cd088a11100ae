// qmv_mma's fragment layout (include/exactq/mma_layout.h):
//  * every code lands where qmv_mma's lane (g, t) loads it: read back from the documented byte
//    places ([task][round][half][piece][lane][16 B]) and compared with MLX's codes read by the
//    packing rule (unpack_code), code by code, not through the layout's own index functions;
//  * every scale and bias lands in its lane's word ([task][round][g][group][half]);
//  * padding rows are zero, and the conversion back restores every byte;
//  * the CPU qmv_mma reference gives the same bytes for both layouts, and the other kernels
//    refuse the fragment layout; bad shapes are refused with the offending value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "order/qmv_mma.h"
#include "exactq/mma_layout.h"
#include "exactq/qmv.h"
#include "exactq/quantize.h"
#include "test_util.h"

namespace exactq::test {
namespace {

QuantizedMatrix random_matrix(std::int64_t n, std::int64_t k, int bits, int group, DType dtype, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> w(std::size_t(n * k));
  for (auto& v : w) v = d(rng);
  return quantize(w, n, k, bits, group, dtype);
}

std::uint16_t half_at(const std::vector<std::byte>& params, std::int64_t element) {
  std::uint16_t h;
  std::memcpy(&h, params.data() + 2 * element, 2);
  return h;
}

// qmv_mma's K split (order.h): whole, non-empty segments of rounds that cover K in order; a split
// only where tasks are few, and as deep as the target and the minimum segment allow. Random
// shapes, every format qmv_mma serves.
TEST(QmvMmaSplit, SegmentsCoverKInWholeRoundsAndSplitOnlyWhereTasksAreFew) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> n_dist(1, 40000), rounds_dist(1, 200);
  int split_seen = 0, deepest = 1;
  for (int trial = 0; trial < 2000; ++trial)
    for (int bits : kSupportedBits)
      for (int group : {32, 64, 128}) {
        const std::int64_t n = n_dist(rng), rounds = rounds_dist(rng);
        const std::int64_t k = rounds * mma_layout::round_values(bits, group);
        const int parts = order::mma_k_parts(n, k, bits, group);
        SCOPED_TRACE(std::to_string(bits) + "-bit g" + std::to_string(group) + " " + std::to_string(n) + "x" + std::to_string(k) + " parts " + std::to_string(parts));
        ASSERT_TRUE(parts == 1 || parts == 2 || parts == 4 || parts == 8);
        const std::int64_t tasks = (n + 15) / 16;
        auto allowed = [&](int p) { return tasks * (p / 2) < order::kMmaTargetTasks && rounds >= std::int64_t(p) * order::kMmaMinSegmentRounds; };
        if (parts > 1) {
          EXPECT_TRUE(allowed(parts));
          ++split_seen;
        }
        if (parts < order::kMmaMaxParts) {
          EXPECT_FALSE(allowed(2 * parts)) << "could split deeper";
        }
        deepest = std::max(deepest, parts);
        ASSERT_EQ(order::mma_segment_begin(0, parts, int(rounds)), 0);
        ASSERT_EQ(order::mma_segment_begin(parts, parts, int(rounds)), rounds);
        for (int p = 0; p < parts; ++p) {
          const int length = order::mma_segment_begin(p + 1, parts, int(rounds)) - order::mma_segment_begin(p, parts, int(rounds));
          EXPECT_GE(length, parts > 1 ? order::kMmaMinSegmentRounds : 1);
          EXPECT_LE(length, (rounds + parts - 1) / parts);  // balanced: within one round of each other
        }
      }
  EXPECT_GT(split_seen, 0);
  EXPECT_EQ(deepest, order::kMmaMaxParts);
}

// Code m (0..7) of lane t's eight codes of chunk c for half h, decoded from the lane's round
// words as the header's comment documents it, written out here rather than through its
// functions: 8 bits, byte m of words 8h + 2c, 8h + 2c + 1; 2-6 bits, the planes [2], [2, 1], [4],
// [4, 1], [4, 2], plane p of width w taking 2w words per half after the earlier planes' 4w,
// with code 8t + i + 4e's field at bit 16e + w (4 (c mod 4/w) + i) of word c w / 4 of its half.
std::uint32_t documented_code(const std::vector<std::uint32_t>& words, int bits, int h, int c, int m) {
  if (bits == 8) return (words[std::size_t(8 * h + 2 * c + m / 4)] >> (8 * (m % 4))) & 0xffu;
  const int i = m % 4, e = m / 4;
  const int widths[2] = {bits >= 4 ? 4 : 2, bits - (bits >= 4 ? 4 : 2)};
  std::uint32_t code = 0;
  int base = 0, offset = 0;
  for (int width : widths) {
    if (width == 0) break;
    const std::uint32_t word = words[std::size_t(base + h * 2 * width + c * width / 4)];
    const int bit = 16 * e + width * (4 * (c % (4 / width)) + i);
    code |= ((word >> bit) & ((1u << width) - 1u)) << offset;
    base += 4 * width, offset += width;
  }
  return code;
}

TEST(MmaLayout, CodesAndParametersLandWhereTheLanesLoadThem) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  struct Shape { std::int64_t n, k; };
  for (int bits : kSupportedBits)
    for (int group : {32, 64, 128})
      for (Shape s : {Shape{16, 256}, Shape{37, 768}, Shape{5, 33 * 128}, Shape{21, 33 * 256}}) {
        // A round: 8 chunks (32 * bits bytes of a row) at 2-6 bits, 4 chunks (128 bytes) at 8.
        const int chunks = bits == 8 ? 4 : 8, round_values = 32 * chunks, round_row_bytes = chunks * 4 * bits;
        if (s.k % round_values != 0) continue;
        SCOPED_TRACE(std::to_string(bits) + "-bit g" + std::to_string(group) + " " + std::to_string(s.n) + "x" +
                     std::to_string(s.k));
        const QuantizedMatrix w = random_matrix(s.n, s.k, bits, group, DType::bf16, seed + bits + group + s.n);
        const QuantizedMatrix f = to_mma_fragments(w.view());
        ASSERT_EQ(f.layout, WeightLayout::mma_fragments);
        EXPECT_NO_THROW(f.view().validate());
        const std::int64_t tasks = (s.n + 15) / 16, rounds = s.k / round_values, groups = s.k / group;
        const int pieces = 16 * round_row_bytes / 512, groups_per_round = round_values / group;
        ASSERT_EQ(pieces, mma_layout::lane_pieces(bits, group));
        ASSERT_EQ(f.packed.size(), std::size_t(tasks * 16 * s.k * bits / 8));
        std::int64_t wrong_codes = 0, wrong_pairs = 0, wrong_params = 0, nonzero_padding = 0;
        for (std::int64_t task = 0; task < tasks; ++task)
          for (std::int64_t j = 0; j < rounds; ++j)
            for (int lane = 0; lane < 32; ++lane) {
              // The lane's words of this round, in load order: [piece][lane][16 B].
              std::vector<std::uint32_t> words(std::size_t(4 * pieces));
              for (int p = 0; p < pieces; ++p)
                std::memcpy(&words[std::size_t(4 * p)], f.packed.data() + ((task * rounds + j) * pieces + p) * 512 + lane * 16, 16);
              for (int h = 0; h < 2; ++h) {
                const int g = lane / 4, t = lane % 4;
                const std::int64_t row = task * 16 + g + 8 * h;
                // What the lane feeds the mma, chunk by chunk of the round: codes 8t .. 8t+7 of the chunk.
                for (int c = 0; c < chunks; ++c) {
                  std::uint32_t codes[8];
                  for (int m = 0; m < 8; ++m) {
                    codes[m] = documented_code(words, bits, h, c, m);
                    if (row >= s.n) {
                      nonzero_padding += codes[m] != 0;
                      continue;
                    }
                    const std::int64_t kk = (j * chunks + c) * 32 + 8 * t + m;
                    wrong_codes += codes[m] != unpack_code(w.packed.data() + row * w.view().row_bytes(), kk, bits);
                  }
                  if (!mma_layout::planar(bits)) continue;
                  // The kernel's pairs (planar_pairs in src/ops/cuda/mma_common.cuh): per plane its
                  // word shifted and masked, OR-ed; codes i and i + 4 in the two halves.
                  for (int i = 0; i < 4; ++i) {
                    std::uint32_t pair = 0;
                    for (int p = 0; p < mma_layout::plane_count(bits); ++p)
                      pair |= mma_layout::shifted(words[std::size_t(mma_layout::plane_word(bits, p, h, c))],
                                                  mma_layout::plane_shift(bits, p, c, i)) &
                              mma_layout::plane_mask(bits, p);
                    wrong_pairs += pair != (codes[i] | codes[i + 4] << 16);
                  }
                }
                if (t != 0) continue;
                for (int i = 0; i < groups_per_round; ++i) {
                  const std::int64_t at = (((task * rounds + j) * 8 + g) * groups_per_round + i) * 2 + h;
                  if (row >= s.n) {
                    nonzero_padding += half_at(f.scales, at) != 0 || half_at(f.biases, at) != 0;
                    continue;
                  }
                  const std::int64_t mlx = row * groups + j * groups_per_round + i;
                  wrong_params += half_at(f.scales, at) != half_at(w.scales, mlx);
                  wrong_params += half_at(f.biases, at) != half_at(w.biases, mlx);
                }
              }
            }
        EXPECT_EQ(wrong_codes, 0);
        EXPECT_EQ(wrong_pairs, 0);
        EXPECT_EQ(wrong_params, 0);
        EXPECT_EQ(nonzero_padding, 0);
        const QuantizedMatrix back = to_mlx_layout(f.view());
        EXPECT_EQ(back.layout, WeightLayout::mlx);
        EXPECT_TRUE(back.packed == w.packed && back.scales == w.scales && back.biases == w.biases) << "round trip";
      }
}

// A deliberate slip in the decoding (plane 1's field one bit off) must be seen: the check above
// can fail.
TEST(MmaLayout, DocumentedDecodingDetectsAMisplacedPlane) {
  const QuantizedMatrix w = random_matrix(16, 256, 3, 64, DType::bf16, fresh_seed());
  const QuantizedMatrix f = to_mma_fragments(w.view());
  std::vector<std::uint32_t> words(12);
  for (int p = 0; p < 3; ++p) std::memcpy(&words[std::size_t(4 * p)], f.packed.data() + p * 512, 16);  // lane 0, round 0
  std::int64_t wrong = 0;
  for (int c = 0; c < 8; ++c)
    for (int m = 0; m < 8; ++m) {
      const std::uint32_t code = unpack_code(w.packed.data(), c * 32 + m, 3);
      const int bit = 16 * (m / 4) + (4 * (c % 4) + m % 4);
      // The slip reads plane 1 one bit too high. For the field at bit 31 that bit lies past the
      // 32-bit word and reads as 0: the shift is done in 64 bits, because shifting a 32-bit value
      // by 32 is undefined behaviour.
      const std::uint32_t above = std::uint32_t((std::uint64_t(words[8 + c / 4]) >> (bit + 1)) & 1u);
      const std::uint32_t slipped = (documented_code(words, 3, 0, c, m) & 3u) | above << 2;
      EXPECT_EQ(documented_code(words, 3, 0, c, m), code);
      wrong += slipped != code;
    }
  EXPECT_GT(wrong, 0);
}

TEST(MmaLayout, CpuReferenceGivesTheSameBytesAndOtherKernelsRefuse) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  for (int bits : kSupportedBits)
  for (DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::to_string(bits) + "-bit " + std::string(to_string(dtype)));
    const std::int64_t n = 21, k = 512, m = 3;
    const QuantizedMatrix w = random_matrix(n, k, bits, 64, dtype, seed + bits + int(dtype));
    const QuantizedMatrix f = to_mma_fragments(w.view());
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<std::byte> x(std::size_t(m * k) * dtype_size(dtype)), y1(std::size_t(m * n) * dtype_size(dtype)), y2(y1.size());
    for (std::int64_t i = 0; i < m * k; ++i) store_f32(x.data(), std::size_t(i), dtype, d(rng));
    cpu::qmv(Kernel::qmv_mma, w.view(), x, m, y1);
    cpu::qmv(Kernel::qmv_mma, f.view(), x, m, y2);
    EXPECT_EQ(y1, y2);
    // Control: the fragment matrix with every code inverted (q -> 2^bits - 1 - q) reads other
    // weights, so the comparison above could have failed. (One inverted byte was not enough: at
    // 8 bits it is one code, whose change can fall below a bf16 output's last bit.)
    QuantizedMatrix f_changed = f;
    for (auto& byte : f_changed.packed) byte ^= 0xFFu;
    std::vector<std::byte> y3(y1.size());
    cpu::qmv(Kernel::qmv_mma, f_changed.view(), x, m, y3);
    EXPECT_NE(y1, y3);
    for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide})
      EXPECT_THROW(cpu::qmv(kernel, f.view(), x, m, y2), std::invalid_argument) << to_string(kernel);
  }
}

TEST(MmaLayout, RefusesWhatItCannotLayOut) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  const QuantizedMatrix three = QuantizedMatrix::zeros(16, 384, 3, 64, DType::bf16);  // 384 is not a multiple of 256
  EXPECT_NE(message([&] { to_mma_fragments(three.view()); }).find("K = 384"), std::string::npos);
  const QuantizedMatrix eight = QuantizedMatrix::zeros(16, 384, 8, 64, DType::bf16);  // at 8 bits it is (of 128)
  EXPECT_NO_THROW(to_mma_fragments(eight.view()));
  const QuantizedMatrix odd_k = QuantizedMatrix::zeros(16, 192, 4, 64, DType::bf16);  // 192 is not a multiple of 256
  EXPECT_NE(message([&] { to_mma_fragments(odd_k.view()); }).find("K = 192"), std::string::npos);
  const QuantizedMatrix ok = QuantizedMatrix::zeros(17, 256, 4, 64, DType::bf16);
  const QuantizedMatrix f = to_mma_fragments(ok.view());
  EXPECT_NO_THROW(f.view().validate());  // control
  QuantizedMatrixView cut = f.view();
  cut.packed = cut.packed.subspan(0, std::size_t(17 * ok.view().row_bytes()));  // missing the padding rows
  EXPECT_NE(message([&] { cut.validate(); }).find("rounded up to 16"), std::string::npos);
  EXPECT_NE(message([&] { to_mma_fragments(f.view()); }).find("MLX"), std::string::npos);  // already converted
  EXPECT_NE(message([&] { to_mlx_layout(ok.view()); }).find("fragment"), std::string::npos);
}

}  // namespace
}  // namespace exactq::test
