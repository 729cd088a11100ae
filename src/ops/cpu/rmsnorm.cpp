// RMSNorm on the CPU: order/norm.h, one row at a time. The 32 lanes' fma chains are an array of 32
// accumulators stepped together (the compiler vectorises the step: each lane's chain keeps its
// order), the dtype is dispatched once per call, and add_rmsnorm adds the residual in the same
// pass over the row. The bytes are order::rmsnorm_row_stored's (tests/ops/cpu: NormRowsEqualTheOrder).
#include <cmath>
#include <vector>

#include "ops/cpu/decoder_ops.h"
#include "order/elementwise.h"
#include "order/norm.h"
#include "support/dispatch.h"
#include "support/parallel.h"

namespace exactq::cpu {

namespace {

// One row: s_i = x_i (+ delta_i, rounded to T and stored back into x), S in the lanes' order,
// y_i = (s_i r) w'_i rounded to T. `s` holds h floats.
template <DType T>
void norm_row(std::byte* x, const std::byte* delta, const std::byte* weight, std::int64_t h, float eps,
              bool one_plus_weight, std::byte* y, float* s) {
  for (std::int64_t i = 0; i < h; ++i) {
    float v = load_f32(x, std::size_t(i), T);
    if (delta) {
      store_f32(x, std::size_t(i), T, order::residual(v, load_f32(delta, std::size_t(i), T)));
      v = load_f32(x, std::size_t(i), T);
    }
    s[i] = v;
  }
  float acc[order::kNormLanes] = {};
  std::int64_t i = 0;
  for (; i + order::kNormLanes <= h; i += order::kNormLanes)
    for (int l = 0; l < order::kNormLanes; ++l) acc[l] = order::norm_lane_step(acc[l], s[i + l]);
  for (int l = 0; i + l < h; ++l) acc[l] = order::norm_lane_step(acc[l], s[i + l]);
  for (int step = 0; step < order::kNormButterflySteps; ++step) {
    const int mask = order::norm_butterfly_mask(step);
    float next[order::kNormLanes];
    for (int l = 0; l < order::kNormLanes; ++l) next[l] = order::norm_butterfly_step(acc[l], acc[l ^ mask]);
    for (int l = 0; l < order::kNormLanes; ++l) acc[l] = next[l];
  }
  const float r = order::norm_inverse_rms(acc[0], int(h), eps);
  for (std::int64_t j = 0; j < h; ++j)
    store_f32(y, std::size_t(j), T,
              order::norm_apply(s[j], r, order::norm_weight(load_f32(weight, std::size_t(j), T), one_plus_weight)));
}

void norm_rows(std::byte* x, const std::byte* delta, const std::byte* weight, std::int64_t rows, std::int64_t h,
               DType t, float eps, bool one_plus_weight, std::byte* y, int threads) {
  const std::size_t row = std::size_t(h) * dtype_size(t);
  dispatch_value<int(DType::f32), int(DType::f16), int(DType::bf16)>(int(t), "dtype", [&]<int D>() {
    parallel_rows(rows, threads, [&](std::int64_t first, std::int64_t end) {
      thread_local std::vector<float> s;
      if (s.size() < std::size_t(h)) s.resize(std::size_t(h));
      for (std::int64_t r = first; r < end; ++r)
        norm_row<DType(D)>(x + std::size_t(r) * row, delta ? delta + std::size_t(r) * row : nullptr, weight, h, eps,
                           one_plus_weight, y + std::size_t(r) * row, s.data());
    });
  });
}

}  // namespace

void rmsnorm(const std::byte* x, const std::byte* weight, std::int64_t rows, std::int64_t h, DType t, float eps,
             bool one_plus_weight, std::byte* y, int threads) {
  norm_rows(const_cast<std::byte*>(x), nullptr, weight, rows, h, t, eps, one_plus_weight, y, threads);
}

void add_rmsnorm(std::byte* h, const std::byte* delta, const std::byte* weight, std::int64_t rows, std::int64_t width,
                 DType t, float eps, bool one_plus_weight, std::byte* y, int threads) {
  norm_rows(h, delta, weight, rows, width, t, eps, one_plus_weight, y, threads);
}

}  // namespace exactq::cpu
