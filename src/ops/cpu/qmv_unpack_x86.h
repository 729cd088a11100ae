// Codes of any width unpacked to one byte each, 8 at a time with BMI2's pdep: 8 consecutive
// codes of B bits are B bytes of the stream, and pdep deposits their fields into the low bits of
// 8 bytes. For the widths without a vector unpack of their own (2, 3, 5, 6 bits).
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "exactq/format.h"

namespace exactq::cpu::simd {

template <int B>
__attribute__((target("bmi2"))) inline void unpack_chunks_pdep(const std::uint8_t* src, std::uint8_t* dst,
                                                               int chunks) {
  constexpr std::uint64_t kMask = 0x0101010101010101ull * ((1u << B) - 1u);
  for (int g = 0; g < chunks * (kChunkValues / 8); ++g) {
    std::uint64_t word = 0;
    std::memcpy(&word, src + g * B, B);
    const std::uint64_t codes = _pdep_u64(word, kMask);
    std::memcpy(dst + g * 8, &codes, 8);
  }
}

// The 8 codes in `bits` bytes at src, one per byte of *out.
__attribute__((target("bmi2"))) inline void unpack_codes8(const std::uint8_t* src, int bits, std::uint64_t* out) {
  std::uint64_t word = 0;
  std::memcpy(&word, src, std::size_t(bits));
  *out = _pdep_u64(word, 0x0101010101010101ull * ((1u << bits) - 1u));
}

// `chunks` chunks of `bits`-bit codes into dst, natural order.
__attribute__((target("bmi2"))) inline void unpack_chunks(const std::uint8_t* src, int bits, std::uint8_t* dst,
                                                          int chunks) {
  switch (bits) {
    case 2: unpack_chunks_pdep<2>(src, dst, chunks); break;
    case 3: unpack_chunks_pdep<3>(src, dst, chunks); break;
    case 4: unpack_chunks_pdep<4>(src, dst, chunks); break;
    case 5: unpack_chunks_pdep<5>(src, dst, chunks); break;
    case 6: unpack_chunks_pdep<6>(src, dst, chunks); break;
    default: std::memcpy(dst, src, std::size_t(chunks) * kChunkValues); break;
  }
}

}  // namespace exactq::cpu::simd
#endif
