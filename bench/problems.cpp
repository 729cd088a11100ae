// Random problems in the shape of real checkpoints, the same bytes on every run for a seed.
#include "problems.h"

#include <cmath>
#include <random>

namespace exactq::bench {

std::vector<float> random_weights(std::int64_t n, std::int64_t k, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(std::log(0.005f), std::log(0.1f));
  std::vector<float> w(std::size_t(n * k));
  for (std::int64_t r = 0; r < n; ++r) {
    const float row_scale = std::exp(log_scale(rng));
    for (std::int64_t c = 0; c < k; ++c) {
      float v = row_scale * normal(rng);
      if ((rng() & 255) == 0) v *= 8.0f;  // rare outliers widen some groups' ranges
      w[std::size_t(r * k + c)] = v;
    }
  }
  return w;
}

std::vector<std::byte> random_activations(std::int64_t m, std::int64_t k, DType dtype, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 0xd1b54a32d192ed03ull + 7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(std::log(0.1f), std::log(10.0f));
  std::vector<std::byte> x(std::size_t(m * k) * dtype_size(dtype));
  for (std::int64_t v = 0; v < m; ++v) {
    const float scale = std::exp(log_scale(rng));
    for (std::int64_t c = 0; c < k; ++c) {
      float value = scale * normal(rng);
      if (c % 97 == 13) value *= 16.0f;  // a few outlier channels, as in LLM hidden states
      store_f32(x.data(), std::size_t(v * k + c), dtype, value);
    }
  }
  return x;
}

QuantizedMatrix random_quantized(std::int64_t n, std::int64_t k, int bits, int group, DType dtype, std::uint64_t seed) {
  QuantizedMatrix q = QuantizedMatrix::zeros(n, k, bits, group, dtype);
  std::mt19937_64 rng(seed ^ 0x243f6a8885a308d3ull);
  for (std::size_t i = 0; i < q.packed.size(); i += 8) {
    const std::uint64_t r = rng();
    for (std::size_t b = 0; b < 8 && i + b < q.packed.size(); ++b) q.packed[i + b] = std::uint8_t(r >> (8 * b));
  }
  const std::size_t params = std::size_t(n * (k / group));
  const float levels = float((1 << bits) - 1);
  std::uniform_real_distribution<float> range(0.01f, 0.2f);
  for (std::size_t i = 0; i < params; ++i) {
    // A group spanning [-r, r] or so, as trained weights quantized by MLX's rule would.
    const float r = range(rng);
    const bool flip = rng() & 1;
    store_f32(q.scales.data(), i, dtype, (flip ? -2.0f : 2.0f) * r / levels);
    store_f32(q.biases.data(), i, dtype, flip ? r : -r);
  }
  return q;
}

std::vector<std::byte> bench_activations(std::int64_t m, std::int64_t k, DType dtype) {
  return random_activations(m, k, dtype, 0x5eed + std::uint64_t(m));
}

}  // namespace exactq::bench
