// The CPU attention on every instruction-set level this CPU has (scalar, AVX2, AVX-512, forced
// with cpu::set_qmv_isa) against the reference, order::attention_row per (row, head), byte for
// byte: random shapes (fresh seeds, printed), head_dim 8..256, GQA groups 1..8 (and 9..12, more
// heads than one call takes), positions at and across chunk boundaries and past 1000, windows 0
// and 1..200, f32/f16/bf16, NaN and infinities in q, k and v, 1 and 2 threads. Each identity has
// a negative control in the same run: the row's own key (or value) changed must change the level's
// bytes.
// And the vector exp (exp_x86.h, through the kernels' weights step) against order::exp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "exactq/qmv.h"
#include "ops/cpu/attention_kernels.h"
#include "ops/cpu/decoder_ops.h"
#include "order/attention.h"
#include "test_util.h"

namespace exactq::test {
namespace {

using Bytes = std::vector<std::byte>;

struct IsaScope {
  explicit IsaScope(cpu::Isa isa) : previous(cpu::qmv_isa()) { cpu::set_qmv_isa(isa); }
  ~IsaScope() { cpu::set_qmv_isa(previous); }
  cpu::Isa previous;
};

std::vector<cpu::Isa> levels() {
  std::vector<cpu::Isa> out;
  for (cpu::Isa isa : {cpu::Isa::scalar, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (cpu::isa_available(isa))
      out.push_back(isa);
    else
      std::cout << "[ skipped  ] this CPU lacks " << cpu::to_string(isa) << ": its path is not tested here\n";
  }
  return out;
}

bool same_bytes(const Bytes& a, const Bytes& b) { return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0; }

struct Cell {
  AttentionShape shape;
  DType t = DType::bf16;
  std::vector<std::int32_t> positions;
  Bytes q, k, v;
};

Bytes reference(const Cell& c) {
  const std::int64_t d = c.shape.head_dim, heads = c.shape.heads, group = heads / c.shape.kv_heads;
  Bytes out(c.q.size());
  float qf[order::kMaxHeadDim], of[order::kMaxHeadDim];
  for (std::size_t r = 0; r < c.positions.size(); ++r)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::size_t base = (r * std::size_t(heads) + std::size_t(h)) * std::size_t(d);
      for (std::int64_t i = 0; i < d; ++i) qf[i] = load_f32(c.q.data(), base + std::size_t(i), c.t);
      const std::size_t off = std::size_t(h / group * d) * ref_size(c.t);
      order::attention_row(qf, c.positions[r], c.k.data() + off, c.v.data() + off, c.t,
                           std::size_t(c.shape.kv_heads * d), {int(d), c.shape.scale, c.shape.window}, of);
      for (std::int64_t i = 0; i < d; ++i) store_f32(out.data(), base + std::size_t(i), c.t, of[i]);
    }
  return out;
}

Bytes fast(const Cell& c, cpu::Isa isa, int threads) {
  IsaScope scope(isa);
  Bytes out(c.q.size(), std::byte{0xA5});
  cpu::attention(c.q.data(), c.k.data(), c.v.data(), std::int64_t(c.positions.size()), c.positions.data(),
                 c.positions.data(), c.shape, c.t, out.data(), threads);
  return out;
}

Cell random_cell(DType t, std::mt19937_64& rng, bool non_finite) {
  static constexpr std::int32_t kEdges[] = {0, 1, 63, 64, 65, 127, 128, 129, 191, 200};
  Cell c;
  c.t = t;
  const std::int64_t kv = 1 + std::int64_t(rng() % 2);
  const std::int64_t group = rng() % 8 == 0 ? 9 + std::int64_t(rng() % 4) : 1 + std::int64_t(rng() % 8);
  const int rows = 1 + int(rng() % 3);
  std::int32_t last = 0;
  for (int r = 0; r < rows; ++r) {
    const std::uint64_t kind = rng() % 4;
    const std::int32_t p = kind == 0 ? 1000 + std::int32_t(rng() % 200)
                           : kind == 1 ? std::int32_t(rng() % 400)
                                       : kEdges[rng() % std::size(kEdges)] + 64 * std::int32_t(rng() % 3);
    c.positions.push_back(p);
    last = std::max(last, p);
  }
  // head_dim 8..256, smaller where the cell is large, so that the scalar reference stays quick.
  std::int64_t d = 8 * (1 + std::int64_t(rng() % 32));
  while (d > 8 && d * kv * group * (last + 1) * rows > (std::int64_t(1) << 22)) d -= 8;
  const std::int64_t window = rng() % 2 ? 0 : 1 + std::int64_t(rng() % 200);
  c.shape = {kv * group, kv, d, order::attention_scale(double(d)), window};
  const std::size_t cache = std::size_t(last + 1 + std::int32_t(rng() % 3)) * std::size_t(kv * d);
  c.k = random_values(cache, t, 1.0f, rng);
  c.v = random_values(cache, t, 1.0f, rng);
  c.q = random_values(std::size_t(rows * kv * group * d), t, 2.0f, rng);
  for (std::size_t i = std::size_t(last + 1) * std::size_t(kv * d); i < cache; ++i) {  // never read
    ref_store(c.k.data(), i, t, std::numeric_limits<float>::quiet_NaN());
    ref_store(c.v.data(), i, t, std::numeric_limits<float>::infinity());
  }
  if (non_finite) {
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
    Bytes* targets[] = {&c.q, &c.k, &c.v};
    for (int n = 0; n < 3; ++n) {
      Bytes& b = *targets[rng() % 3];
      const std::size_t limit = &b == &c.q ? b.size() / ref_size(t) : std::size_t(last + 1) * std::size_t(kv * d);
      ref_store(b.data(), std::size_t(rng() % limit), t, specials[rng() % 3]);
    }
  }
  return c;
}

// Row 0's own key row (position p) replaced, for each kv head, by 4 times the query of the first
// head that reads it: that head's score for it becomes large, its weight near 1, its output moves.
// Where row 0 sees that key alone (p = 0, or a window of 1) its weight is 1 whatever its score:
// its value row changes instead.
Cell with_own_key_changed(Cell c) {
  const std::int64_t d = c.shape.head_dim, group = c.shape.heads / c.shape.kv_heads, p = c.positions[0];
  const bool alone = order::attention_first_visible(p, c.shape.window) == p;
  for (std::int64_t kv = 0; kv < c.shape.kv_heads; ++kv)
    for (std::int64_t i = 0; i < d; ++i) {
      const std::size_t at = std::size_t((p * c.shape.kv_heads + kv) * d + i);
      if (alone)
        ref_store(c.v.data(), at, c.t, -load_f32(c.v.data(), at, c.t) - 1.0f);
      else
        ref_store(c.k.data(), at, c.t, 4.0f * load_f32(c.q.data(), std::size_t(kv * group * d + i), c.t));
    }
  return c;
}

TEST(AttentionIsa, EveryLevelEqualsTheOrderBitwise) {
  const std::uint64_t seed = fresh_seed();
  std::cout << "[ seed     ] " << seed_note(seed) << "\n";
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::vector<cpu::Isa> isas = levels();
  int cells = 0, controls = 0, caught = 0;
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (int repeat = 0; repeat < 14; ++repeat) {
      const bool non_finite = repeat % 4 == 3;
      const Cell c = random_cell(t, rng, non_finite);
      std::string where = std::string(dtype_name(t)) + " d " + std::to_string(c.shape.head_dim) + " heads " +
                          std::to_string(c.shape.heads) + "/" + std::to_string(c.shape.kv_heads) + " window " +
                          std::to_string(c.shape.window) + " positions";
      for (std::int32_t p : c.positions) where += " " + std::to_string(p);
      if (non_finite) where += " with NaN/inf";
      SCOPED_TRACE(where);
      const Bytes want = reference(c);
      const Cell changed = with_own_key_changed(c);
      for (cpu::Isa isa : isas)
        for (int threads : {1, 2}) {
          const Bytes got = fast(c, isa, threads);
          EXPECT_TRUE(same_bytes(want, got)) << cpu::to_string(isa) << " threads " << threads << ": "
                                             << differing_bytes(want, got) << " bytes differ";
          ++cells;
          if (non_finite) continue;
          ++controls;
          caught += !same_bytes(want, fast(changed, isa, threads));
        }
    }
  std::cout << "[ cells    ] " << cells << " identities, " << caught << " of " << controls << " controls caught\n";
  EXPECT_EQ(caught, controls) << "the control (the row's own key changed) changed no byte";
}

std::uint32_t bits(float f) { return bits_from_float(f); }

// weights(s, n, m = 0) is exp(add(s, -0)) = exp(s) for every s: the vector exp on its own.
std::int64_t exp_mismatches(cpu::Isa isa, const std::vector<float>& x, float m) {
  std::vector<float> y = x;
  const cpu::AttentionKernels& k = cpu::attention_kernels(isa);
  for (std::size_t i = 0; i < y.size(); i += 4096) k.weights(y.data() + i, int(std::min<std::size_t>(4096, y.size() - i)), m);
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) bad += bits(y[i]) != bits(order::exp(x[i]));
  return bad;
}

TEST(AttentionIsa, VectorExpEqualsOrderExp) {
  const std::uint64_t seed = fresh_seed();
  std::cout << "[ seed     ] " << seed_note(seed) << "\n";
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::vector<float> x;
  for (float s : {0.0f, 89.0f, -104.0f, 88.72f, -87.33f, -103.97f, 1.0f, 0.34657f, 1e-30f, 0x1p-149f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::min()})
    for (float v : {s, -s, std::nextafter(s, 1e30f), std::nextafter(s, -1e30f)}) x.push_back(v);
  x.push_back(f32_from(0x7fa00001u));  // a signalling NaN
  x.push_back(f32_from(0xffc12345u));
  for (int i = 0; i < (1 << 20); ++i) x.push_back(f32_from(std::uint32_t(rng())));
  std::uniform_real_distribution<float> range(-110.0f, 95.0f);
  for (int i = 0; i < (1 << 20); ++i) x.push_back(range(rng));
  for (std::uint64_t u = rng() % 4099; u < (std::uint64_t(1) << 32); u += 4099) x.push_back(f32_from(std::uint32_t(u)));
  for (cpu::Isa isa : levels()) {
    EXPECT_EQ(exp_mismatches(isa, x, 0.0f), 0) << cpu::to_string(isa) << " over " << x.size() << " inputs";
    // The control: a shift by 2^-10 changes the result for many inputs.
    EXPECT_GT(exp_mismatches(isa, x, 0x1p-10f), std::int64_t(x.size() / 10)) << cpu::to_string(isa);
  }
}

// Every f32 (minutes of CPU): run by hand with --gtest_also_run_disabled_tests.
TEST(AttentionIsa, DISABLED_VectorExpEqualsOrderExpOnEveryF32) {
  std::vector<float> x(std::size_t(1) << 24);
  for (cpu::Isa isa : levels())
    for (std::uint64_t base = 0; base < (std::uint64_t(1) << 32); base += x.size()) {
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = f32_from(std::uint32_t(base + i));
      ASSERT_EQ(exp_mismatches(isa, x, 0.0f), 0) << cpu::to_string(isa) << " from bits " << base;
    }
}

// The gated MLP (silu) on every level against the scalar level, byte for byte: f32 gates over
// special values, random bit patterns and a sweep of every 4099th f32 (up = 1, so y = silu(gate)
// exactly), and random bf16/f16 gates and ups. The control: one gate changed changes the bytes.
Bytes gated(cpu::Isa isa, const Bytes& gate, const Bytes& up, DType t) {
  IsaScope scope(isa);
  Bytes out(gate.size(), std::byte{0xA5});
  cpu::gated_activation(gate.data(), up.data(), std::int64_t(gate.size() / ref_size(t)), Activation::silu, t,
                        out.data(), 2);
  return out;
}

void check_gated(const Bytes& gate, const Bytes& up, DType t) {
  const Bytes want = gated(cpu::Isa::scalar, gate, up, t);
  Bytes changed = gate;
  ref_store(changed.data(), 5, t, load_f32(gate.data(), 5, t) == 3.0f ? 4.0f : 3.0f);
  for (cpu::Isa isa : levels()) {
    EXPECT_TRUE(same_bytes(want, gated(isa, gate, up, t))) << cpu::to_string(isa) << " " << dtype_name(t);
    EXPECT_FALSE(same_bytes(want, gated(isa, changed, up, t))) << cpu::to_string(isa) << ": the control changed nothing";
  }
}

TEST(AttentionIsa, VectorSiluEqualsOrderSilu) {
  const std::uint64_t seed = fresh_seed();
  std::cout << "[ seed     ] " << seed_note(seed) << "\n";
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::vector<float> x;
  for (float s : {0.0f, 104.0f, 300.0f, 88.72f, 87.33f, 103.97f, 1.0f, 0.34657f, 1e-30f, 0x1p-149f, 175.0f, 252.0f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::min()})
    for (float v : {s, -s, std::nextafter(s, 1e30f), std::nextafter(s, -1e30f), -std::nextafter(s, 1e30f)}) x.push_back(v);
  for (int i = 0; i < (1 << 20); ++i) x.push_back(f32_from(std::uint32_t(rng())));
  std::uniform_real_distribution<float> range(-320.0f, 120.0f);
  for (int i = 0; i < (1 << 20); ++i) x.push_back(range(rng));
  for (std::uint64_t u = rng() % 4099; u < (std::uint64_t(1) << 32); u += 4099) x.push_back(f32_from(std::uint32_t(u)));
  Bytes gate(x.size() * 4), up(x.size() * 4);
  std::memcpy(gate.data(), x.data(), gate.size());
  for (std::size_t i = 0; i < x.size(); ++i) ref_store(up.data(), i, DType::f32, 1.0f);
  check_gated(gate, up, DType::f32);
  for (DType t : {DType::bf16, DType::f16}) {
    const std::size_t n = 4096 + rng() % 4096;
    Bytes g = random_values(n, t, 4.0f, rng), u = random_values(n, t, 1.0f, rng);
    ref_store(g.data(), rng() % n, t, std::numeric_limits<float>::quiet_NaN());
    ref_store(g.data(), rng() % n, t, -std::numeric_limits<float>::infinity());
    check_gated(g, u, t);
  }
}

}  // namespace
}  // namespace exactq::test
