// The Backend interface on the CPU backend: the same bytes as cpu::qmv through buffers, and every
// misuse refused with a message naming it.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "exactq/backend.h"
#include "exactq/mma_layout.h"
#include "exactq/quantize.h"
#include "test_util.h"

namespace exactq::test {
namespace {

std::vector<float> normal_values(std::size_t count, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<std::byte> as_dtype(const std::vector<float>& values, DType dtype) {
  std::vector<std::byte> out(values.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) store_f32(out.data(), i, dtype, values[i]);
  return out;
}

// Every kernel through the backend's buffers gives cpu::qmv's bytes, for a matrix loaded in either
// layout (the fragment layout is converted back for the CPU reference).
TEST(Backend, CpuBackendGivesCpuQmvBytes) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::int64_t n = 37 + std::int64_t(rng() % 40), k = 256 * (1 + std::int64_t(rng() % 3)), m = 1 + std::int64_t(rng() % 6);
  const QuantizedMatrix w = quantize(normal_values(std::size_t(n * k), rng), n, k, 4, 64, DType::bf16);
  const std::vector<std::byte> x = as_dtype(normal_values(std::size_t(m * k), rng), DType::bf16);
  auto backend = make_backend("cpu");
  EXPECT_EQ(backend->name(), "cpu");
  for (WeightLayout layout : {WeightLayout::mlx, WeightLayout::mma_fragments}) {
    const auto matrix = backend->load(w.view(), layout);
    EXPECT_EQ(matrix->view().n, n);
    EXPECT_EQ(matrix->view().k, k);
    for (Kernel kernel : {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide, Kernel::qmv_mma}) {
      SCOPED_TRACE(std::string(to_string(kernel)));
      std::vector<std::byte> want(std::size_t(m * n) * 2), got(want.size(), std::byte{0x5a});
      cpu::qmv(kernel, w.view(), x, m, want);
      qmv_host(*backend, kernel, *matrix, x, m, got);
      EXPECT_EQ(got, want);
    }
  }
  // A matrix given in the fragment layout loads too, and gives the same bytes.
  const QuantizedMatrix fragments = to_mma_fragments(w.view());
  const auto from_fragments = backend->load(fragments.view());
  std::vector<std::byte> want(std::size_t(m * n) * 2), got(want.size());
  cpu::qmv(Kernel::qmv, w.view(), x, m, want);
  qmv_host(*backend, Kernel::qmv, *from_fragments, x, m, got);
  EXPECT_EQ(got, want);
}

TEST(Backend, RefusesMisuseNamingIt) {
  auto backend = make_cpu_backend();
  std::mt19937_64 rng(7);
  const QuantizedMatrix w = quantize(normal_values(16 * 128, rng), 16, 128, 4, 64, DType::f16);
  const auto matrix = backend->load(w.view());
  auto x = backend->allocate(2 * 128 * 2), y = backend->allocate(2 * 16 * 2);
  expect_invalid([&] { backend->upload(*x, std::vector<std::byte>(3)); }, "3 host bytes");
  expect_invalid([&] { backend->qmv(Kernel::qmv, *matrix, *x, 3, *y); }, "activations have 512 bytes");
  expect_invalid([&] { backend->qmv(static_cast<Kernel>(9), *matrix, *x, 2, *y); }, "kernel value 9");
  expect_invalid([] { make_backend("tpu"); }, "'tpu'");
  QmvOptions bad;
  bad.threads = -1;
  expect_invalid([&] { make_cpu_backend(bad); }, "threads = -1");
  // The control: the same buffers with a valid M run.
  EXPECT_NO_THROW(backend->qmv(Kernel::qmv, *matrix, *x, 2, *y));
}

// Out-of-range enum values reach the backend through the matrix (its dtype and layout) and the
// kernel: load and qmv refuse each by name, where a valid value goes through.
TEST(Backend, RefusesOutOfRangeEnumValuesNamingThem) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  auto backend = make_cpu_backend();
  const QuantizedMatrix w = quantize(normal_values(16 * 256, rng), 16, 256, 4, 64, DType::bf16);
  const std::vector<std::byte> x = as_dtype(normal_values(2 * 256, rng), DType::bf16);
  std::vector<std::byte> y(2 * 16 * 2);
  const auto matrix = backend->load(w.view());  // control
  EXPECT_NO_THROW(qmv_host(*backend, Kernel::qmv, *matrix, x, 2, y));
  for (int v : {3, 7, 255}) {
    QuantizedMatrixView bad = w.view();
    bad.dtype = static_cast<DType>(v);
    expect_invalid([&] { backend->load(bad); }, "dtype value " + std::to_string(v));
  }
  for (int v : {2, 7, -1}) {
    QuantizedMatrixView bad = w.view();
    bad.layout = static_cast<WeightLayout>(v);
    expect_invalid([&] { backend->load(bad); }, "layout value " + std::to_string(v));
  }
  for (int v : {4, 9, -1})
    expect_invalid([&] { qmv_host(*backend, static_cast<Kernel>(v), *matrix, x, 2, y); },
                   "kernel value " + std::to_string(v));
}

TEST(Backend, CudaBackendRefusedWithAMessageWhereNoneIsUsable) {
  if (cuda_backend_available()) GTEST_SKIP() << "a GPU is usable here: tests/ops/cuda covers the CUDA backend";
  try {
    make_backend("cuda");
    ADD_FAILURE() << "make_backend(\"cuda\") returned without a usable GPU";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
  EXPECT_EQ(make_backend("auto")->name(), "cpu");
}

}  // namespace
}  // namespace exactq::test
