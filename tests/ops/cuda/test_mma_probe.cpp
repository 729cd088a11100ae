// qmv_mma's width invariance (docs/design.md §5b) rests on this: a column of an mma.sync.m16n8k16 result depends only on its own
// column of B, so the batch on the n dimension cannot change one vector's bits. Checked for bf16
// (already seen on the H200, gpu-anchors.md) and for f16, on random data, for each of the 8
// columns in turn (trial t probes column t % 8; qmv_mma puts vectors in every column). The
// negative control flips the sign of the probed column's largest element, and that column's
// output must then move. (Flipping one ulp of a random element would not do: a small element's
// ulp can vanish below the last bit of a 4096-term sum, and fresh seeds do draw such cases.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <span>
#include <random>
#include <vector>

#include "exactq/cuda.h"
#include "exactq/dtype.h"
#include "mma_probe.h"

namespace exactq {
namespace {

std::uint16_t to16(float v, bool bf16) { return bf16 ? f32_to_bf16(v) : f32_to_f16(v); }

TEST(MmaProbe, OutputColumnIgnoresOtherColumnsOfB) {
  if (!cuda::device_available()) {
    GTEST_SKIP() << "no usable CUDA device on this machine";
  }
  std::random_device rd;
  const std::uint64_t seed = (std::uint64_t(rd()) << 32) | rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> code(0, 15);
  constexpr int k = 4096;
  for (bool bf16 : {true, false}) {
    SCOPED_TRACE(bf16 ? "bf16" : "f16");
    for (int trial = 0; trial < 20; ++trial) {
      const bool integer_a = trial % 2 == 0;  // raw codes, as qmv_mma will feed them
      std::vector<std::uint16_t> a(16 * k), b_alone(8 * k, 0), b_crowded(8 * k), b_nudged;
      for (auto& v : a) v = to16(integer_a ? float(code(rng)) : normal(rng), bf16);
      const float scale = trial % 3 == 0 ? 1000.0f : 1.0f;
      const int column = trial % 8;  // B is stored by column: column j is b[j * k, (j + 1) * k)
      const int first = column * k;
      int largest = first;
      float largest_abs = -1.0f;
      for (int i = first; i < first + k; ++i) {  // the probed column; the others stay 0
        const float v = scale * normal(rng);
        b_alone[std::size_t(i)] = to16(v, bf16);
        if (std::fabs(v) > largest_abs) largest_abs = std::fabs(v), largest = i;
      }
      for (int i = 0; i < 8 * k; ++i)
        b_crowded[std::size_t(i)] = i >= first && i < first + k ? b_alone[std::size_t(i)] : to16(scale * normal(rng), bf16);
      b_nudged = b_alone;
      b_nudged[std::size_t(largest)] ^= 0x8000u;  // the probed column's largest element changes sign

      cuda::DeviceBuffer da(a.size() * 2), db(b_alone.size() * 2), dd(16 * 8 * 4);
      da.upload(std::as_bytes(std::span(a)));
      auto run = [&](const std::vector<std::uint16_t>& b) {
        db.upload(std::as_bytes(std::span(b)));
        EXPECT_EQ(exactq::test::run_mma_probe(bf16, reinterpret_cast<const std::uint16_t*>(da.bytes().data()),
                                              reinterpret_cast<const std::uint16_t*>(db.bytes().data()), k,
                                              reinterpret_cast<float*>(dd.bytes().data())),
                  cudaSuccess);
        std::vector<float> d(16 * 8);
        dd.download(std::as_writable_bytes(std::span(d)));
        std::vector<float> probed(16);
        for (int r = 0; r < 16; ++r) probed[std::size_t(r)] = d[std::size_t(r * 8 + column)];
        return probed;
      };
      const auto alone = run(b_alone), crowded = run(b_crowded), again = run(b_alone), nudged = run(b_nudged);
      EXPECT_EQ(std::memcmp(alone.data(), crowded.data(), 16 * sizeof(float)), 0) << "trial " << trial << " column " << column;
      EXPECT_EQ(std::memcmp(alone.data(), again.data(), 16 * sizeof(float)), 0) << "trial " << trial << " column " << column;
      EXPECT_NE(std::memcmp(alone.data(), nudged.data(), 16 * sizeof(float)), 0)
          << "negative control: changing the probed column itself did not move its output (trial " << trial
          << ", column " << column << ")";
    }
  }
}

}  // namespace
}  // namespace exactq
