// The CPU quantized mat-vec kernels (exactq::cpu::qmv):
//  a. bitwise equality with literal re-implementations, written here, of the operation orders
//     documented in src/order/qmv.h (nothing from exactq::order is called: std::fma, + and *
//     spelled out, lanes simulated one by one);
//  b. width invariance: a block of M vectors gives each vector the bytes of a single-vector call
//     and of qmv, in any order and on repeat, for qmv and qmv_streamed at several tile sizes;
//  c. accuracy of each kernel against a float64 reference, with a derived error bound;
//  d. argument errors; e. the thread count changes no bit.
// Identity checks are bitwise. Their negative control is qmv_wide, another order, which must
// differ from qmv on f32 outputs in the same test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "exactq/qmv.h"
#include "test_util.h"

namespace exactq::test {
namespace {

constexpr int kBits[] = {2, 3, 4, 5, 6, 8};
constexpr int kGroups[] = {32, 64, 128};
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

using Bytes = std::vector<std::byte>;

// ---- the matrix and activations as the kernels must see them, decoded by the oracles ----------

struct Decoded {
  std::int64_t n = 0, k = 0;
  int bits = 0, group = 0;
  DType dtype = DType::f32;
  std::vector<float> codes;          // [n, k], via the bit-by-bit unpacker
  std::vector<float> scales, biases;  // [n, k/group], widened by the oracle conversions

  const float* row_codes(std::int64_t r) const { return codes.data() + r * k; }
  float scale(std::int64_t r, std::int64_t g) const { return scales[std::size_t(r * (k / group) + g)]; }
  float bias(std::int64_t r, std::int64_t g) const { return biases[std::size_t(r * (k / group) + g)]; }
};

Decoded decode(const QuantizedMatrix& w) {
  Decoded d;
  d.n = w.n;
  d.k = w.k;
  d.bits = w.bits;
  d.group = w.group;
  d.dtype = w.dtype;
  d.codes.resize(std::size_t(w.n * w.k));
  const std::int64_t row_bytes = w.k * w.bits / 8;
  for (std::int64_t r = 0; r < w.n; ++r)
    for (std::int64_t c = 0; c < w.k; ++c)
      d.codes[std::size_t(r * w.k + c)] = float(ref_unpack(w.packed.data() + r * row_bytes, c, w.bits));
  const std::size_t params = std::size_t(w.n * (w.k / w.group));
  for (std::size_t i = 0; i < params; ++i) {
    d.scales.push_back(ref_load(w.scales.data(), i, w.dtype));
    d.biases.push_back(ref_load(w.biases.data(), i, w.dtype));
  }
  return d;
}

std::vector<float> widen(std::span<const std::byte> x, DType dtype) {
  std::vector<float> out(x.size() / ref_size(dtype));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = ref_load(x.data(), i, dtype);
  return out;
}

// ---- the documented orders, literally ---------------------------------------------------------

// qmv family: chunk c (codes 32c..32c+31) belongs to lane c % 32; lane l takes its chunks
// l, l+32, ... in increasing order. Per chunk (docs/design.md §3):
//   E = max(exponent field of the largest |x|, 1);
//   X_i = x_i * 2^(148-E) rounded half to even (in double, where the product is exact);
//   A = f32(sum q_i X_i) * 2^(E-148), S = f32(sum X_i) * 2^(E-148), each sum exact in int64 and
//   each product rounded to f32 once (it rounds only when subnormal); a chunk holding a NaN or
//   an infinity gives A = S = NaN;
//   lane += fma(scale, A, bias*S).
// Then the xor butterfly 16, 8, 4, 2, 1; lane 0's value. `chain = true` is the f32 chain that
// contract replaced (A = fma chain of x*q from 0, S = running f32 sum): the controls use it.
struct ChunkTerms {
  float a, s;
};

ChunkTerms literal_chunk(const float* xc, const float* qc, bool chain) {
  if (chain) {
    float a = 0.0f, s = 0.0f;
    for (int i = 0; i < 32; ++i) a = std::fma(xc[i], qc[i], a), s = s + xc[i];
    return {a, s};
  }
  std::uint32_t largest = 0;
  for (int i = 0; i < 32; ++i) largest = std::max(largest, f32_bits(xc[i]) & 0x7fffffffu);
  const int e = std::max(int(largest >> 23), 1);
  if (e == 255) return {std::nanf(""), std::nanf("")};
  std::int64_t dot = 0, sum = 0;
  for (int i = 0; i < 32; ++i) {
    const std::int64_t big = std::int64_t(std::nearbyint(std::ldexp(double(xc[i]), 148 - e)));
    dot += std::int64_t(qc[i]) * big;
    sum += big;
  }
  auto unscale = [e](std::int64_t v) { return float(std::ldexp(double(float(v)), e - 148)); };
  return {unscale(dot), unscale(sum)};
}

float reference_qmv(const Decoded& d, std::int64_t row, const float* x, bool chain = false) {
  const std::int64_t chunks = d.k / 32;
  const float* q = d.row_codes(row);
  float lane[32];
  for (int l = 0; l < 32; ++l) {
    lane[l] = 0.0f;
    for (std::int64_t c = l; c < chunks; c += 32) {
      const ChunkTerms t = literal_chunk(x + 32 * c, q + 32 * c, chain);
      const std::int64_t g = 32 * c / d.group;
      const float bias_times_sum = d.bias(row, g) * t.s;
      lane[l] = lane[l] + std::fma(d.scale(row, g), t.a, bias_times_sum);
    }
  }
  for (int mask = 16; mask >= 1; mask /= 2) {
    float next[32];
    for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ mask];
    std::copy(next, next + 32, lane);
  }
  return lane[0];
}

// qmv_wide: group g belongs to lane g % 8, taken in increasing g. Per 8-code sub-chunk:
// w = fma(s, q, b) first, then a = fma chain of x*w from 0, lane += a. Then the shuffle-down
// ladder 4, 2, 1, which leaves lane 0 with ((r0+r4)+(r2+r6)) + ((r1+r5)+(r3+r7)).
float reference_wide(const Decoded& d, std::int64_t row, const float* x) {
  const std::int64_t groups = d.k / d.group;
  const float* q = d.row_codes(row);
  float r[8];
  for (int l = 0; l < 8; ++l) {
    r[l] = 0.0f;
    for (std::int64_t g = l; g < groups; g += 8) {
      const float s = d.scale(row, g), b = d.bias(row, g);
      for (int sub = 0; sub < d.group; sub += 8) {
        const std::int64_t k0 = g * d.group + sub;
        float w[8];
        for (int i = 0; i < 8; ++i) w[i] = std::fma(s, q[k0 + i], b);
        float a = 0.0f;
        for (int i = 0; i < 8; ++i) a = std::fma(x[k0 + i], w[i], a);
        r[l] = r[l] + a;
      }
    }
  }
  return ((r[0] + r[4]) + (r[2] + r[6])) + ((r[1] + r[5]) + (r[3] + r[7]));
}

// y [m, n] in the dtype, for the exact family (wide = false) or for qmv_wide.
Bytes reference_run(bool wide, const Decoded& d, const std::vector<float>& x, std::int64_t m) {
  Bytes y(std::size_t(m * d.n) * ref_size(d.dtype));
  for (std::int64_t v = 0; v < m; ++v)
    for (std::int64_t r = 0; r < d.n; ++r) {
      const float* xv = x.data() + v * d.k;
      ref_store(y.data(), std::size_t(v * d.n + r), d.dtype, wide ? reference_wide(d, r, xv) : reference_qmv(d, r, xv));
    }
  return y;
}

// ---- running the library ------------------------------------------------------------------------

// y starts poisoned: an output the kernel forgot to write shows up as a difference.
Bytes run(Kernel kernel, const QuantizedMatrix& w, std::span<const std::byte> x, std::int64_t m,
          const QmvOptions& options = {}, std::byte poison = std::byte{0xA5}) {
  Bytes y(std::size_t(m * w.n) * ref_size(w.dtype), poison);
  cpu::qmv(kernel, w.view(), x, m, y, options);
  return y;
}

std::span<const std::byte> rows(const Bytes& all, std::int64_t first, std::int64_t count, std::int64_t width, DType t) {
  const std::size_t row = std::size_t(width) * ref_size(t);
  return std::span<const std::byte>(all).subspan(std::size_t(first) * row, std::size_t(count) * row);
}

Bytes reversed_rows(std::span<const std::byte> all, std::int64_t m, std::int64_t width, DType t) {
  const std::size_t row = std::size_t(width) * ref_size(t);
  Bytes out(all.size());
  for (std::int64_t v = 0; v < m; ++v)
    std::copy_n(all.begin() + std::ptrdiff_t(std::size_t(v) * row), row, out.begin() + std::ptrdiff_t(std::size_t(m - 1 - v) * row));
  return out;
}

// M single-vector calls, concatenated.
Bytes run_chain(Kernel kernel, const QuantizedMatrix& w, const Bytes& x, std::int64_t m, const QmvOptions& options = {}) {
  Bytes y;
  for (std::int64_t v = 0; v < m; ++v) {
    const Bytes one = run(kernel, w, rows(x, v, 1, w.k, w.dtype), 1, options);
    y.insert(y.end(), one.begin(), one.end());
  }
  return y;
}

std::string cell_name(int bits, int group, DType t, std::int64_t n, std::int64_t k) {
  return std::to_string(bits) + "-bit g" + std::to_string(group) + " " + dtype_name(t) + " " + std::to_string(n) + "x" +
         std::to_string(k);
}

// ---- a. the literal orders, bitwise -------------------------------------------------------------

TEST(QmvOrder, EveryBitsGroupDtypeMatchesLiteralReference) {
  for (std::uint64_t base : seeds_with_fresh({101})) {
    SCOPED_TRACE(seed_note(base));
    std::mt19937_64 rng(base);
    for (int bits : kBits)
      for (int group : kGroups)
        for (DType dtype : kDtypes) {
          // N not a multiple of 4 or 8; K from one group up to 3840 (lanes wrap several times),
          // including 32 chunks + one group (the first lane gets a second chunk).
          const std::int64_t k_mid = group == 128 ? 384 : 320;
          const std::pair<std::int64_t, std::int64_t> shapes[] = {
              {1, 3840}, {7, k_mid}, {13, group}, {37, 1024 + group}, {37, 3840}};
          std::int64_t wide_vs_qmv = 0, mutation_seen = 0;
          for (auto [n, k] : shapes) {
            SCOPED_TRACE(cell_name(bits, group, dtype, n, k));
            const std::int64_t m = 2;
            QuantizedMatrix w = random_matrix(n, k, bits, group, dtype, rng);
            const Bytes x = random_activations(m, k, dtype, rng);
            const Decoded d = decode(w);
            const std::vector<float> xf = widen(x, dtype);
            const Bytes want_qmv = reference_run(false, d, xf, m);
            const Bytes want_wide = reference_run(true, d, xf, m);

            const Bytes got_qmv = run(Kernel::qmv, w, x, m);
            const Bytes got_streamed = run(Kernel::qmv_streamed, w, x, m);
            const Bytes got_wide = run(Kernel::qmv_wide, w, x, m);
            EXPECT_EQ(differing_bytes(got_qmv, want_qmv), 0) << "qmv";
            EXPECT_EQ(differing_bytes(got_streamed, want_qmv), 0) << "qmv_streamed";
            EXPECT_EQ(differing_bytes(got_wide, want_wide), 0) << "qmv_wide";
            wide_vs_qmv += differing_bytes(got_wide, got_qmv);

            // Mutation control: flip the sign of row 0's first scale; the library must now
            // disagree with the reference of the unmutated matrix.
            w.scales[ref_size(dtype) - 1] ^= std::byte{0x80};
            mutation_seen += differing_bytes(run(Kernel::qmv, w, x, m), want_qmv) > 0;
          }
          SCOPED_TRACE(cell_name(bits, group, dtype, 0, 0));
          EXPECT_GE(mutation_seen, 4);  // of 5 shapes (a scale can meet an all-zero code chunk)
          // Negative control: on f32 outputs the two orders must differ somewhere.
          if (dtype == DType::f32) {
            EXPECT_GT(wide_vs_qmv, 0);
          }
        }
  }
}

// One tall matrix, kept cheap: many rows exercise the row-parallel split of the work.
TEST(QmvOrder, LargeNMatchesLiteralReference) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::int64_t n = 20000, k = 256;
    const QuantizedMatrix w = random_matrix(n, k, 4, 64, dtype, rng);
    const Bytes x = random_activations(1, k, dtype, rng);
    const Decoded d = decode(w);
    const std::vector<float> xf = widen(x, dtype);
    const Bytes got_qmv = run(Kernel::qmv, w, x, 1);
    EXPECT_EQ(differing_bytes(got_qmv, reference_run(false, d, xf, 1)), 0) << "qmv";
    EXPECT_EQ(differing_bytes(run(Kernel::qmv_streamed, w, x, 1), got_qmv), 0) << "qmv_streamed";
    const Bytes got_wide = run(Kernel::qmv_wide, w, x, 1);
    EXPECT_EQ(differing_bytes(got_wide, reference_run(true, d, xf, 1)), 0) << "qmv_wide";
    if (dtype == DType::f32) {
      EXPECT_GT(differing_bytes(got_wide, got_qmv), 0);  // negative control
    }
  }
}

// Activations far outside the usual range: chunks whose largest |x| is tiny (E < 22: u is
// subnormal, and A and S may round there), huge (X's scaling needs two factors), mixed within
// one chunk (small values round to 0 in X), subnormal, zero, and ordinary. f32 and bf16 carry such
// values. The last vector is ordinary except for one infinite value: every output of it is NaN.
// Control: the f32 chain the contract replaced must differ somewhere on this data.
std::vector<std::byte> extreme_activations(std::int64_t m, std::int64_t k, DType dtype, std::mt19937_64& rng) {
  std::vector<std::byte> x(std::size_t(m * k) * ref_size(dtype));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t v = 0; v < m; ++v)
    for (std::int64_t c0 = 0; c0 < k; c0 += 32) {
      const int kind = v == m - 1 ? 5 : int(rng() % 6);
      for (std::int64_t c = c0; c < c0 + 32; ++c) {
        int exponent = 0;
        switch (kind) {
          case 0: exponent = -118 - int(rng() % 12); break;          // tiny, some subnormal
          case 1: exponent = 106 + int(rng() % 15); break;           // huge
          case 2: exponent = int(rng() % 230) - 115; break;          // everything in one chunk
          case 3: exponent = -140 - int(rng() % 8); break;           // deep subnormal (f32 only survives)
          case 4: exponent = -1000; break;                           // zeros
          default: exponent = int(rng() % 6) - 3; break;             // ordinary
        }
        const float value = exponent == -1000 ? 0.0f : std::ldexp(normal(rng), exponent);
        ref_store(x.data(), std::size_t(v * k + c), dtype, value);
      }
    }
  ref_store(x.data(), std::size_t((m - 1) * k + k / 2 + 5), dtype, std::numeric_limits<float>::infinity());
  return x;
}

TEST(QmvOrder, ExtremeActivationRangesMatchLiteralReference) {
  for (std::uint64_t seed : seeds_with_fresh({151})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    std::int64_t chain_differs = 0;
    for (DType dtype : {DType::f32, DType::bf16})
      for (int bits : kBits) {
        const std::int64_t n = 19, k = 1024 + 320, m = 4;
        SCOPED_TRACE(cell_name(bits, 64, dtype, n, k));
        const QuantizedMatrix w = random_matrix(n, k, bits, 64, dtype, rng);
        const Bytes x = extreme_activations(m, k, dtype, rng);
        const Decoded d = decode(w);
        const std::vector<float> xf = widen(x, dtype);
        const Bytes want = reference_run(false, d, xf, m);
        EXPECT_EQ(differing_bytes(run(Kernel::qmv, w, x, m), want), 0) << "qmv";
        EXPECT_EQ(differing_bytes(run(Kernel::qmv_streamed, w, x, m), want), 0) << "qmv_streamed";
        for (std::int64_t r = 0; r < n; ++r)
          EXPECT_TRUE(std::isnan(ref_load(want.data(), std::size_t((m - 1) * n + r), dtype))) << "row " << r;
        Bytes chain(want.size());
        for (std::int64_t v = 0; v < m; ++v)
          for (std::int64_t r = 0; r < n; ++r)
            ref_store(chain.data(), std::size_t(v * n + r), dtype, reference_qmv(d, r, xf.data() + v * k, true));
        chain_differs += differing_bytes(chain, want);
      }
    EXPECT_GT(chain_differs, 0) << "the f32 chain and the exact dot agreed on every byte";
  }
}

// ---- b. width invariance -----------------------------------------------------------------------

struct WidthCase {
  int bits, group;
  DType dtype;
  std::int64_t n, k;
};

TEST(QmvWidth, BlockEqualsChainEqualsQmvInAnyOrderAndOnRepeat) {
  const WidthCase cases[] = {{4, 64, DType::f32, 37, 3840},
                             {3, 32, DType::f32, 13, 1056},
                             {6, 128, DType::bf16, 37, 1152},
                             {5, 64, DType::f16, 21, 1088}};
  const std::int64_t ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16};
  // The largest V: one tile at every M, with no buffer sized by V rather than by M.
  const int vs[] = {1, 2, 3, 8, std::numeric_limits<int>::max()};
  for (std::uint64_t seed : seeds_with_fresh({201})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    std::int64_t control_f32 = 0;
    for (const WidthCase& c : cases) {
      SCOPED_TRACE(cell_name(c.bits, c.group, c.dtype, c.n, c.k));
      const QuantizedMatrix w = random_matrix(c.n, c.k, c.bits, c.group, c.dtype, rng);
      const std::int64_t m_all = 16;
      const Bytes x = random_activations(m_all, c.k, c.dtype, rng);
      const Bytes chain_qmv = run_chain(Kernel::qmv, w, x, m_all);
      const Bytes chain_streamed = run_chain(Kernel::qmv_streamed, w, x, m_all);
      const Bytes chain_wide = run_chain(Kernel::qmv_wide, w, x, m_all);
      EXPECT_EQ(differing_bytes(chain_streamed, chain_qmv), 0) << "qmv_streamed chain vs qmv chain";
      if (c.dtype == DType::f32) control_f32 += differing_bytes(chain_wide, chain_qmv);

      for (std::int64_t m : ms) {
        SCOPED_TRACE("M = " + std::to_string(m));
        const Bytes xm(rows(x, 0, m, c.k, c.dtype).begin(), rows(x, 0, m, c.k, c.dtype).end());
        const Bytes xr = reversed_rows(xm, m, c.k, c.dtype);
        const auto want = rows(chain_qmv, 0, m, c.n, c.dtype);
        struct Arm {
          Kernel kernel;
          int v;
        };
        std::vector<Arm> arms = {{Kernel::qmv, 8}};
        for (int v : vs) arms.push_back({Kernel::qmv_streamed, v});
        for (const Arm& a : arms) {
          SCOPED_TRACE(std::string(to_string(a.kernel)) + " V = " + std::to_string(a.v));
          QmvOptions o;
          o.streamed_max_vectors = a.v;
          const Bytes block = run(a.kernel, w, xm, m, o);
          EXPECT_EQ(differing_bytes(block, want), 0) << "block vs qmv chain";
          EXPECT_EQ(differing_bytes(reversed_rows(run(a.kernel, w, xr, m, o), m, c.n, c.dtype), want), 0) << "reversed";
          EXPECT_EQ(differing_bytes(run(a.kernel, w, xm, m, o, std::byte{0x5A}), block), 0) << "repeat";
        }
        // qmv_wide is another order, but per vector it too is independent of M and of its
        // neighbours (MLX's tiles of <= 5 vectors): its block equals its own chain.
        const Bytes wide_block = run(Kernel::qmv_wide, w, xm, m);
        EXPECT_EQ(differing_bytes(wide_block, rows(chain_wide, 0, m, c.n, c.dtype)), 0) << "qmv_wide block vs its chain";
        EXPECT_EQ(differing_bytes(reversed_rows(run(Kernel::qmv_wide, w, xr, m), m, c.n, c.dtype),
                                  rows(chain_wide, 0, m, c.n, c.dtype)),
                  0)
            << "qmv_wide reversed";
        if (c.dtype == DType::f32) control_f32 += differing_bytes(wide_block, want);
      }
    }
    // Negative control: the inexact arm differs from qmv on f32 outputs.
    EXPECT_GT(control_f32, 0);
  }
}

// ---- c. accuracy against float64 ---------------------------------------------------------------

// For one output: the exact value from the stored (dtype) scale, bias, codes and x, and the
// magnitude sum |x| (|s| q + |b|), which bounds every partial sum of either order. For the exact
// family with f32 activations, also the most that rounding x to X can move the result: half a
// unit 2^(E-148) per value, times its weight |s| q + |b| (bf16 and f16 values are exact in X).
struct Exact {
  double y = 0, magnitude = 0, y_without_bias = 0, x_rounding = 0;
};
Exact exact_output(const Decoded& d, std::int64_t row, const float* x) {
  Exact e;
  for (std::int64_t c = 0; c < d.k; ++c) {
    const double s = d.scale(row, c / d.group), b = d.bias(row, c / d.group), q = d.row_codes(row)[c];
    e.y += double(x[c]) * (s * q + b);
    e.y_without_bias += double(x[c]) * s * q;
    e.magnitude += std::fabs(double(x[c])) * (std::fabs(s) * q + std::fabs(b));
    if (c % 32 == 0) {
      std::uint32_t largest = 0;
      for (int i = 0; i < 32; ++i) largest = std::max(largest, f32_bits(x[c + i]) & 0x7fffffffu);
      const int chunk_e = std::max(int(largest >> 23), 1);
      double weights = 0;
      for (int i = 0; i < 32; ++i) weights += std::fabs(s) * d.row_codes(row)[c + i] + std::fabs(b);
      e.x_rounding += std::ldexp(weights, chunk_e - 149);
    }
  }
  return e;
}

// Depth of each order (number of roundings an input passes through), for gamma_d = d * 2^-24:
//  qmv:  float(D) or float(sum X) (once each), the bias multiply and the fold fma,
//        ceil(chunks/32) lane adds, 5 butterfly adds; plus x_rounding with f32 activations;
//  wide: the dequantizing fma, 8 fmas, ceil(groups/8) * group/8 lane adds, 3 ladder adds.
double depth(bool wide, std::int64_t k, int group) {
  if (!wide) return 1 + 2 + double((k / 32 + 31) / 32) + 5 + 2;
  return 1 + 8 + double((k / group + 7) / 8) * (group / 8) + 3 + 2;
}

TEST(QmvAccuracy, EachKernelWithinDerivedBoundOfFloat64) {
  for (std::uint64_t seed : seeds_with_fresh({301})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    for (DType dtype : kDtypes) {
      double worst[2] = {0, 0}, sum_sq[2] = {0, 0};
      std::int64_t outputs = 0;
      for (int bits : kBits)
        for (int group : {32, 128}) {
          const std::int64_t n = 29, k = 3840, m = 2;
          SCOPED_TRACE(cell_name(bits, group, dtype, n, k));
          const QuantizedMatrix w = random_matrix(n, k, bits, group, dtype, rng);
          const Bytes x = random_activations(m, k, dtype, rng);
          const Decoded d = decode(w);
          const std::vector<float> xf = widen(x, dtype);
          const double u_out = dtype == DType::f32 ? 0.0 : dtype == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
          const double abs_out = dtype == DType::f16 ? std::ldexp(1.0, -25) : 0.0;
          const Bytes y[3] = {run(Kernel::qmv, w, x, m), run(Kernel::qmv_wide, w, x, m), run(Kernel::qmv_streamed, w, x, m)};
          std::int64_t violations = 0, no_bias_caught = 0;
          for (std::int64_t v = 0; v < m; ++v)
            for (std::int64_t r = 0; r < n; ++r) {
              const Exact e = exact_output(d, r, xf.data() + v * k);
              const std::size_t at = std::size_t(v * n + r);
              for (int kernel = 0; kernel < 3; ++kernel) {
                const bool wide = kernel == 1;
                const double accumulate = depth(wide, k, group) * std::ldexp(1.0, -24) * e.magnitude +
                                          (!wide && dtype == DType::f32 ? e.x_rounding : 0.0);
                const double bound = accumulate + u_out * (std::fabs(e.y) + accumulate) + abs_out;
                const double got = ref_load(y[kernel].data(), at, dtype);
                const double err = std::fabs(got - e.y);
                if (err > bound && ++violations < 5)
                  ADD_FAILURE() << "kernel " << kernel << " v " << v << " row " << r << ": got " << got << ", exact "
                                << e.y << ", error " << err << " > bound " << bound;
                if (kernel < 2) {
                  worst[kernel] = std::max(worst[kernel], err / e.magnitude);
                  sum_sq[kernel] += (err / e.magnitude) * (err / e.magnitude);
                }
                // Negative control: dropping the bias term is a real formula error and must
                // fall outside the bound.
                if (kernel == 0) no_bias_caught += std::fabs(got - e.y_without_bias) > bound;
              }
              ++outputs;
            }
          EXPECT_EQ(violations, 0);
          EXPECT_GT(no_bias_caught, n);  // most of the 2n outputs
        }
      std::cout << "[ info     ] " << dtype_name(dtype) << " error / sum|x|(|s|q+|b|): qmv max " << worst[0] << " rms "
                << std::sqrt(sum_sq[0] / double(outputs)) << "; qmv_wide max " << worst[1] << " rms "
                << std::sqrt(sum_sq[1] / double(outputs)) << "\n";
    }
  }
}

// qmv_mma's CPU side is a reference (per-group sums in double, then the kernel's f32 fold), not a
// mirror: it must be within the derived bound of float64, refuse f32, and disagree with a
// formula error (dropping the bias) as the control.
TEST(QmvAccuracy, QmvMmaReferenceWithinBoundOfFloat64) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (DType dtype : {DType::bf16, DType::f16})
    for (int bits : {4, 8})
      for (int group : {32, 128}) {
       for (std::int64_t k : {1024, 33 * 256}) {  // K in 1 or 2 segments, then 8 (order.h's split)
        const std::int64_t n = 23, m = 2;
        const int parts = 8;  // at most: one more rounding each
        SCOPED_TRACE(cell_name(bits, group, dtype, n, k));
        const QuantizedMatrix w = random_matrix(n, k, bits, group, dtype, rng);
        const Bytes x = random_activations(m, k, dtype, rng);
        const Decoded d = decode(w);
        const std::vector<float> xf = widen(x, dtype);
        const Bytes y = run(Kernel::qmv_mma, w, x, m);
        const double u_out = dtype == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
        std::int64_t violations = 0, no_bias_caught = 0;
        for (std::int64_t v = 0; v < m; ++v)
          for (std::int64_t r = 0; r < n; ++r) {
            const Exact e = exact_output(d, r, xf.data() + v * k);
            const double accumulate = double(k / group + 3 + parts) * std::ldexp(1.0, -24) * e.magnitude;
            const double bound = accumulate + u_out * (std::fabs(e.y) + accumulate) + (dtype == DType::f16 ? std::ldexp(1.0, -25) : 0.0);
            const double got = ref_load(y.data(), std::size_t(v * n + r), dtype);
            violations += std::fabs(got - e.y) > bound;
            no_bias_caught += std::fabs(got - e.y_without_bias) > bound;
          }
        EXPECT_EQ(violations, 0);
        EXPECT_GT(no_bias_caught, n);
       }
      }
  QuantizedMatrix f32 = random_matrix(3, 64, 4, 32, DType::f32, rng);
  const Bytes x32 = random_activations(1, 64, DType::f32, rng);
  expect_invalid([&] { run(Kernel::qmv_mma, f32, x32, 1); }, "dtype f32");
}

// ---- d. argument errors ------------------------------------------------------------------------

TEST(QmvArguments, InvalidArgumentsThrowNamingTheValue) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const QuantizedMatrix w = random_matrix(5, 128, 4, 64, DType::bf16, rng);
  const Bytes x = random_activations(2, 128, DType::bf16, rng);  // 512 bytes
  for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide}) {
    SCOPED_TRACE(std::string(to_string(kernel)));
    Bytes y(2 * 5 * 2);  // 20 bytes
    auto call = [&](std::span<const std::byte> xs, std::int64_t m, std::span<std::byte> ys, QmvOptions o = {}) {
      return [=, &w] { cpu::qmv(kernel, w.view(), xs, m, ys, o); };
    };
    EXPECT_NO_THROW(call(x, 2, y)());  // control: the valid call
    expect_invalid(call(x, 0, y), "M = 0");
    expect_invalid(call(x, -3, y), "M = -3");
    expect_invalid(call(x, (std::int64_t(1) << 24) + 1, y), "M = 16777217");  // above 2^24
    expect_invalid(call(std::span<const std::byte>(x).first(510), 2, y), "activations have 510 bytes");
    expect_invalid(call(std::span<const std::byte>(x).first(256), 2, y), "activations have 256 bytes");
    expect_invalid(call(x, 2, std::span<std::byte>(y).first(18)), "output has 18 bytes");
    Bytes y_big(22);
    expect_invalid(call(x, 2, y_big), "output has 22 bytes");
    expect_invalid(call({}, 2, y), "activations are null");
    expect_invalid(call(x, 2, {}), "output is null");
    QmvOptions bad_threads;
    bad_threads.threads = -1;
    expect_invalid(call(x, 2, y, bad_threads), "threads = -1");
    bad_threads.threads = kMaxThreads + 1;
    expect_invalid(call(x, 2, y, bad_threads), "threads = " + std::to_string(kMaxThreads + 1));
    // The matrix itself is validated first.
    QuantizedMatrixView bad = w.view();
    bad.k = 100;
    expect_invalid([&] { cpu::qmv(kernel, bad, x, 2, y); }, "K = 100");
  }
  Bytes y(20);
  for (int v : {0, -2}) {
    QmvOptions o;
    o.streamed_max_vectors = v;
    expect_invalid([&] { cpu::qmv(Kernel::qmv_streamed, w.view(), x, 2, y, o); },
                   "streamed_max_vectors = " + std::to_string(v));
  }
}

// A Kernel, DType or WeightLayout made from a number that names no enumerator is refused by name
// before any kernel runs: unchecked, the dtype would be read as bf16 and the layout as MLX's,
// and the call would return bytes. The bad dtype sits on a bf16-sized matrix, so only the dtype
// check can catch it.
TEST(QmvArguments, OutOfRangeEnumValuesAreRefused) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const QuantizedMatrix w = random_matrix(5, 256, 4, 64, DType::bf16, rng);
  const Bytes x = random_activations(2, 256, DType::bf16, rng);
  Bytes y(2 * 5 * 2);
  for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide, Kernel::qmv_mma}) {
    SCOPED_TRACE(std::string(to_string(kernel)));
    EXPECT_NO_THROW(validate_kernel(kernel));
    EXPECT_NO_THROW(cpu::qmv(kernel, w.view(), x, 2, y));  // control
    for (int v : {3, 7, 255}) {
      QuantizedMatrixView bad = w.view();
      bad.dtype = static_cast<DType>(v);
      expect_invalid([&] { cpu::qmv(kernel, bad, x, 2, y); }, "dtype value " + std::to_string(v));
    }
    for (int v : {2, 7, -1}) {
      QuantizedMatrixView bad = w.view();
      bad.layout = static_cast<WeightLayout>(v);
      expect_invalid([&] { cpu::qmv(kernel, bad, x, 2, y); }, "layout value " + std::to_string(v));
    }
  }
  for (int v : {4, 9, -1}) {
    const auto bad = static_cast<Kernel>(v);
    const std::string note = "kernel value " + std::to_string(v);
    expect_invalid([&] { validate_kernel(bad); }, note);
    expect_invalid([&] { (void)to_string(bad); }, note);
    expect_invalid([&] { cpu::qmv(bad, w.view(), x, 2, y); }, note);
  }
}

TEST(QmvArguments, KernelNames) {
  for (Kernel k : {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide, Kernel::qmv_mma})
    EXPECT_EQ(parse_kernel(to_string(k)), k);
  EXPECT_FALSE(is_exact_family(Kernel::qmv_mma));
  EXPECT_TRUE(is_width_invariant(Kernel::qmv_mma));
  EXPECT_FALSE(is_width_invariant(Kernel::qmv_wide));
  EXPECT_TRUE(is_exact_family(Kernel::qmv));
  EXPECT_TRUE(is_exact_family(Kernel::qmv_streamed));
  EXPECT_FALSE(is_exact_family(Kernel::qmv_wide));
  expect_invalid([] { parse_kernel("qmv_fast"); }, "'qmv_fast'");
}

// ---- e. threads ----------------------------------------------------------------------------------

TEST(QmvThreads, ThreadCountChangesNoBit) {
  for (std::uint64_t seed : seeds_with_fresh({401})) {
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    for (DType dtype : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(dtype_name(dtype));
      const std::int64_t n = 301, k = 1024, m = 3;  // 19 tasks of 16 rows, the last one short
      const QuantizedMatrix w = random_matrix(n, k, 5, 64, dtype, rng);
      const Bytes x = random_activations(m, k, dtype, rng);
      Bytes by_kernel[3];
      int i = 0;
      for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide}) {
        SCOPED_TRACE(std::string(to_string(kernel)));
        QmvOptions one;
        one.threads = 1;
        const Bytes ref = run(kernel, w, x, m, one);
        for (int threads : {2, 3, 0}) {
          QmvOptions o;
          o.threads = threads;
          EXPECT_EQ(differing_bytes(run(kernel, w, x, m, o, std::byte{0x5A}), ref), 0) << "threads = " << threads;
        }
        by_kernel[i++] = ref;
      }
      EXPECT_EQ(differing_bytes(by_kernel[1], by_kernel[0]), 0);
      if (dtype == DType::f32) {
        EXPECT_GT(differing_bytes(by_kernel[2], by_kernel[0]), 0);  // negative control
      }
    }
  }
}

}  // namespace
}  // namespace exactq::test
