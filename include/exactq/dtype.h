// Element types of activations, scales, biases and outputs, and their exact conversions.
//
// The conversions are written as integer bit manipulation so that the CPU mirror and the CUDA
// kernels share one definition and agree on every input, including subnormals and NaN
// (a NaN always becomes the canonical 0x7fff, as CUDA's __float2half_rn/__float2bfloat16_rn do,
// and an f32 NaN output the canonical 0x7fffffff).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#if defined(__CUDACC__)
#define EXACTQ_HD __host__ __device__ __forceinline__
#else
#define EXACTQ_HD inline
#endif

namespace exactq {

enum class DType : std::uint8_t { f32, f16, bf16 };

// Throws std::invalid_argument naming the value when t is none of the enumerators (a number cast
// to DType). The API's boundaries call it (QuantizedMatrixView::validate, quantize,
// QuantizedMatrix::zeros), so everything past them holds a valid dtype.
void validate_dtype(DType t);

// dtype_size, load_f32 and store_f32 take the dtype unchecked: they are constexpr or run on the
// device in the kernels' inner loops, where a check (and a throw) cannot be afforded. An invalid
// value reads as bf16 here; it never gets this far, because every matrix passes validate() first.
constexpr std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }
// Throws std::invalid_argument naming the value when t is not a DType.
std::string_view to_string(DType t);
// Throws std::invalid_argument naming the text when it is not f32, f16 or bf16.
DType parse_dtype(std::string_view text);

EXACTQ_HD float float_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return __builtin_bit_cast(float, u);
#endif
}
EXACTQ_HD std::uint32_t bits_from_float(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return __builtin_bit_cast(std::uint32_t, f);
#endif
}

// bf16 is the top half of an f32, so widening is a shift.
EXACTQ_HD float bf16_to_f32(std::uint16_t h) { return float_from_bits(std::uint32_t(h) << 16); }

// Round to nearest, ties to even; overflow goes to infinity.
EXACTQ_HD std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = bits_from_float(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

EXACTQ_HD float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return float_from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return float_from_bits(sign);
    // Subnormal: normalise the mantissa; the value is exact in f32.
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    return float_from_bits(sign | (exp << 23) | ((mant & 0x3ffu) << 13));
  }
  return float_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

// Round to nearest, ties to even; |f| >= 65520 goes to infinity; results below 2^-14 are
// rounded to f16 subnormals.
EXACTQ_HD std::uint16_t f32_to_f16(float f) {
  std::uint32_t u = bits_from_float(f);
  const std::uint16_t sign = std::uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return 0x7fff;
  if (u >= 0x477ff000u) return sign | 0x7c00u;
  if (u >= 0x38800000u) {  // normal in f16: rebias the exponent (127 -> 15) and round 13 bits off
    u += 0xc8000fffu + ((u >> 13) & 1u);
    return sign | std::uint16_t(u >> 13);
  }
  if (u < 0x33000000u) return sign;  // below 2^-25 (2^-25 itself ties to the even zero)
  const std::uint32_t exp = u >> 23;
  const std::uint32_t mant = (u & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - exp;  // units of the f16 subnormal step 2^-24
  std::uint32_t q = mant >> shift;
  const std::uint32_t rem = mant & ((1u << shift) - 1);
  const std::uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return sign | std::uint16_t(q);
}

// The dtype is not checked here (see dtype_size): callers pass a validated one.
EXACTQ_HD float load_f32(const void* base, std::size_t i, DType t) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::f16: return f16_to_f32(static_cast<const std::uint16_t*>(base)[i]);
    default: return bf16_to_f32(static_cast<const std::uint16_t*>(base)[i]);
  }
}

EXACTQ_HD void store_f32(void* base, std::size_t i, DType t, float v) {
  switch (t) {
    // NaN payloads propagate differently on x86 (first operand's payload) and CUDA (canonical):
    // every NaN is stored as 0x7fffffff so that CPU and GPU bytes agree on every input.
    case DType::f32: static_cast<float*>(base)[i] = v != v ? float_from_bits(0x7fffffffu) : v; break;
    case DType::f16: static_cast<std::uint16_t*>(base)[i] = f32_to_f16(v); break;
    default: static_cast<std::uint16_t*>(base)[i] = f32_to_bf16(v); break;
  }
}

}  // namespace exactq
