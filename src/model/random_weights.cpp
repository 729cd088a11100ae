#include "model/random_weights.h"

#include <cmath>
#include <cstring>

#include "exactq/quantize.h"
#include "support/parallel.h"

namespace exactq {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// sqrt(2): six U(0,1) sum to variance 1/2.
constexpr double kUnitScale = 1.4142135623730951;
constexpr std::int64_t kRowsPerBlock = 16;

}  // namespace

std::uint64_t row_stream(std::uint64_t seed, const std::string& name, std::int64_t row) {
  return splitmix64(splitmix64(seed ^ fnv1a(name)) + std::uint64_t(row) * 0xd1342543de82ef95ull);
}

float unit_normal(std::uint64_t stream, std::int64_t i) {
  std::int64_t sum = 0;
  for (int j = 0; j < 3; ++j) {
    const std::uint64_t u = splitmix64(stream + std::uint64_t(i) * 3 + std::uint64_t(j));
    sum += std::int64_t(u & 0xffffffffu) + std::int64_t(u >> 32);
  }
  // sum / 2^32 - 3 is exact in double; one rounding to float at the end.
  return float((double(sum) * 0x1p-32 - 3.0) * kUnitScale);
}

TensorToWrite random_dense(const RandomSpec& spec, const std::vector<std::int64_t>& shape) {
  std::int64_t rows = 1, cols = shape.back();
  for (std::size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  TensorToWrite t{spec.name, to_st_dtype(spec.dtype), shape, std::vector<std::byte>(std::size_t(rows * cols) * dtype_size(spec.dtype))};
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint64_t stream = row_stream(spec.seed, spec.name, r);
    for (std::int64_t c = 0; c < cols; ++c)
      store_f32(t.data.data(), std::size_t(r * cols + c), spec.dtype, float(spec.mean + spec.std * double(unit_normal(stream, c))));
  }
  return t;
}

std::vector<TensorToWrite> random_linear(const RandomSpec& spec, std::int64_t n, std::int64_t k, int bits, int group) {
  const std::string weight = spec.name + ".weight";
  auto row_values = [&](std::int64_t r, float* out) {
    const std::uint64_t stream = row_stream(spec.seed, weight, r);
    for (std::int64_t c = 0; c < k; ++c) out[c] = float(spec.mean + spec.std * double(unit_normal(stream, c)));
  };
  if (bits == 0) {
    TensorToWrite t{weight, to_st_dtype(spec.dtype), {n, k}, std::vector<std::byte>(std::size_t(n * k) * dtype_size(spec.dtype))};
    parallel_rows(n, spec.threads, [&](std::int64_t first, std::int64_t end) {
      std::vector<float> row(static_cast<std::size_t>(k));
      for (std::int64_t r = first; r < end; ++r) {
        row_values(r, row.data());
        for (std::int64_t c = 0; c < k; ++c) store_f32(t.data.data(), std::size_t(r * k + c), spec.dtype, row[std::size_t(c)]);
      }
    });
    return {std::move(t)};
  }
  return quantized_tensors(spec.name, n, k, bits, group, spec.dtype, spec.threads, row_values);
}

std::vector<TensorToWrite> quantized_tensors(const std::string& path, std::int64_t n, std::int64_t k, int bits, int group,
                                             DType dtype, int threads,
                                             const std::function<void(std::int64_t, float*)>& row) {
  const std::size_t row_bytes = std::size_t(k * bits / 8), groups = std::size_t(k / group), es = dtype_size(dtype);
  TensorToWrite w{path + ".weight", StDType::U32, {n, k * bits / 32}, std::vector<std::byte>(std::size_t(n) * row_bytes)};
  TensorToWrite s{path + ".scales", to_st_dtype(dtype), {n, k / group}, std::vector<std::byte>(std::size_t(n) * groups * es)};
  TensorToWrite b{path + ".biases", s.dtype, s.shape, std::vector<std::byte>(s.data.size())};
  const std::int64_t blocks = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  parallel_rows(blocks, threads, [&](std::int64_t first, std::int64_t end) {
    std::vector<float> values;
    for (std::int64_t blk = first; blk < end; ++blk) {
      const std::int64_t r0 = blk * kRowsPerBlock, rows = std::min(kRowsPerBlock, n - r0);
      values.resize(std::size_t(rows * k));
      for (std::int64_t r = 0; r < rows; ++r) row(r0 + r, values.data() + r * k);
      const QuantizedMatrix q = quantize(values, rows, k, bits, group, dtype);
      std::memcpy(w.data.data() + std::size_t(r0) * row_bytes, q.packed.data(), q.packed.size());
      std::memcpy(s.data.data() + std::size_t(r0) * groups * es, q.scales.data(), q.scales.size());
      std::memcpy(b.data.data() + std::size_t(r0) * groups * es, q.biases.data(), q.biases.size());
    }
  });
  std::vector<TensorToWrite> out;
  out.push_back(std::move(w));
  out.push_back(std::move(s));
  out.push_back(std::move(b));
  return out;
}

}  // namespace exactq
