// Seeded random tensors for make-model (statistics and why: make_model.cpp's header).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "exactq/dtype.h"
#include "exactq/safetensors.h"

namespace exactq {

struct RandomSpec {
  std::string name;  // tensor name (dense) or module path (linear); part of the stream's seed
  std::uint64_t seed = 0;
  double mean = 0.0;
  double std = 0.02;
  DType dtype = DType::bf16;
  int threads = 0;
};

// Element i of row r of the tensor `name`: a unit normal variate (Irwin-Hall of six uniforms),
// a pure function of (seed, name, r, i).
float unit_normal(std::uint64_t stream, std::int64_t i);
std::uint64_t row_stream(std::uint64_t seed, const std::string& name, std::int64_t row);

// A dense tensor of `shape`, mean + std * normal, in spec.dtype.
TensorToWrite random_dense(const RandomSpec& spec, const std::vector<std::int64_t>& shape);

// The quantized tensors <path>.weight (U32), .scales and .biases of an [n, k] matrix whose row r
// `row(r, out)` writes as k floats: quantized by exactq::quantize (MLX's GPU rule) in blocks of
// rows on `threads` threads (rows quantize independently: groups lie within a row).
std::vector<TensorToWrite> quantized_tensors(const std::string& path, std::int64_t n, std::int64_t k, int bits, int group,
                                             DType dtype, int threads,
                                             const std::function<void(std::int64_t, float*)>& row);

// An [n, k] weight: with bits > 0 quantized by exactq::quantize (MLX's GPU rule) into
// <name>.weight (U32), .scales and .biases; with bits == 0 the dense <name>.weight.
std::vector<TensorToWrite> random_linear(const RandomSpec& spec, std::int64_t n, std::int64_t k, int bits, int group);

}  // namespace exactq
