// The elementwise ops on the CPU: order/elementwise.h, element by element (silu's gated MLP on
// AVX-512 where cpu::qmv_isa() chose it: gated_avx512.cpp, the same bytes).
#include <algorithm>

#include "exactq/qmv.h"
#include "ops/cpu/decoder_ops.h"
#include "ops/cpu/gated_kernels.h"
#include "order/elementwise.h"
#include "support/parallel.h"

namespace exactq::cpu {

void gated_activation(const std::byte* gate, const std::byte* up, std::int64_t count, Activation act, DType t,
                      std::byte* out, int threads) {
  const bool vector = act == Activation::silu && qmv_isa() == Isa::avx512;
  parallel_rows((count + 1023) / 1024, threads, [&](std::int64_t first, std::int64_t end) {
    if (vector) return simd::gated_silu_avx512(gate, up, first * 1024, std::min(end * 1024, count), t, out);
    for (std::int64_t i = first * 1024; i < end * 1024 && i < count; ++i)
      store_f32(out, std::size_t(i), t,
                order::gated(load_f32(gate, std::size_t(i), t), load_f32(up, std::size_t(i), t), int(act)));
  });
}

void add(const std::byte* a, const std::byte* b, std::int64_t count, DType t, std::byte* out) {
  for (std::int64_t i = 0; i < count; ++i)
    store_f32(out, std::size_t(i), t, order::residual(load_f32(a, std::size_t(i), t), load_f32(b, std::size_t(i), t)));
}

void add_bias(std::byte* y, const std::byte* bias, std::int64_t m, std::int64_t n, DType t) {
  for (std::int64_t v = 0; v < m; ++v)
    for (std::int64_t j = 0; j < n; ++j) {
      const std::size_t i = std::size_t(v * n + j);
      store_f32(y, i, t, order::residual(load_f32(y, i, t), load_f32(bias, std::size_t(j), t)));
    }
}

void scale(std::byte* x, std::int64_t count, float factor, DType t) {
  for (std::int64_t i = 0; i < count; ++i)
    store_f32(x, std::size_t(i), t, order::scaled(load_f32(x, std::size_t(i), t), factor));
}

}  // namespace exactq::cpu
