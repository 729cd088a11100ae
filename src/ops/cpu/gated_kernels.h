// The gated MLP on a vector level (gated_avx512.cpp): elements [first, end) of
// y = mul(silu(gate), up), the bytes of order::gated's scalar loop (elementwise.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "exactq/dtype.h"

namespace exactq::cpu::simd {

void gated_silu_avx512(const std::byte* gate, const std::byte* up, std::int64_t first, std::int64_t end, DType t,
                       std::byte* out);

}  // namespace exactq::cpu::simd
