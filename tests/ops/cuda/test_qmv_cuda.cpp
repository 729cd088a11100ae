// The CUDA kernels against the CPU mirror, byte for byte, and their width invariance on the GPU.
// Without a usable GPU every test skips with a message (CI compiles them; the H200 runs them).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "exactq/cuda.h"
#include "exactq/qmv.h"
#include "exactq/quantize.h"
#include "expect_invalid.h"

namespace exactq {
namespace {

using test::fresh_seed;

std::vector<float> normal_values(std::size_t count, float scale, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(count);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<std::byte> to_dtype(const std::vector<float>& v, DType dtype) {
  std::vector<std::byte> out(v.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < v.size(); ++i) store_f32(out.data(), i, dtype, v[i]);
  return out;
}

struct Problem {
  QuantizedMatrix host;
  cuda::DeviceMatrix device;
  std::vector<std::byte> x;  // [m, k] in dtype
  std::int64_t m;
};

Problem make_problem(std::int64_t n, std::int64_t k, int bits, int group, DType dtype, std::int64_t m,
                     std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Problem p{quantize(normal_values(std::size_t(n * k), 0.05f, rng), n, k, bits, group, dtype), {}, {}, m};
  p.device = cuda::DeviceMatrix::upload(p.host);
  p.x = to_dtype(normal_values(std::size_t(m * k), 1.0f, rng), dtype);
  return p;
}

std::vector<std::byte> run_gpu(Kernel kernel, const Problem& p, const std::vector<std::byte>& x, std::int64_t m,
                               const QmvOptions& options = {}) {
  cuda::DeviceBuffer dx(x.size()), dy(std::size_t(m * p.host.n) * dtype_size(p.host.dtype));
  dx.upload(x);
  dy.fill(0xA5);  // poisoned: an unwritten byte would differ
  cuda::qmv(kernel, p.device.view, dx.bytes(), m, dy.bytes(), options);
  std::vector<std::byte> y(dy.size());
  dy.download(y);
  return y;
}

std::vector<std::byte> run_cpu(Kernel kernel, const Problem& p, const std::vector<std::byte>& x, std::int64_t m) {
  std::vector<std::byte> y(std::size_t(m * p.host.n) * dtype_size(p.host.dtype));
  cpu::qmv(kernel, p.host.view(), x, m, y);
  return y;
}

std::int64_t differing(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  std::int64_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += a[i] != b[i];
  return d;
}

// The negative control of a comparison with the CPU mirror: the GPU's bytes of an exact-family
// kernel against the CPU's bytes of the other order (qmv_wide) on the same data. Summed over a
// test's cases it must be above 0, or the comparisons could not have caught a kernel that summed
// in another order. Counted on f32 or f16 outputs, or on enough bf16 ones, where two orders show.
std::int64_t other_order_differs(const Problem& p, const std::vector<std::byte>& x, std::int64_t m,
                                 const std::vector<std::byte>& gpu_exact_family) {
  return differing(gpu_exact_family, run_cpu(Kernel::qmv_wide, p, x, m));
}
constexpr const char* kControlMessage = "qmv_wide's order equals qmv's on every byte: the comparisons above could not have failed";

// Every kernel, bits, group and dtype: CUDA bytes == CPU mirror bytes.
TEST(CudaQmv, EqualsCpuMirrorForEveryFormat) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Kernel kernels[] = {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide};
  std::int64_t control = 0;
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128})
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        const std::int64_t n = 37, k = 3840, m = 7;  // N not a multiple of 4 or 8; K not of 1024
        const Problem p = make_problem(n, k, bits, group, dtype, m, seed + bits * 100 + group + int(dtype));
        for (Kernel kernel : kernels) {
          SCOPED_TRACE(std::string(to_string(kernel)) + " bits " + std::to_string(bits) + " group " +
                       std::to_string(group) + " " + std::string(to_string(dtype)));
          const std::vector<std::byte> cpu = run_cpu(kernel, p, p.x, m);
          const std::vector<std::byte> gpu = run_gpu(kernel, p, p.x, m);
          EXPECT_EQ(differing(gpu, cpu), 0);
          if (kernel == Kernel::qmv && dtype == DType::f32) control += other_order_differs(p, p.x, m, gpu);
          if (kernel == Kernel::qmv_streamed) {  // passes of 4 and 3 too (the dtype as a template argument)
            QmvOptions four;
            four.streamed_max_vectors = 4;
            EXPECT_EQ(differing(run_gpu(kernel, p, p.x, m, four), cpu), 0) << "passes of 4 and 3";
          }
        }
      }
  EXPECT_GT(control, 0) << kControlMessage;
}

// Rows whose byte length is not a multiple of 16 (K * bits % 128 != 0: possible for 2, 3, 5 and
// 6 bits at groups 32 and 64), so rows start at every alignment the format allows.
TEST(CudaQmv, EqualsCpuMirrorWhereRowsAreNotSixteenByteAligned) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::int64_t control = 0;
  for (int bits : {2, 3, 5, 6})
    for (int group : {32, 64})
      for (DType dtype : {DType::bf16, DType::f32}) {  // f32 outputs for the control
        const std::int64_t n = 21, k = group == 32 ? 32 * 37 : 64 * 19, m = 5;
        const Problem p = make_problem(n, k, bits, group, dtype, m, seed + bits * 10 + group + int(dtype));
        for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed}) {
          SCOPED_TRACE(std::string(to_string(kernel)) + " bits " + std::to_string(bits) + " group " +
                       std::to_string(group) + " row bytes " + std::to_string(k * bits / 8) + " " +
                       std::string(to_string(dtype)));
          const std::vector<std::byte> gpu = run_gpu(kernel, p, p.x, m);
          EXPECT_EQ(differing(gpu, run_cpu(kernel, p, p.x, m)), 0);
          if (dtype == DType::f32) control += other_order_differs(p, p.x, m, gpu);
        }
      }
  EXPECT_GT(control, 0) << kControlMessage;
}

// Shapes that exercise tails, K tiling (K larger than one shared-memory tile) and many rows.
TEST(CudaQmv, EqualsCpuMirrorOnShapes) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Shape {
    std::int64_t n, k;
  };
  std::int64_t control = 0;  // over 160,000 bf16 outputs, most of them from K of 4096 and more
  for (Shape s : {Shape{1, 32 * 4}, Shape{7, 320}, Shape{13, 15360}, Shape{129, 28672}, Shape{4099, 4096},
                  Shape{65, 8192 + 3 * 128}, Shape{37, 1216}, Shape{2053, 7168 + 1024}})
    for (std::int64_t m : {1, 3, 8, 13}) {
      SCOPED_TRACE("N " + std::to_string(s.n) + " K " + std::to_string(s.k) + " M " + std::to_string(m));
      const Problem p = make_problem(s.n, s.k, 4, 64, DType::bf16, m, seed + std::uint64_t(s.n * 7 + m));
      for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide}) {
        const std::vector<std::byte> gpu = run_gpu(kernel, p, p.x, m);
        EXPECT_EQ(differing(gpu, run_cpu(kernel, p, p.x, m)), 0) << to_string(kernel);
        if (kernel == Kernel::qmv) control += other_order_differs(p, p.x, m, gpu);
      }
    }
  EXPECT_GT(control, 0) << kControlMessage;
}

// Several trips of tasks over the resident warps with a partial last one, whose tasks' K is split
// over 2 or 4 warps. Sized for a GPU of 132 SMs, as the H100 and the H200 have
// (2112 warps of 4-row tasks at 2-4 bits, of 2-row tasks at 8): remainders of 801 and 701 tasks
// (split 2), 301 and 501 (split 4), 1000 (split 2). K has a partial last round.
TEST(CudaQmv, EqualsCpuMirrorOverSeveralTrips) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Case {
    int bits;
    std::int64_t n, k;
  };
  std::int64_t control = 0;
  // 4, 5 and 6 bits carry each trip's first round over from the trip before (K in one tile; a
  // trip before a split one carries nothing); K = 17408 takes two tiles, where nothing is carried.
  for (Case c : {Case{4, 4 * (2112 + 800) + 3, 4416}, Case{4, 4 * (2 * 2112 + 300) + 1, 4416},
                 Case{8, 2 * (2112 + 500) + 1, 2048 + 96}, Case{3, 4 * (2112 + 1000), 8192},
                 Case{2, 4 * (2112 + 700) + 2, 3840}, Case{5, 2 * (2 * 2112 + 300) + 1, 4416},
                 Case{6, 2 * (2 * 2112 + 900), 3840}, Case{4, 4 * (2112 + 100) + 1, 17408}})
    for (std::int64_t m : {1, 2}) {
      SCOPED_TRACE("bits " + std::to_string(c.bits) + " N " + std::to_string(c.n) + " K " + std::to_string(c.k) +
                   " M " + std::to_string(m));
      const Problem p = make_problem(c.n, c.k, c.bits, 32, DType::f16, m, seed + std::uint64_t(c.n + m));
      const std::vector<std::byte> cpu = run_cpu(Kernel::qmv, p, p.x, m);
      const std::vector<std::byte> gpu = run_gpu(Kernel::qmv, p, p.x, m);
      EXPECT_EQ(differing(gpu, cpu), 0);
      control += other_order_differs(p, p.x, m, gpu);
    }
  EXPECT_GT(control, 0) << kControlMessage;  // over 200,000 f16 outputs
}

// qmv_wide's tasks of 4 rows over several trips of the resident warps (on the H200, 2112 of them
// at two blocks per SM: remainders of 300 and 1001 tasks), with K in one tile and in two (at
// V = 4 and 5 a tile holds 4096 values, so K = 5120 re-stages x in every trip), its register
// ring over groups of 1, 2 and 4 chunks, and the ladder of rows past N. The control: the same
// bytes against the CPU's qmv, the other order.
TEST(CudaQmv, WideEqualsCpuMirrorOverSeveralTripsAndTiles) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Case {
    int bits, group;
    std::int64_t n, k;
    DType dtype;
  };
  std::int64_t control = 0;
  for (Case c : {Case{4, 64, 4 * (2 * 2112 + 300) + 3, 5120, DType::bf16}, Case{3, 32, 4 * (2112 + 1001) + 1, 2048, DType::f32},
                 Case{8, 128, 4 * (2112 + 1001) + 2, 5120 + 128, DType::f16}})
    for (std::int64_t m : {1, 5, 7}) {
      SCOPED_TRACE("bits " + std::to_string(c.bits) + " group " + std::to_string(c.group) + " N " + std::to_string(c.n) +
                   " K " + std::to_string(c.k) + " M " + std::to_string(m));
      const Problem p = make_problem(c.n, c.k, c.bits, c.group, c.dtype, m, seed + std::uint64_t(c.n * 3 + m));
      const std::vector<std::byte> gpu = run_gpu(Kernel::qmv_wide, p, p.x, m);
      EXPECT_EQ(differing(gpu, run_cpu(Kernel::qmv_wide, p, p.x, m)), 0);
      control += differing(gpu, run_cpu(Kernel::qmv, p, p.x, m));
    }
  EXPECT_GT(control, 0) << "qmv's order equals qmv_wide's on every byte: the comparisons above could not have failed";
}

// qmv_streamed's passes where the matrix has many rows: from 8 trips per warp of the two-block
// kernels (on the H200, 16896 tasks of 4 rows) Vmax is 4, below it 8. N on both sides of that,
// M with a remainder pass of every width; 3 and 4 bits (the V <= 4 kernels spill at 3).
TEST(CudaQmv, StreamedPassesOnManyRowsEqualCpuMirror) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::int64_t control = 0;
  for (std::int64_t n : {4 * 16896 + 5, 4 * 16896 - 7})
    for (int bits : {3, 4}) {
      const std::int64_t m_max = 11;
      const Problem p = make_problem(n, 1024, bits, 64, DType::bf16, m_max, seed + std::uint64_t(n + bits));
      const std::size_t row = std::size_t(1024) * 2;
      for (std::int64_t m : {5, 6, 7, 9, 11}) {
        SCOPED_TRACE("N " + std::to_string(n) + " bits " + std::to_string(bits) + " M " + std::to_string(m));
        const std::vector<std::byte> xm(p.x.begin(), p.x.begin() + std::ptrdiff_t(m * row));
        const std::vector<std::byte> gpu = run_gpu(Kernel::qmv_streamed, p, xm, m);
        EXPECT_EQ(differing(gpu, run_cpu(Kernel::qmv, p, xm, m)), 0);
        control += other_order_differs(p, xm, m, gpu);
      }
    }
  EXPECT_GT(control, 0) << kControlMessage;  // over 2.5 million bf16 outputs
}

// Block of M == M single-vector calls == qmv, for every streamed width; qmv_wide (another
// order) must differ from qmv on the same data, or the check proved nothing.
TEST(CudaQmv, WidthInvariantWithNegativeControl) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 2048, k = 3840, m_max = 17;
  const Problem p = make_problem(n, k, 4, 64, DType::f32, m_max, seed);
  const std::size_t row = std::size_t(k) * 4, out_row = std::size_t(n) * 4;
  std::vector<std::byte> chain(std::size_t(m_max) * out_row);
  for (std::int64_t v = 0; v < m_max; ++v) {
    std::vector<std::byte> xv(p.x.begin() + std::ptrdiff_t(v * row), p.x.begin() + std::ptrdiff_t((v + 1) * row));
    const auto y = run_gpu(Kernel::qmv, p, xv, 1);
    std::memcpy(chain.data() + v * out_row, y.data(), out_row);
  }
  for (int vmax : {1, 2, 3, 5, 8})
    for (std::int64_t m = 1; m <= m_max; ++m) {
      const std::vector<std::byte> xm(p.x.begin(), p.x.begin() + std::ptrdiff_t(m * row));
      const std::vector<std::byte> want(chain.begin(), chain.begin() + std::ptrdiff_t(m * out_row));
      QmvOptions o;
      o.streamed_max_vectors = vmax;
      EXPECT_EQ(differing(run_gpu(Kernel::qmv_streamed, p, xm, m, o), want), 0) << "vmax " << vmax << " M " << m;
      if (vmax == 1) {
        EXPECT_EQ(differing(run_gpu(Kernel::qmv, p, xm, m), want), 0) << "qmv M " << m;
      }
    }
  // Reversed order gives each vector the same bytes.
  std::vector<std::byte> reversed(p.x.size());
  for (std::int64_t v = 0; v < m_max; ++v)
    std::memcpy(reversed.data() + (m_max - 1 - v) * row, p.x.data() + v * row, row);
  const auto y_rev = run_gpu(Kernel::qmv_streamed, p, reversed, m_max);
  for (std::int64_t v = 0; v < m_max; ++v)
    EXPECT_EQ(std::memcmp(y_rev.data() + (m_max - 1 - v) * out_row, chain.data() + v * out_row, out_row), 0) << v;
  // The negative control.
  EXPECT_GT(differing(run_gpu(Kernel::qmv_wide, p, p.x, m_max), chain), 0)
      << "qmv_wide equals qmv on every byte: the identity checks above could not have failed";
}

// Non-finite activations: infinities and NaNs (with assorted payloads) must give the same bytes
// on the GPU as on the CPU. NaN outputs are canonical on both sides (dtype.h).
TEST(CudaQmv, NonFiniteInputsEqualCpuMirror) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    Problem p = make_problem(64, 1024, 4, 64, dtype, 6, seed + int(dtype));
    std::mt19937_64 rng(seed);
    const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                              __builtin_bit_cast(float, 0x7fc00000u), __builtin_bit_cast(float, 0xffa5a5a5u)};
    for (int i = 0; i < 12; ++i) store_f32(p.x.data(), std::size_t(rng() % (6 * 1024)), dtype, specials[i % 4]);
    for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide}) {
      SCOPED_TRACE(std::string(to_string(kernel)) + " " + std::string(to_string(dtype)));
      EXPECT_EQ(differing(run_gpu(kernel, p, p.x, 6), run_cpu(kernel, p, p.x, 6)), 0);
    }
  }
}

// Activations far outside the usual range, where the exact chunk dot's scaling is delicate
// (docs/design.md §3): chunks of tiny values (u subnormal, A and S rounding there), huge, subnormal,
// zero, mixed (small values rounding to 0 in X) and ordinary values. f32 and bf16 hold them.
TEST(CudaQmv, ExtremeActivationRangesEqualCpuMirror) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::int64_t control = 0;
  for (DType dtype : {DType::f32, DType::bf16})
    for (int bits : {2, 3, 4, 5, 6, 8}) {
      const std::int64_t n = 45, k = 2048 + 320, m = 5;
      Problem p = make_problem(n, k, bits, 64, dtype, m, seed + bits + 10 * int(dtype));
      std::mt19937_64 rng(seed + bits);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> x(std::size_t(m * k));
      for (std::size_t c0 = 0; c0 < x.size(); c0 += 32) {
        const int kind = int(rng() % 6);
        for (std::size_t i = c0; i < c0 + 32; ++i) {
          const int e = kind == 0 ? -118 - int(rng() % 12) : kind == 1 ? 106 + int(rng() % 15)
                      : kind == 2 ? int(rng() % 230) - 115 : kind == 3 ? -140 - int(rng() % 8) : int(rng() % 6) - 3;
          x[i] = kind == 4 ? 0.0f : std::ldexp(normal(rng), e);
        }
      }
      p.x = to_dtype(x, dtype);
      for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed}) {
        SCOPED_TRACE(std::string(to_string(kernel)) + " bits " + std::to_string(bits) + " " + std::string(to_string(dtype)));
        const std::vector<std::byte> gpu = run_gpu(kernel, p, p.x, m);
        EXPECT_EQ(differing(gpu, run_cpu(kernel, p, p.x, m)), 0);
        if (dtype == DType::f32) control += other_order_differs(p, p.x, m, gpu);
      }
    }
  EXPECT_GT(control, 0) << kControlMessage;
}

// Chains y1 = A x, y2 = B y1, y3 = A y2, ... (A is N x K, B is K x N) on one stream as
// programmatic dependent launches: each launch may start while the one before it still runs,
// and must not read its x (the previous output, poisoned beforehand) until that launch has
// finished. Every link's bytes equal the CPU mirror's chain (qmv_mma: the chain of plain,
// synchronised launches). Rows at every alignment the format allows, and K over several
// shared-memory tiles (K = 17408 at V = 1).
TEST(CudaQmv, OverlappedChainedLaunchesEqualCpuMirror) {
  REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Case {
    int bits;
    std::int64_t n, k;
  };
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (Case c : {Case{2, 1216, 1216}, Case{3, 1216, 1216}, Case{4, 4096, 4096}, Case{5, 1216, 1216},
                 Case{6, 1216, 1216}, Case{8, 4096, 4096}, Case{4, 1088, 17408}})
    for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_mma}) {
      // qmv_mma ignores overlap_launch today; the check stays so that it keeps holding if that changes.
      const bool mma = kernel == Kernel::qmv_mma;
      if (mma && (c.bits % 4 != 0 || c.n % 256 != 0 || c.k % 256 != 0)) continue;
      SCOPED_TRACE(std::string(to_string(kernel)) + " bits " + std::to_string(c.bits) + " N " + std::to_string(c.n) +
                   " K " + std::to_string(c.k));
      constexpr std::int64_t m = 3;
      constexpr int links = 4;
      const std::uint64_t s = seed + std::uint64_t(c.bits * 7 + c.k);
      const Problem ab[2] = {make_problem(c.n, c.k, c.bits, 64, DType::bf16, m, s),
                             make_problem(c.k, c.n, c.bits, 64, DType::bf16, m, s + 1)};
      std::vector<cuda::DeviceBuffer> acts;
      for (int i = 0; i <= links; ++i) {
        acts.emplace_back(std::size_t(m * (i % 2 == 0 ? c.k : c.n)) * dtype_size(DType::bf16));
        acts.back().fill(0xA5);
      }
      acts[0].upload(ab[0].x);
      QmvOptions o;
      o.overlap_launch = true;
      for (int i = 0; i < links; ++i)
        cuda::qmv(kernel, ab[i % 2].device.view, acts[std::size_t(i)].bytes(), m, acts[std::size_t(i) + 1].bytes(), o,
                  stream);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      std::vector<std::byte> want = ab[0].x;
      for (int i = 1; i <= links; ++i) {
        want = mma ? run_gpu(kernel, ab[(i - 1) % 2], want, m) : run_cpu(kernel, ab[(i - 1) % 2], want, m);
        std::vector<std::byte> got(acts[std::size_t(i)].size());
        acts[std::size_t(i)].download(got);
        EXPECT_EQ(differing(got, want), 0) << "link " << i;
      }
    }
  cudaStreamDestroy(stream);
}

TEST(CudaQmv, RejectsBadArguments) {
  REQUIRE_GPU();
  using test::expect_invalid;
  const Problem p = make_problem(8, 256, 4, 64, DType::bf16, 2, 1);
  cuda::DeviceBuffer dx(p.x.size()), dy(8 * 2 * 2), small(3);
  auto call = [&](Kernel kernel, std::span<const std::byte> x, std::int64_t m, std::span<std::byte> y,
                  const QmvOptions& o = {}) { return [&, kernel, x, m, y, o] { cuda::qmv(kernel, p.device.view, x, m, y, o); }; };
  expect_invalid(call(Kernel::qmv, dx.bytes(), 0, dy.bytes()), "M = 0");
  expect_invalid(call(Kernel::qmv, small.bytes(), 2, dy.bytes()), "activations have 3 bytes");
  expect_invalid(call(Kernel::qmv, dx.bytes(), 2, small.bytes()), "output has 3 bytes");
  QmvOptions o;
  o.streamed_max_vectors = 0;
  expect_invalid(call(Kernel::qmv_streamed, dx.bytes(), 2, dy.bytes(), o), "streamed_max_vectors = 0");
  // Misaligned device pointers are refused before any launch (they would fault on the device).
  cuda::DeviceBuffer shifted(p.x.size() + 16);
  const auto misaligned_x = std::span<const std::byte>(shifted.bytes()).subspan(2, p.x.size());
  for (Kernel k : {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide})
    expect_invalid(call(k, misaligned_x, 2, dy.bytes()), "is not 16-byte aligned");
  EXPECT_NO_THROW(cuda::qmv(Kernel::qmv, p.device.view, std::span<const std::byte>(shifted.bytes()).subspan(16, p.x.size()),
                            2, dy.bytes()));  // control: the same buffer, aligned
  std::vector<std::byte> y(dy.size());
  EXPECT_NO_THROW(dy.download(y));  // the launch above completed without a device fault
}


}  // namespace
}  // namespace exactq
