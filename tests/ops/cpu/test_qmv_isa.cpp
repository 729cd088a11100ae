// The CPU qmv family's vector levels (cpu::Isa): every level this CPU has gives the scalar
// kernel's bytes, on random shapes (fresh seeds, printed), every bits/group/dtype, odd N, K with a
// partial last block, M = 1..9, tiles of 1..9 vectors, 1 and 2 threads, NaN and infinity in x and
// in the scales. Each identity has a negative control in the same test: the same level run on a
// matrix with one chunk's codes complemented must differ from the scalar bytes of the original.
// Levels this CPU lacks are skipped, saying so. Also: the level's name, and its refusal.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "apps/cli_runner.h"
#include "exactq/qmv.h"
#include "test_util.h"

namespace exactq::test {
namespace {

using Bytes = std::vector<std::byte>;

// Sets the level for one scope and puts the previous one back.
struct IsaScope {
  explicit IsaScope(cpu::Isa isa) : previous(cpu::qmv_isa()) { cpu::set_qmv_isa(isa); }
  ~IsaScope() { cpu::set_qmv_isa(previous); }
  cpu::Isa previous;
};

Bytes run(cpu::Isa isa, Kernel kernel, const QuantizedMatrix& w, const Bytes& x, std::int64_t m, const QmvOptions& o) {
  IsaScope scope(isa);
  Bytes y(std::size_t(m * w.n) * ref_size(w.dtype), std::byte{0xA5});
  cpu::qmv(kernel, w.view(), x, m, y, o);
  return y;
}

bool same_bytes(const Bytes& a, const Bytes& b) { return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0; }

// The codes of one chunk of every row complemented (every code q becomes 2^bits - 1 - q). One
// row's change can round away in a bf16 output (seen about once in 300); at least three rows
// make that chance negligible.
QuantizedMatrix with_chunk_complemented(QuantizedMatrix w, std::int64_t chunk) {
  const std::int64_t row_bytes = w.k * w.bits / 8;
  for (std::int64_t row = 0; row < w.n; ++row) {
    std::uint8_t* bytes = w.packed.data() + row * row_bytes + chunk * chunk_bytes(w.bits);
    for (int i = 0; i < chunk_bytes(w.bits); ++i) bytes[i] = std::uint8_t(~bytes[i]);
  }
  return w;
}

// NaN or infinity at a few places of x, and in one scale: the outputs they reach are NaN.
void add_non_finite(Bytes& x, QuantizedMatrix& w, std::mt19937_64& rng) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  const std::size_t values = x.size() / ref_size(w.dtype);
  for (int i = 0; i < 2; ++i) ref_store(x.data(), std::size_t(rng() % values), w.dtype, specials[rng() % 3]);
  ref_store(w.scales.data(), std::size_t(rng() % (w.scales.size() / ref_size(w.dtype))), w.dtype, specials[rng() % 3]);
}

void check_level(cpu::Isa isa) {
  if (!cpu::isa_available(isa)) GTEST_SKIP() << "this CPU lacks " << cpu::to_string(isa) << ": its path is not tested here";
  constexpr int kBits[] = {2, 3, 4, 5, 6, 8};
  constexpr int kGroups[] = {32, 64, 128};
  constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};
  const std::uint64_t seed = fresh_seed();
  std::cout << "[ seed     ] " << cpu::to_string(isa) << ": " << seed_note(seed) << "\n";
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  int cells = 0, controls = 0;
  for (int bits : kBits)
    for (int group : kGroups)
      for (DType dtype : kDtypes)
        for (int repeat = 0; repeat < 2; ++repeat) {
        // N odd; K up to 24 groups, so that K/32 chunks often leave a partial block of 8 or 16.
        const std::int64_t n = 2 * std::int64_t(rng() % 12) + 3;
        const std::int64_t k = group * (1 + std::int64_t(rng() % (3072 / group)));
        const std::int64_t m = 1 + std::int64_t(rng() % 9);
        const bool non_finite = rng() % 4 == 0;
        QuantizedMatrix w = random_matrix(n, k, bits, group, dtype, rng);
        Bytes x = random_activations(m, k, dtype, rng);
        if (non_finite) add_non_finite(x, w, rng);
        const std::string cell = std::to_string(bits) + "-bit g" + std::to_string(group) + " " + dtype_name(dtype) +
                                 " " + std::to_string(n) + "x" + std::to_string(k) + " M=" + std::to_string(m) +
                                 (non_finite ? " with NaN/inf" : "");
        SCOPED_TRACE(cell);
        for (int threads : {1, 2}) {
          QmvOptions o;
          o.threads = threads;
          o.streamed_max_vectors = 1 + int(rng() % 9);
          for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed}) {
            const Bytes scalar = run(cpu::Isa::scalar, kernel, w, x, m, o);
            const Bytes vector = run(isa, kernel, w, x, m, o);
            EXPECT_TRUE(same_bytes(scalar, vector))
                << to_string(kernel) << " threads " << threads << " V " << o.streamed_max_vectors << ": "
                << differing_bytes(scalar, vector) << " bytes differ";
            ++cells;
            if (non_finite) continue;
            // The control: one chunk's codes changed must change the level's bytes.
            const std::int64_t chunk = std::int64_t(rng() % std::uint64_t(k / 32));
            const Bytes changed = run(isa, kernel, with_chunk_complemented(w, chunk), x, m, o);
            EXPECT_FALSE(same_bytes(scalar, changed)) << to_string(kernel) << ": the control (chunk " << chunk
                                                      << " complemented) left every byte as it was";
            ++controls;
          }
        }
        }
  std::cout << "[ cells    ] " << cpu::to_string(isa) << ": " << cells << " identities, " << controls << " controls\n";
}

TEST(QmvIsa, Avx2EqualsScalarBitwise) { check_level(cpu::Isa::avx2); }
TEST(QmvIsa, Avx512EqualsScalarBitwise) { check_level(cpu::Isa::avx512); }

// A large shape through every level at 4 bits (the fast path), with its control. Large enough
// (7 MB of weights times vectors) that the vector levels start a second worker: the small cells
// above run on one (qmv_simd.cpp, kBytesPerWorker).
TEST(QmvIsa, LargeFourBitShapeEqualsScalarOnEveryLevel) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const QuantizedMatrix w = random_matrix(1201, 3840, 4, 64, DType::bf16, rng);
  const Bytes x = random_activations(3, 3840, DType::bf16, rng);
  QmvOptions o;
  o.threads = 2;
  for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed}) {
    const Bytes scalar = run(cpu::Isa::scalar, kernel, w, x, 3, o);
    for (cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512}) {
      if (!cpu::isa_available(isa)) {
        std::cout << "[ skipped  ] this CPU lacks " << cpu::to_string(isa) << "\n";
        continue;
      }
      EXPECT_TRUE(same_bytes(scalar, run(isa, kernel, w, x, 3, o))) << cpu::to_string(isa) << " " << to_string(kernel);
      EXPECT_FALSE(same_bytes(scalar, run(isa, kernel, with_chunk_complemented(w, 119), x, 3, o)))
          << cpu::to_string(isa) << " " << to_string(kernel) << ": the control changed nothing";
    }
  }
}

TEST(QmvIsa, NamesAndRefusals) {
  for (cpu::Isa isa : {cpu::Isa::scalar, cpu::Isa::avx2, cpu::Isa::avx512}) EXPECT_EQ(cpu::parse_isa(cpu::to_string(isa)), isa);
  EXPECT_TRUE(cpu::isa_available(cpu::Isa::scalar));
  expect_invalid([] { cpu::parse_isa("avx9"); }, "avx9");
  expect_invalid([] { cpu::set_qmv_isa(static_cast<cpu::Isa>(7)); }, "7");
  for (cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512})
    if (!cpu::isa_available(isa)) expect_invalid([isa] { cpu::set_qmv_isa(isa); }, std::string(cpu::to_string(isa)));
}

TEST(QmvIsa, UnknownEnvironmentValueIsExitTwoNamingIt) {
  const Outcome o = run_cli("bench --backend cpu --shapes 64x64 --m 1 --kernels qmv", "EXACTQ_CPU_ISA=avx9000;export EXACTQ_CPU_ISA;");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("avx9000"), std::string::npos) << o.output;
  const Outcome scalar = run_cli("bench --backend cpu --shapes 64x64 --m 1 --kernels qmv", "EXACTQ_CPU_ISA=scalar;export EXACTQ_CPU_ISA;");
  EXPECT_EQ(scalar.exit_code, 0) << scalar.output;
}

}  // namespace
}  // namespace exactq::test
