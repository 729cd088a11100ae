// The elementwise functions of src/order/math.h against double precision, and greedy argmax
// (src/order/argmax.h). Each function's error, in ulps of the double result (the f32 ulp at that
// magnitude, 2^-149 at least), is measured on random bit patterns over the whole f32 range, on
// uniform inputs over the range where the function is not trivial, and on special values, and
// must stay within the bound math.h states; the measured maximum is printed.
// Identity checks: exp equals the documented sequence re-written here (control: the same
// polynomial in Estrin's order differs); argmax's index is the same for any reduction tree
// (control: a >= scan, which lets a later tie win, differs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "order/argmax.h"
#include "order/math.h"
#include "test_util.h"

namespace exactq::test {
namespace {

double ulp_at(double ref) {
  const double a = std::fabs(ref);
  if (a < 0x1p-126) return 0x1p-149;
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 24);
}

// |y - ref| in ulps of ref; a NaN/infinity mismatch is "infinitely" wrong. ref at or beyond
// 2^128 (1 - 2^-25) rounds to infinity, so there y must be that infinity.
double ulp_error(float y, double ref) {
  constexpr double kHuge = 1e30;
  if (std::isnan(ref) || std::isnan(y)) return std::isnan(ref) && std::isnan(y) ? 0.0 : kHuge;
  const double overflow = std::ldexp(1.0 - std::ldexp(1.0, -25), 128);
  if (std::fabs(ref) >= overflow) return std::isinf(y) && std::signbit(y) == std::signbit(ref) ? 0.0 : kHuge;
  if (std::isinf(y)) return kHuge;
  return std::fabs(double(y) - ref) / ulp_at(ref);
}

double ref_exp(double x) { return std::exp(x); }
double ref_tanh(double x) { return std::tanh(x); }
double ref_rsqrt(double x) { return 1.0 / std::sqrt(x); }
double ref_silu(double x) {
  if (std::isinf(x)) return x > 0 ? x : -0.0;
  return x / (1.0 + std::exp(-x));
}
// 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3), all in double.
double ref_gelu_tanh(double x) {
  if (std::isinf(x)) return x > 0 ? x : -0.0;
  const double z = 2.0 * std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-z));
}

struct Worst {
  double ulps = 0;
  float x = 0;
  std::int64_t count = 0;
  void take(float input, float y, double ref) {
    ++count;
    const double e = ulp_error(y, ref);
    if (e > ulps) ulps = e, x = input;
  }
};

using F32 = float (*)(float);
using F64 = double (*)(double);

// Random bit patterns (every class: NaN, inf, subnormal, huge), uniform values in [lo, hi], and a
// dense sweep of the f32 values in [sweep_lo, sweep_hi] (every `stride`-th).
Worst measure(F32 f, F64 ref, double lo, double hi, float sweep_lo, float sweep_hi, int stride, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Worst w;
  for (int i = 0; i < 1 << 20; ++i) {
    const float x = f32_from(std::uint32_t(rng()));
    w.take(x, f(x), ref(double(x)));
  }
  std::uniform_real_distribution<double> in_range(lo, hi);
  for (int i = 0; i < 1 << 20; ++i) {
    const float x = float(in_range(rng));
    w.take(x, f(x), ref(double(x)));
  }
  for (float x = sweep_lo; x <= sweep_hi;) {
    w.take(x, f(x), ref(double(x)));
    for (int s = 0; s < stride; ++s) x = std::nextafter(x, std::numeric_limits<float>::infinity());
  }
  return w;
}

void report(const char* name, const Worst& w, double bound) {
  std::printf("  %-10s max error %.3f ulp (bound %.1f) at x = %a, over %lld inputs\n", name, w.ulps, bound, double(w.x),
              static_cast<long long>(w.count));
  EXPECT_LE(w.ulps, bound) << name << " at x = " << w.x;
}

std::uint32_t bits(float f) { return f32_bits(f); }

TEST(MathAccuracy, ExpWithinOneUlp) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  // the sweep covers the subnormal results and the underflow edge (e^x < 2^-126 below -87.34)
  report("exp", measure(order::exp, ref_exp, -104.5, 89.5, -104.0f, -86.0f, 5, seed), 1.0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bits(order::exp(0.0f)), bits(1.0f));
  EXPECT_EQ(bits(order::exp(-0.0f)), bits(1.0f));
  EXPECT_EQ(bits(order::exp(inf)), bits(inf));
  EXPECT_EQ(bits(order::exp(-inf)), bits(0.0f));
  EXPECT_EQ(bits(order::exp(std::nanf(""))), 0x7fffffffu);
  EXPECT_EQ(bits(order::exp(-std::nanf(""))), 0x7fffffffu);
  EXPECT_EQ(bits(order::exp(f32_from(1))), bits(1.0f));  // e^(2^-149) rounds to 1
  // the overflow edge: the last finite result and the first infinite one are where double says
  for (float x = 88.72f; x < 88.73f; x = std::nextafter(x, inf)) {
    const bool want_inf = ulp_error(inf, std::exp(double(x))) == 0.0;
    ASSERT_EQ(std::isinf(order::exp(x)), want_inf) << "x = " << x;
  }
}

TEST(MathAccuracy, TanhWithinTwoUlps) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  // the sweep crosses the polynomial's edge at 0.625
  report("tanh", measure(order::tanh, ref_tanh, -10.0, 10.0, 0.6f, 0.65f, 3, seed), 2.0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bits(order::tanh(0.0f)), bits(0.0f));
  EXPECT_EQ(bits(order::tanh(-0.0f)), bits(-0.0f));
  EXPECT_EQ(bits(order::tanh(inf)), bits(1.0f));
  EXPECT_EQ(bits(order::tanh(-inf)), bits(-1.0f));
  EXPECT_EQ(bits(order::tanh(9.1f)), bits(1.0f));
  EXPECT_EQ(bits(order::tanh(-1e30f)), bits(-1.0f));
  EXPECT_EQ(bits(order::tanh(std::nanf(""))), 0x7fffffffu);
  EXPECT_EQ(bits(order::tanh(f32_from(0x80000001u))), 0x80000001u);  // subnormals are their own tanh
}

TEST(MathAccuracy, SiluWithinFourUlps) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  // the sweep covers x e^x falling through the subnormals to zero (near -110)
  report("silu", measure(order::silu, ref_silu, -120.0, 30.0, -112.0f, -80.0f, 7, seed), 4.0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bits(order::silu(0.0f)), bits(0.0f));
  EXPECT_EQ(bits(order::silu(-0.0f)), bits(-0.0f));
  EXPECT_EQ(bits(order::silu(inf)), bits(inf));
  EXPECT_EQ(bits(order::silu(-inf)), bits(-0.0f));
  EXPECT_EQ(bits(order::silu(std::nanf(""))), 0x7fffffffu);
}

TEST(MathAccuracy, GeluTanhWithinFourUlps) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  // the sweep covers the tail where 1 + tanh(u) would cancel (x < -3) down to the -16 cut
  report("gelu_tanh", measure(order::gelu_tanh, ref_gelu_tanh, -17.0, 17.0, -16.0f, -3.0f, 13, seed), 4.0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bits(order::gelu_tanh(0.0f)), bits(0.0f));
  EXPECT_EQ(bits(order::gelu_tanh(-0.0f)), bits(-0.0f));
  EXPECT_EQ(bits(order::gelu_tanh(inf)), bits(inf));
  EXPECT_EQ(bits(order::gelu_tanh(-inf)), bits(-0.0f));
  EXPECT_EQ(bits(order::gelu_tanh(std::nanf(""))), 0x7fffffffu);
}

TEST(MathAccuracy, RsqrtWithinOneAndAHalfUlps) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  report("rsqrt", measure(order::rsqrt, ref_rsqrt, 1e-6, 1e6, f32_from(1), f32_from(0x00800000u), 4099, seed), 1.5);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bits(order::rsqrt(0.0f)), bits(inf));
  EXPECT_EQ(bits(order::rsqrt(-0.0f)), bits(-inf));
  EXPECT_EQ(bits(order::rsqrt(inf)), bits(0.0f));
  EXPECT_TRUE(std::isnan(order::rsqrt(-1.0f)));
  EXPECT_EQ(bits(order::rsqrt(4.0f)), bits(0.5f));
}

// exp's documented sequence, written out here; and the same polynomial in Estrin's order, which
// is as accurate but rounds differently: the identity must hold and the control must differ.
float exp_as_documented(float x, bool estrin) {
  const float t = std::fma(x, 0x1.715476p+0f, 0x1.8p+23f);
  const int k = int(f32_bits(t)) - int(f32_bits(0x1.8p+23f));
  const float kf = t - 0x1.8p+23f;
  const float r = std::fma(kf, -0x1.62e43p-1f, x) + kf * 0x1.05c61p-29f;
  const float c[8] = {1.0f, 1.0f, 0.5f, 0x1.555556p-3f, 0x1.5554e8p-5f, 0x1.1110ep-7f, 0x1.6d44d2p-10f, 0x1.a1267p-13f};
  float p;
  if (!estrin) {
    p = c[7];
    for (int i = 6; i >= 0; --i) p = std::fma(p, r, c[i]);
  } else {
    const float r2 = r * r, r4 = r2 * r2;
    const float a = std::fma(c[1], r, c[0]), b = std::fma(c[3], r, c[2]), d = std::fma(c[5], r, c[4]), e = std::fma(c[7], r, c[6]);
    p = std::fma(std::fma(e, r2, d), r4, std::fma(b, r2, a));
  }
  const int k1 = k >> 1;  // as math.h: two multiplies by powers of two
  return float(double(p) * std::ldexp(1.0, k1)) * float(std::ldexp(1.0, k - k1));
}

TEST(MathOrder, ExpIsTheDocumentedSequence) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> range(-100.0f, 88.0f);
  std::int64_t estrin_differs = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = range(rng);
    ASSERT_EQ(bits(order::exp(x)), bits(exp_as_documented(x, false))) << "x = " << x;
    estrin_differs += bits(order::exp(x)) != bits(exp_as_documented(x, true));
  }
  EXPECT_GT(estrin_differs, 0) << "control: another evaluation order must change some bytes";
}

// ---- argmax -----------------------------------------------------------------------------------

std::int64_t argmax_ge_scan(const std::vector<float>& x) {  // the control: later ties win
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < std::int64_t(x.size()); ++i)
    if (x[std::size_t(i)] >= x[std::size_t(best)]) best = i;
  return best;
}

// The reference written here: the smallest index holding the largest non-NaN value.
std::int64_t argmax_reference(const std::vector<float>& x) {
  double best = -std::numeric_limits<double>::infinity();
  bool any = false;
  for (float v : x)
    if (!std::isnan(v) && (!any || double(v) > best)) best = v, any = true;
  if (!any) return 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!std::isnan(x[i]) && double(x[i]) == best) return std::int64_t(i);
  return 0;
}

TEST(ArgmaxOrder, LowestIndexWinsTiesAndNanNeverWins) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  auto am = [](const std::vector<float>& x) { return order::argmax(x.data(), std::int64_t(x.size())); };
  EXPECT_EQ(am({1.0f, 3.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(am({nan, 1.0f, nan, 1.0f}), 1);
  EXPECT_EQ(am({nan, nan, nan}), 0);
  EXPECT_EQ(am({}), 0);
  EXPECT_EQ(am({-inf, -inf}), 0);
  EXPECT_EQ(am({nan, -inf, -1e30f}), 2);
  EXPECT_EQ(am({-0.0f, 0.0f}), 0);
  EXPECT_EQ(am({0.0f, -0.0f}), 0);
  EXPECT_EQ(am({1.0f, inf, nan, inf}), 1);
  EXPECT_EQ(argmax_ge_scan({1.0f, 3.0f, 3.0f, 2.0f}), 2) << "control: a >= scan lets the later tie win";
}

// Random logits with many ties (values from a small set, some NaN), reduced as written and as a
// random tree of argmax_better merges (how a GPU reduces): all give the reference's index.
TEST(ArgmaxOrder, AnyReductionTreeGivesTheSameIndex) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::int64_t control_differs = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const std::size_t n = 1 + rng() % 300;
    std::vector<float> x(n);
    for (float& v : x) {
      const int c = int(rng() % 16);
      v = c == 0 ? std::nanf("") : c == 1 ? -0.0f : float(int(rng() % 7) - 3);
    }
    const std::int64_t want = argmax_reference(x);
    ASSERT_EQ(order::argmax(x.data(), std::int64_t(n)), want);
    struct Best {
      float v;
      std::int64_t i;
    };
    std::vector<Best> parts;
    for (std::size_t i = 0; i < n; ++i) parts.push_back({x[i], order::is_nan(x[i]) ? -1 : std::int64_t(i)});
    while (parts.size() > 1) {  // merge two random neighbours until one is left
      const std::size_t at = rng() % (parts.size() - 1);
      Best a = parts[at], b = parts[at + 1];
      if (b.i >= 0 && order::argmax_better(b.v, b.i, a.v, a.i)) a = b;
      parts[at] = a;
      parts.erase(parts.begin() + std::ptrdiff_t(at) + 1);
    }
    ASSERT_EQ(parts[0].i < 0 ? 0 : parts[0].i, want);
    control_differs += argmax_ge_scan(x) != want;
  }
  EXPECT_GT(control_differs, 0) << "control: a >= scan must pick another index on some tie";
}

}  // namespace
}  // namespace exactq::test
