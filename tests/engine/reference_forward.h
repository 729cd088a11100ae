// A float64 forward pass written from the model definitions (Hugging Face transformers' Llama,
// Mistral, Qwen2, Qwen3 and Gemma 3 text models), independent of the engine: it reads only the
// checkpoint's views and config, widens stored values with test_util's oracles, and calls nothing
// of src/order/ or exactq's dtype conversions.
//
// Two modes:
//   exact       every op in double, nothing rounded: the model's mathematical value (given the
//               stored weights and the dtype-rounded embedding scale, which is part of Gemma's
//               definition).
//   like_engine every op still in double, but its result rounded to the model dtype T wherever
//               the engine stores an activation in T: after each linear, bias add, norm, RoPE,
//               attention, gated activation, residual add, the embedding lookup and its scaling.
//               The engine's per-op error against this is its f32 arithmetic alone.
//
// Deviation switches one deliberate mistake on, for the accuracy test's negative controls.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <stdexcept>
#include <vector>

#include "exactq/model.h"
#include "test_util.h"

namespace exactq::test::reference {

enum class Rounding { exact, like_engine };

struct Deviation {
  bool rope_layout_swapped = false;   // half-split <-> interleaved pairs
  bool norm_without_offset = false;   // Gemma's RMSNorm by w instead of (1 + w)
  double attention_scale_factor = 1;  // multiplies the attention scale
  bool window_one_wider = false;      // a sliding layer also sees key p - window
  bool global_rope_unscaled = false;  // the config's rope_scaling ignored
  bool drop_biases = false;           // linears without their .bias
};

namespace detail {

// A linear layer [n, k] widened to double: w = scale * q + bias per group (the product of a
// scale of at most 24 bits and a code of at most 8 bits is exact), or the dense weight.
struct Matrix {
  std::int64_t n = 0, k = 0;
  std::vector<double> w;     // row-major [n, k]
  std::vector<double> bias;  // empty, or [n]
};

inline std::vector<double> widen(const DenseView& v) {
  std::size_t count = 1;
  for (auto d : v.shape) count *= std::size_t(d);
  if (v.bytes.size() != count * ref_size(v.dtype)) throw std::runtime_error("reference: size of " + v.name);
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = double(ref_load(v.bytes.data(), i, v.dtype));
  return out;
}

inline Matrix widen(const LinearView& l) {
  Matrix m;
  m.n = l.n;
  m.k = l.k;
  m.w.resize(std::size_t(l.n * l.k));
  if (l.quantized) {
    const QuantizedMatrixView& q = l.q;
    if (q.layout != WeightLayout::mlx) throw std::runtime_error("reference: " + l.path + " is not in MLX's layout");
    const std::int64_t row_bytes = q.k * q.bits / 8, groups = q.k / q.group;
    for (std::int64_t r = 0; r < q.n; ++r)
      for (std::int64_t c = 0; c < q.k; ++c) {
        const std::size_t g = std::size_t(r * groups + c / q.group);
        const double scale = ref_load(q.scales.data(), g, q.dtype), bias = ref_load(q.biases.data(), g, q.dtype);
        const std::uint32_t code = ref_unpack(q.packed.data() + r * row_bytes, c, q.bits);
        m.w[std::size_t(r * q.k + c)] = scale * double(code) + bias;
      }
  } else {
    m.w = widen(l.weight);
  }
  if (l.bias) m.bias = widen(*l.bias);
  return m;
}

struct Layer {
  Matrix q, k, v, o, gate, up, down;
  std::vector<double> input_norm, post_attention_norm, pre_ff_norm, post_ff_norm, q_norm, k_norm;
};

inline double silu(double x) { return x / (1.0 + std::exp(-x)); }
inline double gelu_tanh(double x) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

// RoPE inverse frequencies w_i = base^(-2i/d), i < d/2, then the config's scaling (HF's
// _compute_default_rope_parameters, _compute_linear_scaling_rope_parameters and
// _compute_llama3_parameters).
inline std::vector<double> inverse_frequencies(std::int64_t d, double base, const RopeScaling* scaling) {
  std::vector<double> w(std::size_t(d / 2));
  for (std::int64_t i = 0; i < d / 2; ++i) w[std::size_t(i)] = std::pow(base, -double(2 * i) / double(d));
  if (scaling == nullptr || scaling->kind == RopeScaling::Kind::none) return w;
  if (scaling->kind == RopeScaling::Kind::linear) {
    for (double& x : w) x /= scaling->factor;
    return w;
  }
  const double old = double(scaling->original_max_position_embeddings);
  const double low_wavelen = old / scaling->low_freq_factor, high_wavelen = old / scaling->high_freq_factor;
  for (double& x : w) {
    const double wavelen = 2.0 * std::numbers::pi / x;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      x /= scaling->factor;
      continue;
    }
    const double s = (old / wavelen - scaling->low_freq_factor) / (scaling->high_freq_factor - scaling->low_freq_factor);
    x = (1.0 - s) * x / scaling->factor + s * x;
  }
  return w;
}

}  // namespace detail

// Logits [tokens.size(), vocab] in double of `tokens` at positions 0, 1, ...
inline std::vector<double> forward(const Checkpoint& ck, std::span<const std::int32_t> tokens, Rounding rounding,
                                   const Deviation& dev = {}) {
  using detail::Matrix;
  const ModelConfig& c = ck.config();
  const DType t = ck.dtype();
  const bool gemma = c.arch == Arch::gemma3;
  const std::int64_t n = std::int64_t(tokens.size()), H = c.hidden_size;
  const std::int64_t heads = c.num_heads, kv_heads = c.num_kv_heads, d = c.head_dim;

  // Where the engine stores an activation in T: the value rounded to T (through f32, as the
  // engine's f32 result is), or left alone in the exact mode.
  auto round = [&](std::vector<double>& x) {
    if (rounding == Rounding::exact) return;
    for (double& v : x) v = double(ref_round_to(float(v), t));
  };

  auto linear = [&](const Matrix& m, const std::vector<double>& x, std::int64_t rows) {
    std::vector<double> y(std::size_t(rows * m.n));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t o = 0; o < m.n; ++o) {
        double s = 0;
        const double* w = m.w.data() + o * m.k;
        const double* xr = x.data() + r * m.k;
        for (std::int64_t i = 0; i < m.k; ++i) s += w[i] * xr[i];
        y[std::size_t(r * m.n + o)] = s;
      }
    round(y);
    if (!m.bias.empty() && !dev.drop_biases) {  // a separate add, stored again (as the engine and MLX do)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t o = 0; o < m.n; ++o) y[std::size_t(r * m.n + o)] += m.bias[std::size_t(o)];
      round(y);
    }
    return y;
  };

  // RMSNorm over rows of `width`: x / sqrt(mean(x^2) + eps) * w, Gemma's by (1 + w).
  const double offset = gemma && !dev.norm_without_offset ? 1.0 : 0.0;
  auto norm = [&](const std::vector<double>& x, const std::vector<double>& w, std::int64_t width) {
    std::vector<double> y(x.size());
    for (std::size_t r = 0; r < x.size() / std::size_t(width); ++r) {
      const double* xr = x.data() + r * std::size_t(width);
      double ss = 0;
      for (std::int64_t i = 0; i < width; ++i) ss += xr[i] * xr[i];
      const double inv = 1.0 / std::sqrt(ss / double(width) + c.rms_norm_eps);
      for (std::int64_t i = 0; i < width; ++i) y[r * std::size_t(width) + std::size_t(i)] = xr[i] * inv * (offset + w[std::size_t(i)]);
    }
    round(y);
    return y;
  };

  auto add = [&](std::vector<double>& h, const std::vector<double>& b) {
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += b[i];
    round(h);
  };

  // RoPE of every head of x [n, count * d] at positions 0..n-1, the pairs (i, i + d/2)
  // (rotate_half) or (2i, 2i + 1) (interleaved).
  const bool interleaved = c.rope_traditional != dev.rope_layout_swapped;
  auto rope = [&](std::vector<double>& x, std::int64_t count, const std::vector<double>& freq) {
    for (std::int64_t p = 0; p < n; ++p)
      for (std::int64_t h = 0; h < count; ++h) {
        double* v = x.data() + (p * count + h) * d;
        for (std::int64_t i = 0; i < d / 2; ++i) {
          const double a = double(p) * freq[std::size_t(i)], cs = std::cos(a), sn = std::sin(a);
          const std::int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + d / 2;
          const double x1 = v[i1], x2 = v[i2];
          v[i1] = x1 * cs - x2 * sn;
          v[i2] = x2 * cs + x1 * sn;
        }
      }
    round(x);
  };

  const RopeScaling* scaling = dev.global_rope_unscaled ? nullptr : &c.rope_scaling;
  const std::vector<double> global_freq = detail::inverse_frequencies(d, c.rope_theta, scaling);
  const std::vector<double> local_freq = detail::inverse_frequencies(d, gemma ? c.rope_local_theta : c.rope_theta, nullptr);
  const double scalar = gemma ? c.query_pre_attn_scalar : double(d);
  const double scale = dev.attention_scale_factor / std::sqrt(scalar);

  // Causal GQA attention with softmax in double; a sliding layer lets query p see key j iff
  // p - window < j <= p.
  auto attention = [&](const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                       std::int64_t window) {
    std::vector<double> out(std::size_t(n * heads * d), 0.0);
    const std::int64_t group = heads / kv_heads;
    std::vector<double> s(static_cast<std::size_t>(n), 0.0);
    for (std::int64_t p = 0; p < n; ++p)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t g = h / group;
        const double* qv = q.data() + (p * heads + h) * d;
        std::int64_t lo = 0;
        if (window > 0) lo = std::max<std::int64_t>(0, p - window + 1 - (dev.window_one_wider ? 1 : 0));
        double mx = -INFINITY;
        for (std::int64_t j = lo; j <= p; ++j) {
          const double* kv = k.data() + (j * kv_heads + g) * d;
          double dot = 0;
          for (std::int64_t i = 0; i < d; ++i) dot += qv[i] * kv[i];
          s[std::size_t(j)] = dot * scale;
          mx = std::max(mx, s[std::size_t(j)]);
        }
        double sum = 0;
        double* o = out.data() + (p * heads + h) * d;
        for (std::int64_t j = lo; j <= p; ++j) {
          const double e = std::exp(s[std::size_t(j)] - mx);
          sum += e;
          const double* vv = v.data() + (j * kv_heads + g) * d;
          for (std::int64_t i = 0; i < d; ++i) o[i] += e * vv[i];
        }
        for (std::int64_t i = 0; i < d; ++i) o[i] /= sum;
      }
    round(out);
    return out;
  };

  // The embedding, Gemma's scaled by sqrt(hidden) rounded to T (HF multiplies by the constant
  // cast to the weights' dtype; mlx-lm by an mx.bfloat16 constant).
  const Matrix embed = detail::widen(ck.embed_tokens());
  std::vector<double> h(std::size_t(n * H));
  for (std::int64_t p = 0; p < n; ++p)
    for (std::int64_t i = 0; i < H; ++i) h[std::size_t(p * H + i)] = embed.w[std::size_t(tokens[std::size_t(p)] * H + i)];
  round(h);
  if (gemma) {
    const double s = double(ref_round_to(float(std::sqrt(double(H))), t));
    for (double& x : h) x *= s;
    round(h);
  }

  for (std::size_t l = 0; l < ck.layers().size(); ++l) {
    const LayerView& L = ck.layers()[l];
    const bool sliding = gemma && !c.sliding_layers.empty() && c.sliding_layers[l];
    const std::vector<double> input_norm = detail::widen(L.input_norm);
    const std::vector<double> post_attention_norm = detail::widen(L.post_attention_norm);

    std::vector<double> xn = norm(h, input_norm, H);
    std::vector<double> q = linear(detail::widen(L.q_proj), xn, n);
    std::vector<double> k = linear(detail::widen(L.k_proj), xn, n);
    std::vector<double> v = linear(detail::widen(L.v_proj), xn, n);
    if (c.arch == Arch::qwen3 || gemma) {  // RMSNorm of each head's q and k, before RoPE
      q = norm(q, detail::widen(*L.q_norm), d);
      k = norm(k, detail::widen(*L.k_norm), d);
    }
    const std::vector<double>& freq = sliding ? local_freq : global_freq;
    rope(q, heads, freq);
    rope(k, kv_heads, freq);
    const std::vector<double> a = attention(q, k, v, sliding ? c.sliding_window : 0);
    std::vector<double> o = linear(detail::widen(L.o_proj), a, n);
    if (gemma) {  // sandwich norms: the branch normalized before the residual add
      o = norm(o, post_attention_norm, H);
      add(h, o);
      xn = norm(h, detail::widen(*L.pre_feedforward_norm), H);
    } else {
      add(h, o);
      xn = norm(h, post_attention_norm, H);
    }
    std::vector<double> gate = linear(detail::widen(L.gate_proj), xn, n);
    const std::vector<double> up = linear(detail::widen(L.up_proj), xn, n);
    for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = (gemma ? detail::gelu_tanh(gate[i]) : detail::silu(gate[i])) * up[i];
    round(gate);
    std::vector<double> down = linear(detail::widen(L.down_proj), gate, n);
    if (gemma) down = norm(down, detail::widen(*L.post_feedforward_norm), H);
    add(h, down);
  }
  const std::vector<double> final = norm(h, detail::widen(ck.final_norm()), H);
  return linear(detail::widen(ck.lm_head()), final, n);
}

}  // namespace exactq::test::reference
