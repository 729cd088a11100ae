// The attention steps without vector instructions: order/attention.h's own functions, with the
// dtype fixed per call (a template) instead of switched per element.
#include "ops/cpu/attention_kernels.h"
#include "order/attention.h"
#include "support/dispatch.h"

namespace exactq::cpu::attention_detail {
namespace {

constexpr int kChunk = order::kAttentionChunk;

template <DType T>
void scores_t(const float* q, std::size_t q_stride, int heads, const std::byte* keys, std::size_t stride, int count,
              int d, float* s) {
  for (int h = 0; h < heads; ++h)
    for (int j = 0; j < count; ++j)
      s[h * kChunk + j] = order::attention_score(q + std::size_t(h) * q_stride, keys + std::size_t(j) * stride, 0, T, d);
}

void scores(const float* q, std::size_t q_stride, int heads, const std::byte* keys, std::size_t stride, int count,
            int d, DType t, float* s) {
  with_dtype(t, [&]<DType T>() { scores_t<T>(q, q_stride, heads, keys, stride, count, d, s); });
}

void weights(float* s, int count, float m) {
  for (int j = 0; j < count; ++j) s[j] = order::attention_weight(s[j], m);
}

template <DType T>
void weighted_values_t(const float* e, int heads, const std::byte* values, std::size_t stride, int count, int d,
                       float* o, std::size_t o_stride) {
  for (int h = 0; h < heads; ++h) {
    float* oh = o + std::size_t(h) * o_stride;
    for (int i = 0; i < d; ++i) oh[i] = 0.0f;
    for (int j = 0; j < count; ++j) {
      const float w = e[h * kChunk + j];
      const std::byte* v = values + std::size_t(j) * stride;
      for (int i = 0; i < d; ++i) oh[i] = order::fma(w, load_f32(v, std::size_t(i), T), oh[i]);
    }
  }
}

void weighted_values(const float* e, int heads, const std::byte* values, std::size_t stride, int count, int d,
                     DType t, float* o, std::size_t o_stride) {
  with_dtype(t, [&]<DType T>() { weighted_values_t<T>(e, heads, values, stride, count, d, o, o_stride); });
}

void fold(float* o, const float* o_c, int n, float a, float b) {
  const order::FoldFactors f{0.0f, a, b};
  for (int i = 0; i < n; ++i) o[i] = order::attention_fold_value(o[i], o_c[i], f);
}

}  // namespace

const AttentionKernels scalar{scores, weights, weighted_values, fold};

}  // namespace exactq::cpu::attention_detail
