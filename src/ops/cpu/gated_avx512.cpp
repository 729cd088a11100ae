// The gated MLP's silu step on AVX-512: y_i = mul(silu(gate_i), up_i) (order/elementwise.h), 16
// elements per step with silu16; the stored values widened exactly, each result rounded to the
// activation type by store_f32, as the scalar loop does.
#include "ops/cpu/gated_kernels.h"

#if defined(__x86_64__)
#include "ops/cpu/silu_x86.h"
#include "support/dispatch.h"

namespace exactq::cpu::simd {
namespace {

template <DType T>
EXACTQ_AVX512 void gated_silu_t(const std::byte* gate, const std::byte* up, std::int64_t first, std::int64_t end,
                                std::byte* out) {
  alignas(64) float y[16];
  for (std::int64_t i = first; i < end; i += 16) {
    const int n = end - i < 16 ? int(end - i) : 16;
    const __mmask16 lanes = __mmask16((1u << n) - 1u);
    __m512 g, u;
    if constexpr (T == DType::f32) {
      g = _mm512_maskz_loadu_ps(lanes, reinterpret_cast<const float*>(gate) + i);
      u = _mm512_maskz_loadu_ps(lanes, reinterpret_cast<const float*>(up) + i);
    } else {
      const __m256i gh = _mm256_maskz_loadu_epi16(lanes, reinterpret_cast<const std::uint16_t*>(gate) + i);
      const __m256i uh = _mm256_maskz_loadu_epi16(lanes, reinterpret_cast<const std::uint16_t*>(up) + i);
      if constexpr (T == DType::f16) {
        g = _mm512_cvtph_ps(gh);
        u = _mm512_cvtph_ps(uh);
      } else {
        g = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(gh), 16));
        u = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(uh), 16));
      }
    }
    _mm512_store_ps(y, _mm512_mul_ps(silu16(g), u));
    for (int l = 0; l < n; ++l) store_f32(out, std::size_t(i + l), T, y[l]);
  }
}

}  // namespace

void gated_silu_avx512(const std::byte* gate, const std::byte* up, std::int64_t first, std::int64_t end, DType t,
                       std::byte* out) {
  with_dtype(t, [&]<DType T>() { gated_silu_t<T>(gate, up, first, end, out); });
}

}  // namespace exactq::cpu::simd

#else
namespace exactq::cpu::simd {
void gated_silu_avx512(const std::byte*, const std::byte*, std::int64_t, std::int64_t, DType, std::byte*) {}
}
#endif
