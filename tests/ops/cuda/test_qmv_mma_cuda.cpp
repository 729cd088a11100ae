// qmv_mma on the GPU (docs/design.md §6), at every width: bitwise width invariance at every M up
// to 64, under reversal and on repeat, with qmv as the negative control; accuracy against float64,
// side by side with qmv's; agreement with the CPU reference within a tolerance (the tensor cores'
// own summation order is not mirrored); every weight read exactly (one-hot activations); clear
// errors for what it does not serve.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "exactq/cuda.h"
#include "exactq/mma_layout.h"
#include "exactq/qmv.h"
#include "exactq/quantize.h"

namespace exactq {
namespace {

using test::fresh_seed;

using Bytes = std::vector<std::byte>;

struct Case {
  QuantizedMatrix host;
  cuda::DeviceMatrix device;
  Bytes x;  // [m, k]
  std::int64_t m;
  cuda::DeviceMatrix fragments;  // the same matrix in qmv_mma's fragment layout, where it serves
};

Case make_case(std::int64_t n, std::int64_t k, int bits, int group, DType dtype, std::int64_t m, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> w(0.0f, 0.05f), xd(0.0f, 1.0f);
  std::vector<float> wf(std::size_t(n * k));
  for (auto& v : wf) v = w(rng);
  Case c{quantize(wf, n, k, bits, group, dtype), {}, Bytes(std::size_t(m * k) * dtype_size(dtype)), m, {}};
  c.device = cuda::DeviceMatrix::upload(c.host);
  if (mma_layout::fits(bits, group, k) && dtype != DType::f32)
    c.fragments = cuda::DeviceMatrix::upload(to_mma_fragments(c.host.view()));
  for (std::int64_t i = 0; i < m * k; ++i) store_f32(c.x.data(), std::size_t(i), dtype, xd(rng) * (1 + i % 7));
  return c;
}

Bytes rows_of(const Bytes& all, std::int64_t first, std::int64_t count, std::int64_t width, DType t) {
  const std::size_t row = std::size_t(width) * dtype_size(t);
  return Bytes(all.begin() + std::ptrdiff_t(first * row), all.begin() + std::ptrdiff_t((first + count) * row));
}

Bytes run_gpu(Kernel kernel, const Case& c, const Bytes& x, std::int64_t m, bool fragments = false) {
  cuda::DeviceBuffer dx(x.size()), dy(std::size_t(m * c.host.n) * dtype_size(c.host.dtype));
  dx.upload(x);
  dy.fill(0xA5);
  cuda::qmv(kernel, fragments ? c.fragments.view : c.device.view, dx.bytes(), m, dy.bytes());
  Bytes y(dy.size());
  dy.download(y);
  return y;
}

// v rounded to nearest even in bf16 (8 significant bits) or f16 (11, subnormals below 2^-14).
double round_to(double v, DType t) {
  const int digits = t == DType::bf16 ? 8 : 11, min_exp = t == DType::bf16 ? -126 : -14;
  if (v == 0) return 0;
  const int e = std::max(std::ilogb(v), min_exp);  // v = f * 2^e, 1 <= |f| < 2 where normal
  return std::ldexp(std::nearbyint(std::ldexp(v, digits - 1 - e)), e - digits + 1);
}

std::int64_t differing(const Bytes& a, const Bytes& b) {
  std::int64_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += a[i] != b[i];
  return d;
}

Bytes reversed(const Bytes& all, std::int64_t m, std::int64_t width, DType t) {
  Bytes out;
  for (std::int64_t v = m - 1; v >= 0; --v) {
    const Bytes r = rows_of(all, v, 1, width, t);
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

TEST(CudaQmvMma, BitwiseWidthInvariantUpTo64WithNegativeControl) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t ms[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 31, 33, 48, 64};
  std::int64_t control = 0;
  for (int bits : kSupportedBits)
    for (int group : {32, 64, 128})
      for (DType dtype : {DType::bf16, DType::f16}) {
        SCOPED_TRACE(std::to_string(bits) + "-bit g" + std::to_string(group) + " " + std::string(to_string(dtype)));
        const std::int64_t n = 67, k = 3840, m_all = 64;  // N odd and not a multiple of 16; K = 15 x 256
        const Case c = make_case(n, k, bits, group, dtype, m_all, seed + bits * 1000 + group + int(dtype));
        // MLX's layout is read at 4 and 8 bits only; the other widths run in the fragment layout.
        const bool mlx_served = bits == 4 || bits == 8;
        Bytes chain;
        for (std::int64_t v = 0; v < m_all; ++v) {
          const Bytes one = run_gpu(Kernel::qmv_mma, c, rows_of(c.x, v, 1, k, dtype), 1, !mlx_served);
          chain.insert(chain.end(), one.begin(), one.end());
        }
        // Both layouts against the MLX layout's chain: the fragment layout's kernel has the same bits.
        for (bool fragments : {false, true}) {
          if (!fragments && !mlx_served) continue;
          SCOPED_TRACE(fragments ? "fragment layout" : "MLX layout");
          for (std::int64_t m : ms) {
            const Bytes block = run_gpu(Kernel::qmv_mma, c, rows_of(c.x, 0, m, k, dtype), m, fragments);
            EXPECT_EQ(differing(block, rows_of(chain, 0, m, n, dtype)), 0) << "M = " << m;
          }
          const Bytes rev = run_gpu(Kernel::qmv_mma, c, reversed(c.x, m_all, k, dtype), m_all, fragments);
          EXPECT_EQ(differing(reversed(rev, m_all, n, dtype), chain), 0) << "reversed";
          EXPECT_EQ(differing(run_gpu(Kernel::qmv_mma, c, c.x, m_all, fragments),
                              run_gpu(Kernel::qmv_mma, c, c.x, m_all, fragments)), 0)
              << "repeat";
        }
        control += differing(run_gpu(Kernel::qmv, c, c.x, m_all), chain);
      }
  // Negative control: qmv's order is another one, so some output must differ. Both are far more
  // accurate than the bf16/f16 output rounding, so most outputs agree and a single format can
  // show no difference; over all of them some must.
  EXPECT_GT(control, 0) << "qmv_mma equals qmv on every output of every format";
}

// Error against float64 from the stored (dtype) scales, biases and codes, relative to the
// magnitude sum |x| (|s| q + |b|), and the count of outputs that are not float64's value correctly
// rounded; qmv measured alongside. qmv_mma reads the fragment layout (the default; the MLX
// layout gives the same bytes: FragmentLayoutGivesTheMlxLayoutsBytes). Also the CPU reference
// within tolerance.
TEST(CudaQmvMma, AccuracyAgainstFloat64AndCpuReference) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int bits : kSupportedBits)
    for (int group : {32, 128})
      for (DType dtype : {DType::bf16, DType::f16}) {
        SCOPED_TRACE(std::to_string(bits) + "-bit g" + std::to_string(group) + " " + std::string(to_string(dtype)));
        const std::int64_t n = 129, k = 4096, m = 5;
        const Case c = make_case(n, k, bits, group, dtype, m, seed + bits + group + int(dtype));
        const Bytes y_mma = run_gpu(Kernel::qmv_mma, c, c.x, m, true), y_qmv = run_gpu(Kernel::qmv, c, c.x, m);
        Bytes y_ref(y_mma.size());
        cpu::qmv(Kernel::qmv_mma, c.host.view(), c.x, m, y_ref);
        std::vector<float> s, b;
        std::vector<double> xf(std::size_t(m * k));
        for (std::size_t i = 0; i < xf.size(); ++i) xf[i] = load_f32(c.x.data(), i, dtype);
        const std::int64_t groups = k / group;
        const double u_out = dtype == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
        double worst_mma = 0, worst_qmv = 0;
        std::int64_t violations = 0, ref_violations = 0, mma_misrounded = 0, qmv_misrounded = 0;
        for (std::int64_t r = 0; r < n; ++r)
          for (std::int64_t v = 0; v < m; ++v) {
            double exact = 0, magnitude = 0;
            for (std::int64_t i = 0; i < k; ++i) {
              const std::size_t gi = std::size_t(r * groups + i / group);
              const double sc = load_f32(c.host.scales.data(), gi, dtype), bi = load_f32(c.host.biases.data(), gi, dtype);
              const double q = unpack_code(c.host.packed.data() + r * (k * bits / 8), i, bits);
              const double xv = xf[std::size_t(v * k + i)];
              exact += xv * (sc * q + bi);
              magnitude += std::fabs(xv) * (std::fabs(sc) * q + std::fabs(bi));
            }
            const std::size_t at = std::size_t(v * n + r);
            const double got = load_f32(y_mma.data(), at, dtype), qmv = load_f32(y_qmv.data(), at, dtype);
            const double ref = load_f32(y_ref.data(), at, dtype);
            // Per group a tensor-core sum (a few f32 roundings) and two fmas; K/group groups in
            // sequence; then the output rounding.
            const double bound = u_out * std::fabs(exact) + double(groups + 48) * std::ldexp(1.0, -24) * magnitude;
            violations += std::fabs(got - exact) > bound;
            ref_violations += std::fabs(got - ref) > 2 * bound;
            // Outputs other than float64's value correctly rounded: where the f32 error shows.
            mma_misrounded += got != round_to(exact, dtype);
            qmv_misrounded += qmv != round_to(exact, dtype);
            worst_mma = std::max(worst_mma, std::fabs(got - exact) / magnitude);
            worst_qmv = std::max(worst_qmv, std::fabs(qmv - exact) / magnitude);
          }
        EXPECT_EQ(violations, 0);
        EXPECT_EQ(ref_violations, 0);
        std::cout << "[ info     ] " << bits << "-bit g" << group << " " << to_string(dtype)
                  << " max error / sum|x|(|s|q+|b|): qmv_mma " << worst_mma << ", qmv " << worst_qmv
                  << "; outputs not correctly rounded: qmv_mma " << mma_misrounded << ", qmv " << qmv_misrounded
                  << " of " << n * m << "\n";
      }
}

// 8 bits, group 128: a ring stage holds one group, whose 2-byte parameters are copied as the
// aligned 4-byte word that holds them. With an odd number of groups per row (K = 33 x 128) and
// odd N, rows alternate which half is theirs and the matrix's last parameter has no aligned word
// of its own (only its 2 bytes are read). Checked against the CPU reference and for width
// invariance.
TEST(CudaQmvMma, OddGroupCountAtEightBitsGroup128) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    const std::int64_t n = 37, k = 33 * 128, m = 9;
    const Case c = make_case(n, k, 8, 128, dtype, m, seed + int(dtype));
    const Bytes y = run_gpu(Kernel::qmv_mma, c, c.x, m);
    Bytes y_ref(y.size());
    cpu::qmv(Kernel::qmv_mma, c.host.view(), c.x, m, y_ref);
    const double u_out = dtype == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    std::int64_t far = 0;
    for (std::size_t i = 0; i < std::size_t(m * n); ++i) {
      const double a = load_f32(y.data(), i, dtype), b = load_f32(y_ref.data(), i, dtype);
      far += std::fabs(a - b) > 4 * u_out * std::max(std::fabs(b), 1.0);  // a wrong parameter is far off
    }
    EXPECT_EQ(far, 0);
    for (std::int64_t v = 0; v < m; ++v)
      EXPECT_EQ(differing(run_gpu(Kernel::qmv_mma, c, rows_of(c.x, v, 1, k, dtype), 1), rows_of(y, v, 1, n, dtype)), 0)
          << "vector " << v;
  }
}

// The fragment layout's kernel gives the MLX layout's bytes on the shapes that exercise its
// edges: x restaged in tiles (K = 8192 at M = 16), several trips over the resident warps (more
// tasks than 16 warps x 132 SMs), padding rows (N not a multiple of 16), an odd group count at
// 8 bits group 128, both launch shapes of the fragment kernel (few tasks: 8-warp blocks with a
// deeper ring; many: 16-warp blocks), and K cut into 8 segments (order.h), equal (35 x 8192) or
// not (33 rounds), with x restaged per segment at M = 16 (35 x 8448). qmv, another order, is the
// negative control.
TEST(CudaQmvMma, FragmentLayoutGivesTheMlxLayoutsBytes) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Shape { std::int64_t n, k; };
  std::int64_t control = 0;
  for (int bits : {4, 8})
    for (int group : {32, 64, 128})
      for (DType dtype : {DType::bf16, DType::f16})
        for (Shape s : {Shape{35, 8192}, Shape{34011, 256}, Shape{37, 33 * 128}, Shape{35, 33 * 256}}) {
          if (s.k % (bits == 4 ? 256 : 128) != 0) continue;  // the MLX-layout kernel's stage
          SCOPED_TRACE(std::to_string(bits) + "-bit g" + std::to_string(group) + " " + std::string(to_string(dtype)) +
                       " " + std::to_string(s.n) + "x" + std::to_string(s.k));
          const Case c = make_case(s.n, s.k, bits, group, dtype, 17, seed + bits * 1000 + group + int(dtype) + s.n);
          for (std::int64_t m : {1, 8, 16, 17}) {
            const Bytes x = rows_of(c.x, 0, m, s.k, dtype);
            const Bytes mlx = run_gpu(Kernel::qmv_mma, c, x, m), fragments = run_gpu(Kernel::qmv_mma, c, x, m, true);
            EXPECT_EQ(differing(fragments, mlx), 0) << "M = " << m;
            if (m == 17) control += differing(fragments, run_gpu(Kernel::qmv, c, x, m));
          }
        }
  EXPECT_GT(control, 0) << "the fragment layout's qmv_mma equals qmv everywhere";
}

// Every weight read exactly: vector v has one non-zero activation, a signed power of two x at
// k = v, so each output is one group's fold of one exact product, fma(s, q x, b x) rounded once
// (the mma's sum of one non-zero term is exact whatever its order, and the other groups and K
// segments add zeros). Any code, plane, parameter or segment read from the wrong place shows as a
// wrong output. Shapes: padding rows, K cut into 8 segments (37 x 8192), several trips over the
// resident warps (34011 x 256); every width, layout (where served), group and dtype.
TEST(CudaQmvMma, OneHotActivationsGiveEveryWeightExactly) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Shape { std::int64_t n, k; };
  for (int bits : kSupportedBits)
    for (int group : {32, 64, 128})
      for (DType dtype : {DType::bf16, DType::f16})
        for (Shape s : {Shape{37, 512}, Shape{37, 8192}, Shape{34011, 256}}) {
          if ((group != 64) != (s.k == 512)) continue;  // groups 32 and 128 on the short K, 64 on the others
          SCOPED_TRACE(std::to_string(bits) + "-bit g" + std::to_string(group) + " " + std::string(to_string(dtype)) +
                       " " + std::to_string(s.n) + "x" + std::to_string(s.k));
          const Case c = make_case(s.n, s.k, bits, group, dtype, 1, seed + bits * 1000 + group + int(dtype) + s.n);
          const std::int64_t m = s.k;
          std::mt19937_64 rng(seed + 7 * bits + s.k);
          std::vector<float> xv(static_cast<std::size_t>(m));
          Bytes x(std::size_t(m * s.k) * dtype_size(dtype));  // zero bytes: +0 in bf16 and f16
          for (std::int64_t v = 0; v < m; ++v) {
            xv[std::size_t(v)] = std::ldexp(rng() % 2 ? -1.0f : 1.0f, int(rng() % 5) - 2);
            store_f32(x.data(), std::size_t(v * s.k + v), dtype, xv[std::size_t(v)]);
          }
          const std::int64_t groups = s.k / group;
          // Output (r, v) as it must be if the kernel read the code at k = code_k for k = v.
          auto expected = [&](std::int64_t r, std::int64_t v, std::int64_t code_k) {
            const std::size_t gi = std::size_t(r * groups + v / group);
            const float sc = load_f32(c.host.scales.data(), gi, dtype), bi = load_f32(c.host.biases.data(), gi, dtype);
            const float q = float(unpack_code(c.host.packed.data() + r * c.host.view().row_bytes(), code_k, bits));
            const float xx = xv[std::size_t(v)];
            Bytes want(dtype_size(dtype));
            store_f32(want.data(), 0, dtype, std::fma(sc, q * xx, bi * xx));
            return load_f32(want.data(), 0, dtype);
          };
          std::int64_t wrong = 0, neighbour_differs = 0;
          for (bool fragments : {false, true}) {
            if (!fragments && bits != 4 && bits != 8) continue;
            const Bytes y = run_gpu(Kernel::qmv_mma, c, x, m, fragments);
            for (std::int64_t v = 0; v < m; ++v)
              for (std::int64_t r = 0; r < s.n; ++r) {
                const float got = load_f32(y.data(), std::size_t(v * s.n + r), dtype);
                wrong += got != expected(r, v, v);
                // Negative control: the same output against its neighbour's code (k = v xor 1, the
                // same group) must differ somewhere, or the check could not see a misplaced code.
                neighbour_differs += got != expected(r, v, v ^ 1);
              }
          }
          EXPECT_EQ(wrong, 0);
          EXPECT_GT(neighbour_differs, 0);
        }
}

TEST(CudaQmvMma, RejectsWhatItDoesNotServe) {
  REQUIRE_GPU();
  const Case f32 = make_case(16, 256, 4, 64, DType::f32, 1, 1);
  EXPECT_THROW(run_gpu(Kernel::qmv_mma, f32, f32.x, 1), std::invalid_argument);
  const Case three = make_case(16, 256, 3, 64, DType::bf16, 1, 1);
  EXPECT_THROW(run_gpu(Kernel::qmv_mma, three, three.x, 1), std::invalid_argument);  // MLX's layout at 3 bits
  EXPECT_NO_THROW(run_gpu(Kernel::qmv_mma, three, three.x, 1, true));                 // control: the fragment layout
  const Case odd_k = make_case(16, 320, 4, 64, DType::bf16, 1, 1);  // 320 is not a multiple of 256
  EXPECT_THROW(run_gpu(Kernel::qmv_mma, odd_k, odd_k.x, 1), std::invalid_argument);
  // Scales off 16-byte alignment (parameters are copied in pieces of up to 16 bytes): the first
  // 16 rows of a 32-row matrix, with the scales read from 2 bytes on; from 16 bytes on (control)
  // the same view is accepted.
  const Case params = make_case(32, 256, 4, 64, DType::bf16, 1, 1);
  auto run_rows16_scales_from = [&](std::size_t offset) {
    QuantizedMatrixView v = params.device.view;
    const std::size_t param_bytes = 16 * 4 * 2;  // 16 rows x 4 groups x bf16
    v.n = 16;
    v.packed = v.packed.subspan(0, std::size_t(16 * v.row_bytes()));
    v.scales = v.scales.subspan(offset, param_bytes);
    v.biases = v.biases.subspan(0, param_bytes);
    cuda::DeviceBuffer dx(params.x.size()), dy(16 * 2);
    dx.upload(params.x);
    cuda::qmv(Kernel::qmv_mma, v, dx.bytes(), 1, dy.bytes());
  };
  EXPECT_THROW(run_rows16_scales_from(2), std::invalid_argument);
  EXPECT_NO_THROW(run_rows16_scales_from(16));
  const Case ok = make_case(16, 256, 4, 64, DType::bf16, 1, 1);  // control
  EXPECT_NO_THROW(run_gpu(Kernel::qmv_mma, ok, ok.x, 1));
  EXPECT_NO_THROW(run_gpu(Kernel::qmv_mma, ok, ok.x, 1, true));
  // Only qmv_mma reads the fragment layout.
  EXPECT_THROW(run_gpu(Kernel::qmv, ok, ok.x, 1, true), std::invalid_argument);
}

}  // namespace
}  // namespace exactq
