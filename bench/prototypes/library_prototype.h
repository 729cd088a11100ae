// Shared by the measurement prototypes that link the library (data_pattern_power.cu,
// qmv_imma_prototype.cu; built by scripts/build_prototype.sh): 4-bit g64 group parameters drawn as
// the bench draws them (apps/cli_common.cpp's random_quantized: a group spanning about [-r, r]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "exactq/dtype.h"

inline void random_group_parameters(std::mt19937_64& rng, std::vector<std::uint16_t>& scales,
                                    std::vector<std::uint16_t>& biases) {
  std::uniform_real_distribution<float> range(0.01f, 0.2f);
  for (std::size_t i = 0; i < scales.size(); ++i) {
    const float r = range(rng);
    const bool flip = rng() & 1;
    scales[i] = exactq::f32_to_bf16((flip ? -2.0f : 2.0f) * r / 15.0f);
    biases[i] = exactq::f32_to_bf16(flip ? r : -r);
  }
}
