// Helpers shared by the CPU kernels: activations widened once, chunk sums, row-parallel loops.
// None of them touches the order of a reduction: rows are independent, so how rows are spread
// over threads cannot change any output bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "order/qmv.h"
#include "support/parallel.h"
#include "exactq/format.h"

namespace exactq::cpu {

// x widened to f32 ([m, k]) and, for the qmv family, the per-chunk facts of order.h that every
// row shares: the integers X ([m, k]) and, per chunk, S and u ([m, k/32]).
struct Activations {
  std::vector<float> x;
  std::vector<std::int32_t> integers;
  std::vector<order::ChunkFacts> facts;
  std::int64_t m = 0;
  std::int64_t k = 0;

  const float* row(std::int64_t v) const { return x.data() + v * k; }
  const std::int32_t* integer_row(std::int64_t v) const { return integers.data() + v * k; }
  const order::ChunkFacts* chunk_facts(std::int64_t v) const { return facts.data() + v * (k / kChunkValues); }
};

// `family` computes the qmv family's per-chunk facts too.
inline Activations widen_activations(std::span<const std::byte> x, std::int64_t m, std::int64_t k, DType dtype,
                                     bool family) {
  Activations a;
  a.m = m;
  a.k = k;
  a.x.resize(std::size_t(m * k));
  for (std::int64_t i = 0; i < m * k; ++i) a.x[std::size_t(i)] = load_f32(x.data(), std::size_t(i), dtype);
  if (family) {
    const std::int64_t chunks = k / kChunkValues;
    a.integers.resize(a.x.size());
    a.facts.resize(std::size_t(m * chunks));
    for (std::int64_t c = 0; c < m * chunks; ++c)
      a.facts[std::size_t(c)] = order::exact_chunk(a.x.data() + c * kChunkValues, a.integers.data() + c * kChunkValues);
  }
  return a;
}

// Scale and bias of every group of one row, widened to f32.
inline void widen_group_params(const QuantizedMatrixView& w, std::int64_t row, std::vector<float>& scales,
                               std::vector<float>& biases) {
  const std::int64_t groups = w.groups_per_row();
  scales.resize(std::size_t(groups));
  biases.resize(std::size_t(groups));
  for (std::int64_t g = 0; g < groups; ++g) {
    scales[std::size_t(g)] = load_f32(w.scales.data(), std::size_t(row * groups + g), w.dtype);
    biases[std::size_t(g)] = load_f32(w.biases.data(), std::size_t(row * groups + g), w.dtype);
  }
}

// The exact code dot of one chunk of a row against one vector's X (order.h: any order gives it).
inline std::int64_t chunk_code_dot(const std::uint8_t* codes, const std::int32_t* integers) {
  std::int64_t dot = 0;
  for (int i = 0; i < kChunkValues; ++i) dot += std::int64_t(codes[i]) * integers[i];
  return dot;
}

// The 32 codes of chunk c of a row, as plain floats (exact: codes are below 2^8).
inline void chunk_codes(const std::uint8_t* row, std::int64_t c, int bits, float q[kChunkValues]) {
  std::uint8_t codes[kChunkValues];
  unpack_chunk(row + c * chunk_bytes(bits), bits, codes);
  for (int i = 0; i < kChunkValues; ++i) q[i] = float(codes[i]);
}

void qmv_narrow(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int threads);
void qmv_streamed(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int max_vectors,
                  int threads);
void qmv_wide(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int threads);
void qmv_mma_reference(const QuantizedMatrixView& w, const Activations& x, std::span<std::byte> y, int threads);

}  // namespace exactq::cpu
