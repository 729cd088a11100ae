// Random problems for parity and the benchmark: deterministic in their seed (the same bytes on
// every run of the same build), shaped like real checkpoints and hidden states.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "exactq/format.h"

namespace exactq::bench {

// A random weight matrix [n, k]: each row gets its own scale and a few outliers, so groups differ
// in range and sign the way trained weights do.
std::vector<float> random_weights(std::int64_t n, std::int64_t k, std::uint64_t seed);
// Random activations [m, k] in dtype (normal, with a per-vector scale and a few outlier channels).
std::vector<std::byte> random_activations(std::int64_t m, std::int64_t k, DType dtype, std::uint64_t seed);
// A valid random quantized matrix drawn directly in the packed format (every byte pattern is a
// valid code sequence): fast enough for the largest bench shapes.
QuantizedMatrix random_quantized(std::int64_t n, std::int64_t k, int bits, int group, DType dtype, std::uint64_t seed);
// The activations the benchmark times at width m (its output digests are of these).
std::vector<std::byte> bench_activations(std::int64_t m, std::int64_t k, DType dtype);

}  // namespace exactq::bench
