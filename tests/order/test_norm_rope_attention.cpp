// The orders of RMSNorm (src/order/norm.h), RoPE (rope.h) and attention (attention.h).
// - RMSNorm: the lane order re-simulated here bit for bit (control: a sequential sum of squares
//   differs on some row); y against float64 within the bound norm.h derives.
// - RoPE: the inverse frequencies against the formulas (default, linear, HF's llama3) evaluated
//   here in long double; the phase p * N mod 2^64 (exact at any p) and cos/sin against long
//   double within 1 ulp plus the phase table's rounding (control: an f32 angle p * w misses that
//   tolerance); the rotation against long double; the pair layout.
// - Attention: a row at position p is the same bytes whatever the cache holds past p (garbage
//   included) and however long it is, and a verify block equals the decode steps (control: a
//   chunk size derived from the cache length differs); accuracy against float64 softmax
//   attention within a bound derived from the order; sliding window on and off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "order/attention.h"
#include "order/norm.h"
#include "order/rope.h"
#include "test_util.h"

namespace exactq::test {
namespace {

constexpr double kU = 0x1p-24;  // f32's unit roundoff

double ulp_at(double ref) {
  const double a = std::fabs(ref);
  if (a < 0x1p-126) return 0x1p-149;
  int e = 0;
  std::frexp(a, &e);
  return std::ldexp(1.0, e - 24);
}

// A row of f32 values that are bf16 values: normal, a per-row scale, an outlier channel in 97.
std::vector<float> random_row(std::size_t n, std::mt19937_64& rng, float spread = 1.0f) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(std::log(0.05f), std::log(8.0f));
  const float scale = spread * std::exp(log_scale(rng));
  const std::size_t phase = rng() % 97;
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = ref_round_to(scale * normal(rng) * (i % 97 == phase ? 20.0f : 1.0f), DType::bf16);
  return x;
}

// ---- RMSNorm ----------------------------------------------------------------------------------

// Lane l holds elements l, l + 32, ... (i % 32 == l, increasing i); then the butterfly 16..1.
float lane_order_sum_of_squares(const std::vector<float>& x) {
  std::vector<float> acc(32, 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) acc[i % 32] = std::fma(x[i], x[i], acc[i % 32]);
  for (int mask = 16; mask >= 1; mask /= 2) {
    std::vector<float> next(32);
    for (int l = 0; l < 32; ++l) next[std::size_t(l)] = acc[std::size_t(l)] + acc[std::size_t(l ^ mask)];
    acc = next;
  }
  return acc[0];
}
float sequential_sum_of_squares(const std::vector<float>& x) {
  float s = 0.0f;
  for (float v : x) s = std::fma(v, v, s);
  return s;
}

constexpr int kNormSizes[] = {32, 100, 256, 1152, 2048, 2560, 3840, 4096, 5376};

TEST(NormOrder, LaneOrderAsDocumented) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const float eps = float(1e-6);
  std::int64_t sequential_differs = 0;
  for (const int h : kNormSizes) {
    for (int trial = 0; trial < 20; ++trial) {
      const std::vector<float> x = random_row(std::size_t(h), rng), w = random_row(std::size_t(h), rng);
      const float s = lane_order_sum_of_squares(x);
      ASSERT_EQ(f32_bits(order::norm_sum_of_squares(x.data(), h)), f32_bits(s)) << "h = " << h;
      sequential_differs += f32_bits(sequential_sum_of_squares(x)) != f32_bits(s);
      const float r = 1.0f / std::sqrt(s / float(h) + eps);
      for (const bool one_plus_w : {false, true}) {
        std::vector<float> y(static_cast<std::size_t>(h));
        order::rmsnorm_row(x.data(), w.data(), h, eps, one_plus_w, y.data());
        for (std::size_t i = 0; i < y.size(); ++i) {
          const float wi = one_plus_w ? 1.0f + w[i] : w[i];
          ASSERT_EQ(f32_bits(y[i]), f32_bits((x[i] * r) * wi)) << "h = " << h << ", i = " << i;
        }
      }
    }
  }
  EXPECT_GT(sequential_differs, 0) << "control: a sequential sum of squares must differ on some row";
}

TEST(NormAccuracy, WithinDerivedBoundOfFloat64) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  double worst_ratio = 0, worst_rel = 0;
  for (const int h : kNormSizes) {
    for (const float eps : {float(1e-6), float(1e-5)}) {
      for (int trial = 0; trial < 10; ++trial) {
        const std::vector<float> x = random_row(std::size_t(h), rng), w = random_row(std::size_t(h), rng);
        double s = 0;
        for (float v : x) s += double(v) * double(v);
        const double r = 1.0 / std::sqrt(s / h + double(eps));
        // norm.h: S to (h/32 + 5) u, then div, add, sqrt, div (halved by the root), two muls, 1 + w
        const double bound = ((h / 32.0 + 7.0) / 2.0 + 6.0) * kU;
        for (const bool one_plus_w : {false, true}) {
          std::vector<float> y(static_cast<std::size_t>(h));
          order::rmsnorm_row(x.data(), w.data(), h, eps, one_plus_w, y.data());
          for (std::size_t i = 0; i < y.size(); ++i) {
            const double ref = double(x[i]) * r * (one_plus_w ? 1.0 + double(w[i]) : double(w[i]));
            const double err = std::fabs(double(y[i]) - ref), tol = bound * std::fabs(ref) + 0x1p-140;
            ASSERT_LE(err, tol) << "h = " << h << ", i = " << i;
            worst_ratio = std::max(worst_ratio, err / tol);
            if (ref != 0) worst_rel = std::max(worst_rel, err / std::fabs(ref));
          }
        }
      }
    }
  }
  std::printf("  rmsnorm: max relative error %.3g (%.2f of the bound)\n", worst_rel, worst_ratio);
}

TEST(NormOrder, StoredRowsRoundOnce) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const int h = 2304;
  for (const DType out : {DType::bf16, DType::f16, DType::f32}) {
    const std::vector<float> x = random_row(std::size_t(h), rng), w = random_row(std::size_t(h), rng);
    std::vector<std::byte> xb(std::size_t(h) * 2), wb(std::size_t(h) * 2), yb(std::size_t(h) * ref_size(out));
    for (int i = 0; i < h; ++i) ref_store(xb.data(), std::size_t(i), DType::bf16, x[std::size_t(i)]);
    for (int i = 0; i < h; ++i) ref_store(wb.data(), std::size_t(i), DType::bf16, w[std::size_t(i)]);
    std::vector<float> scratch(static_cast<std::size_t>(h)), y(static_cast<std::size_t>(h));
    order::rmsnorm_row_stored(xb.data(), DType::bf16, wb.data(), DType::bf16, h, 1e-6f, true, yb.data(), out, scratch.data());
    order::rmsnorm_row(x.data(), w.data(), h, 1e-6f, true, y.data());
    for (int i = 0; i < h; ++i)
      ASSERT_EQ(f32_bits(ref_load(yb.data(), std::size_t(i), out)), f32_bits(ref_round_to(y[std::size_t(i)], out)));
  }
}

// ---- RoPE -------------------------------------------------------------------------------------

const long double kPiL = 3.141592653589793238462643383279502884L;

// The formulas, in long double: base^(-2i/d); linear: / factor; llama3: HF's
// _compute_llama3_parameters (medium band: neither wavelength < high_wl nor > low_wl).
std::vector<long double> formula_inverse_frequencies(const order::RopeParams& p) {
  std::vector<long double> w;
  for (int i = 0; i < p.dims / 2; ++i) {
    long double f = std::exp(-(2.0L * i / p.dims) * std::log((long double)p.base));
    if (p.scaling == order::RopeScalingKind::linear) f = f / p.factor;
    if (p.scaling == order::RopeScalingKind::llama3) {
      const long double old = p.original_max_position_embeddings;
      const long double low_wl = old / p.low_freq_factor, high_wl = old / p.high_freq_factor;
      const long double wavelen = 2 * kPiL / f;
      const long double scaled = wavelen > low_wl ? f / p.factor : f;
      const long double smooth = (old / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
      const long double smoothed = (1 - smooth) * scaled / p.factor + smooth * scaled;
      f = !(wavelen < high_wl) && !(wavelen > low_wl) ? smoothed : scaled;
    }
    w.push_back(f);
  }
  return w;
}

order::RopeParams llama31_8b() {
  order::RopeParams p;
  p.dims = 128, p.base = 500000.0, p.scaling = order::RopeScalingKind::llama3;
  p.factor = 8.0, p.low_freq_factor = 1.0, p.high_freq_factor = 4.0, p.original_max_position_embeddings = 8192.0;
  return p;
}

std::vector<order::RopeParams> rope_configs() {
  std::vector<order::RopeParams> c;
  c.push_back(llama31_8b());
  order::RopeParams p = llama31_8b();
  p.dims = 64, p.factor = 32.0;  // Llama 3.2 1B
  c.push_back(p);
  order::RopeParams g;
  g.dims = 256, g.base = 1e6, g.scaling = order::RopeScalingKind::linear, g.factor = 8.0;  // Gemma 3 global
  c.push_back(g);
  g.base = 10000.0, g.scaling = order::RopeScalingKind::none, g.factor = 1.0;  // Gemma 3 local
  c.push_back(g);
  order::RopeParams q;
  q.dims = 128, q.base = 1e6;  // Qwen
  c.push_back(q);
  return c;
}

TEST(RopeFrequencies, DefaultLinearAndLlama3MatchTheFormulas) {
  for (const order::RopeParams& p : rope_configs()) {
    const std::vector<double> w = order::rope_inverse_frequencies(p);
    const std::vector<long double> want = formula_inverse_frequencies(p);
    ASSERT_EQ(w.size(), want.size());
    for (std::size_t i = 0; i < w.size(); ++i)
      EXPECT_NEAR((long double)w[i] / want[i], 1.0L, 1e-14L) << "dims " << p.dims << " base " << p.base << " i " << i;
  }
  // Llama 3.1: the first pair is never scaled, the last is divided by the factor, and the three
  // bands all occur (wavelength < 2048 unchanged, > 8192 divided, between smoothed).
  const order::RopeParams p = llama31_8b();
  const std::vector<double> w = order::rope_inverse_frequencies(p);
  EXPECT_EQ(w.front(), 1.0);
  EXPECT_NEAR(w.back() * 8.0 / std::pow(500000.0, -126.0 / 128.0), 1.0, 1e-14);
  int unchanged = 0, divided = 0, smoothed = 0;
  for (int i = 0; i < 64; ++i) {
    const double plain = std::pow(500000.0, -2.0 * i / 128.0), ratio = w[std::size_t(i)] / plain;
    if (std::fabs(ratio - 1.0) < 1e-14) ++unchanged;
    else if (std::fabs(ratio * 8.0 - 1.0) < 1e-14) ++divided;
    else ++smoothed;
  }
  EXPECT_GT(unchanged, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);
  std::printf("  llama 3.1 bands: %d unchanged, %d smoothed, %d divided by 8\n", unchanged, smoothed, divided);
}

// The reduction done independently: nearest quarter turn and signed remainder in 128-bit integers.
order::CosSin exact_cos_sin(std::uint64_t phase, long double& c, long double& s) {
  const unsigned __int128 quarter = (unsigned __int128)1 << 62;
  const unsigned __int128 q = (((unsigned __int128)phase + quarter / 2) / quarter);
  const __int128 rem = (__int128)phase - (__int128)(q * quarter);
  const long double r = (long double)rem * (2 * kPiL) / 18446744073709551616.0L;
  const long double cr = std::cos(r), sr = std::sin(r);
  switch (int(q % 4)) {
    case 0: c = cr, s = sr; break;
    case 1: c = -sr, s = cr; break;
    case 2: c = -cr, s = -sr; break;
    default: c = sr, s = -cr; break;
  }
  return order::cos_sin_of_phase(phase);
}

TEST(RopeCosSin, WithinOneUlpOfTheExactPhase) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  double worst = 0;
  for (int i = 0; i < 1 << 20; ++i) {
    std::uint64_t phase = rng();
    if (i % 4 == 0) phase = (std::uint64_t(rng() % 4) << 62) + (rng() >> (rng() % 64));  // near a quarter
    if (i % 4 == 1) phase = (std::uint64_t(rng() % 4) << 62) - (rng() >> (rng() % 64));
    long double c, s;
    const order::CosSin got = exact_cos_sin(phase, c, s);
    const double e = std::max(std::fabs(got.cos - double(c)) / ulp_at(double(c)), std::fabs(got.sin - double(s)) / ulp_at(double(s)));
    ASSERT_LE(e, 1.0) << "phase " << phase;
    worst = std::max(worst, e);
  }
  std::printf("  cos/sin of the phase: max error %.3f ulp\n", worst);
  const order::CosSin zero = order::cos_sin_of_phase(0);
  EXPECT_EQ(f32_bits(zero.cos), f32_bits(1.0f));
  EXPECT_EQ(f32_bits(zero.sin), f32_bits(0.0f));
  const std::uint64_t quarter = std::uint64_t(1) << 62;
  for (int q = 1; q < 4; ++q) {
    const order::CosSin cs = order::cos_sin_of_phase(quarter * std::uint64_t(q));
    EXPECT_EQ(cs.cos, q == 2 ? -1.0f : 0.0f);
    EXPECT_EQ(cs.sin, q == 1 ? 1.0f : q == 3 ? -1.0f : 0.0f);
  }
}

// Against cos(p w) in long double at positions up to and past 2^24: within 1 ulp plus the phase
// table's rounding (w / 2 pi in double: 2^-52 relative, times p). The control rounds the angle
// to f32 first (p * w in f32, as an f32 pipeline does), which must miss that tolerance.
TEST(RopePosition, AccurateAtAnyPositionWhereAnF32AngleIsNot) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::vector<double> w = order::rope_inverse_frequencies(llama31_8b());
  const std::vector<std::uint64_t> steps = order::rope_phase_steps(w);
  std::vector<std::uint64_t> positions = {0, 1, 2, 4095, 4096, 131071, (1u << 24) - 1, (1u << 24) + 1, 1u << 30};
  for (int i = 0; i < 300; ++i) positions.push_back(rng() % (1u << 17));
  double worst = 0, control_worst = 0;
  std::int64_t control_misses = 0;
  for (const std::uint64_t p : positions) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      ASSERT_EQ(order::rope_phase(p + 1, steps[i]), order::rope_phase(p, steps[i]) + steps[i]);  // mod 2^64
      const long double angle = (long double)p * (long double)w[i];
      const double c = double(std::cos(angle)), s = double(std::sin(angle));
      const double tol_abs = 2 * M_PI * double(p) * (w[i] / (2 * M_PI) * 0x1p-51 + 0x1p-64);
      const order::CosSin got = order::cos_sin_of_phase(order::rope_phase(p, steps[i]));
      // in ulps, after the table's share: each of cos and sin within 1
      const double e = std::max((std::fabs(got.cos - c) - tol_abs) / ulp_at(c), (std::fabs(got.sin - s) - tol_abs) / ulp_at(s));
      ASSERT_LE(e, 1.0) << "p = " << p << ", i = " << i;
      worst = std::max(worst, e);
      const double f32_angle = double(float(p) * float(w[i]));
      const double ce = std::max((std::fabs(std::cos(f32_angle) - c) - tol_abs) / ulp_at(c),
                                 (std::fabs(std::sin(f32_angle) - s) - tol_abs) / ulp_at(s));
      control_misses += ce > 1.0;
      control_worst = std::max(control_worst, std::max(std::fabs(std::cos(f32_angle) - c), std::fabs(std::sin(f32_angle) - s)));
    }
  }
  std::printf("  rope cos/sin at positions to 2^30: max %.3f ulp beyond the table's rounding; f32 angle: error up to %.3g\n",
              worst, control_worst);
  EXPECT_GT(control_misses, 0) << "control: an f32 angle must miss the tolerance";
}

TEST(RopeRotation, HalfSplitAndInterleavedMatchLongDouble) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  double worst = 0;
  for (const order::RopeParams& p : rope_configs()) {
    const std::vector<double> w = order::rope_inverse_frequencies(p);
    const std::vector<std::uint64_t> steps = order::rope_phase_steps(w);
    const int d = p.dims, half = d / 2;
    for (int trial = 0; trial < 40; ++trial) {
      const std::uint64_t pos = rng() % 200000;
      const std::vector<float> x = random_row(std::size_t(d), rng);
      std::vector<float> y(static_cast<std::size_t>(d)), yi(static_cast<std::size_t>(d)), in_place = x;
      order::rope_half_split(x.data(), d, pos, steps.data(), y.data());
      order::rope_interleaved(x.data(), d, pos, steps.data(), yi.data());
      order::rope_half_split(in_place.data(), d, pos, steps.data(), in_place.data());
      ASSERT_EQ(std::memcmp(in_place.data(), y.data(), y.size() * 4), 0) << "in place must give the same bytes";
      for (int i = 0; i < half; ++i) {
        const long double angle = (long double)pos * (long double)w[std::size_t(i)];
        const long double c = std::cos(angle), s = std::sin(angle);
        auto check = [&](float x1, float x2, float y1, float y2) {
          const double tol = 4 * kU * (std::fabs(x1) + std::fabs(x2)) + 2 * M_PI * double(pos) * w[std::size_t(i)] * 0x1p-50 * (std::fabs(x1) + std::fabs(x2));
          const double e1 = std::fabs(double(y1) - double(x1 * c - x2 * s)), e2 = std::fabs(double(y2) - double(x2 * c + x1 * s));
          ASSERT_LE(std::max(e1, e2), tol) << "pos " << pos << " i " << i;
          if (tol > 0) worst = std::max(worst, std::max(e1, e2) / tol);
        };
        check(x[std::size_t(i)], x[std::size_t(i + half)], y[std::size_t(i)], y[std::size_t(i + half)]);
        check(x[std::size_t(2 * i)], x[std::size_t(2 * i + 1)], yi[std::size_t(2 * i)], yi[std::size_t(2 * i + 1)]);
      }
    }
  }
  std::printf("  rope rotation: max %.3f of the tolerance 4u(|x1| + |x2|)\n", worst);
  // The layout: a unit vector at dim i (i < d/2) turns into (cos, sin) at dims (i, i + d/2).
  const std::vector<std::uint64_t> steps = order::rope_phase_steps(order::rope_inverse_frequencies(llama31_8b()));
  std::vector<float> e(128, 0.0f), y(128);
  e[5] = 1.0f;
  order::rope_half_split(e.data(), 128, 1000, steps.data(), y.data());
  const order::CosSin cs = order::cos_sin_of_phase(order::rope_phase(1000, steps[5]));
  EXPECT_EQ(y[5], cs.cos);
  EXPECT_EQ(y[5 + 64], cs.sin);
}

// ---- attention --------------------------------------------------------------------------------

struct Cache {
  DType t;
  int d;
  std::vector<std::byte> k, v;
  std::int64_t rows() const { return std::int64_t(k.size() / (std::size_t(d) * ref_size(t))); }
  void append(const std::vector<float>& key, const std::vector<float>& value) {
    const std::size_t at = std::size_t(rows()) * std::size_t(d);
    k.resize(k.size() + std::size_t(d) * ref_size(t));
    v.resize(v.size() + std::size_t(d) * ref_size(t));
    for (int i = 0; i < d; ++i) ref_store(k.data(), at + std::size_t(i), t, key[std::size_t(i)]);
    for (int i = 0; i < d; ++i) ref_store(v.data(), at + std::size_t(i), t, value[std::size_t(i)]);
  }
  float key(std::int64_t j, int i) const { return ref_load(k.data(), std::size_t(j) * std::size_t(d) + std::size_t(i), t); }
  float value(std::int64_t j, int i) const { return ref_load(v.data(), std::size_t(j) * std::size_t(d) + std::size_t(i), t); }
};

Cache random_cache(DType t, int d, std::int64_t rows, std::mt19937_64& rng) {
  Cache c{t, d, {}, {}};
  for (std::int64_t j = 0; j < rows; ++j) c.append(random_row(std::size_t(d), rng, 0.5f), random_row(std::size_t(d), rng));
  return c;
}

std::vector<float> row(const Cache& c, const std::vector<float>& q, std::int64_t p, const order::AttentionParams& a,
                       int chunk = order::kAttentionChunk) {
  std::vector<float> out(static_cast<std::size_t>(c.d));
  order::attention_row_chunked(q.data(), p, c.k.data(), c.v.data(), c.t, std::size_t(c.d), a, chunk, out.data());
  return out;
}
bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}
int length_derived_chunk(std::int64_t cache_rows) { return int((cache_rows + 3) / 4); }  // the control

struct AttnCase {
  DType t;
  int d;
  std::int64_t window;
};
constexpr AttnCase kAttnCases[] = {{DType::bf16, 64, 0}, {DType::bf16, 128, 0}, {DType::f16, 256, 0}, {DType::f32, 128, 0},
                                   {DType::bf16, 128, 100}, {DType::bf16, 256, 512}, {DType::f16, 64, 37}};

// The row at p is the same bytes with a longer cache, whose rows past p are fresh keys or garbage
// (NaN, infinities, 1e30), and (with a window) whose rows before the window are garbage too.
Cache prefix(const Cache& c, std::int64_t rows) {
  const std::size_t bytes = std::size_t(rows) * std::size_t(c.d) * ref_size(c.t);
  return Cache{c.t, c.d, std::vector<std::byte>(c.k.begin(), c.k.begin() + std::ptrdiff_t(bytes)),
               std::vector<std::byte>(c.v.begin(), c.v.begin() + std::ptrdiff_t(bytes))};
}
void fill_row(Cache& c, std::int64_t j, float value) {
  for (int i = 0; i < c.d; ++i) {
    ref_store(c.k.data(), std::size_t(j) * std::size_t(c.d) + std::size_t(i), c.t, value);
    ref_store(c.v.data(), std::size_t(j) * std::size_t(c.d) + std::size_t(i), c.t, value);
  }
}

TEST(AttentionOrder, RowDependsOnlyOnItsQueryAndTheRowsItSees) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const float garbage[] = {std::nanf(""), std::numeric_limits<float>::infinity(), -1e30f, 1e30f};
  std::int64_t control_differs = 0;
  for (const AttnCase& c : kAttnCases) {
    const order::AttentionParams a{c.d, order::attention_scale(c.d), c.window};
    const Cache base = random_cache(c.t, c.d, 1000, rng);
    for (int trial = 0; trial < 12; ++trial) {
      const std::int64_t p = std::int64_t(rng() % 700), extra = 1 + std::int64_t(rng() % 300);
      const Cache exact = prefix(base, p + 1), longer_clean = prefix(base, p + 1 + extra);
      Cache longer = longer_clean;
      for (std::int64_t j = p + 1; j <= p + extra; j += 2) fill_row(longer, j, garbage[rng() % 4]);
      const std::int64_t lo = order::attention_first_visible(p, c.window);
      for (std::int64_t j = 0; j < lo; ++j) fill_row(longer, j, garbage[rng() % 4]);  // before the window
      const std::vector<float> q = random_row(std::size_t(c.d), rng);
      const std::vector<float> alone = row(exact, q, p, a);
      ASSERT_TRUE(same_bytes(alone, row(longer, q, p, a))) << "p = " << p << ", d = " << c.d;
      for (float v : alone) ASSERT_TRUE(std::isfinite(v));
      // the control: a chunk size from the cache's length (split count) moves the boundaries
      control_differs += !same_bytes(row(exact, q, p, a, length_derived_chunk(exact.rows())),
                                     row(longer_clean, q, p, a, length_derived_chunk(longer_clean.rows())));
    }
  }
  EXPECT_GT(control_differs, 0) << "control: a cache-length-derived chunk size must change some row's bytes";
}

// Decode appends one row per step and computes the newest row; verify writes M rows at once and
// computes them in any order. Each row's bytes agree; the control (chunk from the cache length)
// disagrees on some row.
TEST(AttentionOrder, VerifyBlockEqualsDecodeSteps) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::int64_t control_differs = 0;
  for (const AttnCase& c : kAttnCases) {
    const order::AttentionParams a{c.d, order::attention_scale(c.d), c.window};
    const std::int64_t p0 = 1 + std::int64_t(rng() % 400), m = 2 + std::int64_t(rng() % 15);
    const Cache full = random_cache(c.t, c.d, p0 + m, rng);
    std::vector<std::vector<float>> q;
    for (std::int64_t j = 0; j < m; ++j) q.push_back(random_row(std::size_t(c.d), rng));
    Cache growing{c.t, c.d, {}, {}};
    growing.k.assign(full.k.begin(), full.k.begin() + std::ptrdiff_t(std::size_t(p0) * std::size_t(c.d) * ref_size(c.t)));
    growing.v.assign(full.v.begin(), full.v.begin() + std::ptrdiff_t(std::size_t(p0) * std::size_t(c.d) * ref_size(c.t)));
    std::vector<std::vector<float>> decode, decode_control;
    for (std::int64_t j = 0; j < m; ++j) {
      std::vector<float> kr(static_cast<std::size_t>(c.d)), vr(static_cast<std::size_t>(c.d));
      for (int i = 0; i < c.d; ++i) kr[std::size_t(i)] = full.key(p0 + j, i), vr[std::size_t(i)] = full.value(p0 + j, i);
      growing.append(kr, vr);
      decode.push_back(row(growing, q[std::size_t(j)], p0 + j, a));
      decode_control.push_back(row(growing, q[std::size_t(j)], p0 + j, a, length_derived_chunk(growing.rows())));
    }
    std::vector<std::int64_t> order_of_rows(static_cast<std::size_t>(m));
    std::iota(order_of_rows.begin(), order_of_rows.end(), 0);
    std::shuffle(order_of_rows.begin(), order_of_rows.end(), rng);
    for (const std::int64_t j : order_of_rows) {
      ASSERT_TRUE(same_bytes(row(full, q[std::size_t(j)], p0 + j, a), decode[std::size_t(j)])) << "row " << p0 + j;
      control_differs += !same_bytes(row(full, q[std::size_t(j)], p0 + j, a, length_derived_chunk(full.rows())),
                                     decode_control[std::size_t(j)]);
    }
  }
  EXPECT_GT(control_differs, 0) << "control: a cache-length-derived chunk size must break decode == verify";
}

// Against softmax attention in double on the same q' = mul(q, scale), K and V. The bound follows
// the order: each score's dot error dS_j <= (d/8 + 3) u sum_i |q'_i k_j,i|; the weights then move
// by at most 2 max dS + 4 u max|s| (the subtractions) + (2 * 64 + 4 * chunks + 16) u (exp, the
// chunk sums, the fold, the division), relative to sum_j p_j |v_j,i|.
TEST(AttentionAccuracy, WithinDerivedBoundOfFloat64) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  double worst_ratio = 0, worst_rel = 0;
  for (const AttnCase& c : kAttnCases) {
    const order::AttentionParams a{c.d, order::attention_scale(c.d), c.window};
    const Cache cache = random_cache(c.t, c.d, 900, rng);
    for (int trial = 0; trial < 10; ++trial) {
      const std::int64_t p = std::int64_t(rng() % 900);
      std::vector<float> q = random_row(std::size_t(c.d), rng, trial % 3 == 0 ? 6.0f : 1.0f);  // some peaked rows
      const std::vector<float> got = row(cache, q, p, a);
      const std::int64_t lo = order::attention_first_visible(p, c.window);
      std::vector<double> s;
      double max_ds = 0, max_abs_s = 0, max_s = -1e300;
      for (std::int64_t j = lo; j <= p; ++j) {
        double dot = 0, mag = 0;
        for (int i = 0; i < c.d; ++i) {
          const double qs = double(q[std::size_t(i)] * a.scale);
          dot += qs * cache.key(j, i), mag += std::fabs(qs * cache.key(j, i));
        }
        s.push_back(dot);
        max_ds = std::max(max_ds, (c.d / 8 + 3) * kU * mag);
        max_abs_s = std::max(max_abs_s, std::fabs(dot));
        max_s = std::max(max_s, dot);
      }
      double total = 0;
      for (double& v : s) total += (v = std::exp(v - max_s));
      const double chunks = double(p / order::kAttentionChunk - lo / order::kAttentionChunk + 1);
      const double e = 2 * max_ds + 4 * kU * max_abs_s + (2 * order::kAttentionChunk + 4 * chunks + 16) * kU;
      for (int i = 0; i < c.d; ++i) {
        double ref = 0, mag = 0;
        for (std::int64_t j = lo; j <= p; ++j) {
          const double pj = s[std::size_t(j - lo)] / total;
          ref += pj * cache.value(j, i), mag += pj * std::fabs(cache.value(j, i));
        }
        const double err = std::fabs(double(got[std::size_t(i)]) - ref), tol = e * mag + 0x1p-140;
        ASSERT_LE(err, tol) << "p = " << p << ", i = " << i << ", d = " << c.d << ", window = " << c.window;
        worst_ratio = std::max(worst_ratio, err / tol);
        worst_rel = std::max(worst_rel, err / mag);
      }
    }
  }
  std::printf("  attention: max error %.3g of sum p|v| (%.2f of the derived bound)\n", worst_rel, worst_ratio);
}

}  // namespace
}  // namespace exactq::test
