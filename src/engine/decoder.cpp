// The forward pass (exactq/decoder.h): embedding, then per layer RMSNorm, q/k/v projections
// (+ biases, + per-head q/k norms), RoPE, the KV cache write, attention, the output projection,
// the residual add (Gemma 3 normalizes the branch first), the gated MLP, the second residual add;
// then the final norm, the head and the argmax. Every op is a Backend op whose rows are
// independent, and the quantized linears take their kernel from the run's family and the layer's
// shape, never from M: so every row's bytes are the same at every M.
#include "exactq/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

#include "engine/weights.h"
#include "order/attention.h"
#include "order/rope.h"

namespace exactq {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("[exactq] decoder: " + what); }

constexpr std::int64_t kDefaultContext = 4096;
constexpr std::int64_t kMaxSequences = 4096;

order::RopeParams rope_params(const ModelConfig& c, bool local) {
  order::RopeParams p;
  p.dims = int(c.head_dim);
  if (local) {  // Gemma 3's sliding-window layers: their own base, no scaling
    p.base = c.rope_local_theta;
    return p;
  }
  p.base = c.rope_theta;
  switch (c.rope_scaling.kind) {
    case RopeScaling::Kind::none: break;
    case RopeScaling::Kind::linear: p.scaling = order::RopeScalingKind::linear; break;
    case RopeScaling::Kind::llama3: p.scaling = order::RopeScalingKind::llama3; break;
  }
  p.factor = c.rope_scaling.factor;
  p.low_freq_factor = c.rope_scaling.low_freq_factor;
  p.high_freq_factor = c.rope_scaling.high_freq_factor;
  p.original_max_position_embeddings = double(c.rope_scaling.original_max_position_embeddings);
  return p;
}

}  // namespace

struct Decoder::State {
  Backend& backend;
  ModelConfig config;
  DecoderOptions options;
  DType t;
  std::size_t e;  // bytes per activation
  engine::Weights w;
  std::unique_ptr<Buffer> rope_global, rope_local;  // phase steps (order/rope.h)
  // Per layer: [sequences * context, kv_dim], sequence s's position p at row s * context + p.
  std::vector<std::unique_ptr<Buffer>> keys, values;
  std::vector<std::int64_t> lengths;  // per sequence
  float eps = 0, embed_scale = 0;

  // Activations for up to `capacity` rows.
  std::int64_t capacity = 0;
  std::unique_ptr<Buffer> h, xn, q, k, v, attn, o, gate, up, down, logits, indices;
  // The residual's second buffer: a norm fused into the linear after it (norm_linears) writes
  // h + delta there, and the two are swapped. Every forward starts from the same one.
  std::unique_ptr<Buffer> h_other;
  bool h_swapped = false;
  // The MLP's output not yet added into h: with fused norms, the next layer's first op adds it.
  const Buffer* pending = nullptr;
  // The stacked projections' outputs, and at M = 1 the parts as views of them (no copy).
  std::unique_ptr<Buffer> qkv, gate_up, q1, k1, v1, gate1, up1;
  std::int64_t logits_rows = 0;
  Tracer tracer;

  // Buffers of exactly `bytes` for host transfers (upload and download take a buffer of exactly
  // their size), kept so that a decode or verify step allocates nothing: a device allocation
  // costs more than the step's small kernels. A few sizes are kept (the widths in use).
  std::map<std::size_t, std::unique_ptr<Buffer>> staging_buffers;
  Buffer& staging(std::size_t bytes) {
    if (const auto it = staging_buffers.find(bytes); it != staging_buffers.end()) return *it->second;
    if (staging_buffers.size() >= 32) staging_buffers.clear();
    return *(staging_buffers[bytes] = backend.allocate(bytes));
  }

  bool trace_values = true;

  void trace(std::int64_t layer, std::string_view op, const Buffer& b, std::int64_t rows, std::int64_t width) {
    if (!tracer) return;
    if (!trace_values) {
      backend.synchronize();
      tracer({layer, op, rows, width, {}});
      return;
    }
    std::vector<std::byte> host(std::size_t(rows * width) * e);
    auto staging = backend.allocate(host.size());
    backend.copy(b, 0, *staging, 0, host.size());
    backend.synchronize();
    backend.download(*staging, host);
    tracer({layer, op, rows, width, host});
  }

  State(Backend& b, const Checkpoint& c, const DecoderOptions& o)
      : backend(b), config(c.config()), options(o), t(c.dtype()), e(dtype_size(c.dtype())) {}

  std::unique_ptr<Buffer> alloc(std::int64_t elements, std::size_t size) {
    return backend.allocate(std::size_t(elements) * size);
  }

  void reserve(std::int64_t m) {
    if (m <= capacity) return;
    const ModelConfig& c = config;
    const std::int64_t vocab = w.head().n;
    indices = alloc(m, sizeof(std::int32_t));
    h = alloc(m * c.hidden_size, e);
    h_other = alloc(m * c.hidden_size, e);
    h_swapped = false;
    xn = alloc(m * c.hidden_size, e);
    q = alloc(m * c.q_dim(), e);
    k = alloc(m * c.kv_dim(), e);
    v = alloc(m * c.kv_dim(), e);
    attn = alloc(m * c.q_dim(), e);
    o = alloc(m * c.hidden_size, e);
    gate = alloc(m * c.intermediate_size, e);
    up = alloc(m * c.intermediate_size, e);
    down = alloc(m * c.hidden_size, e);
    logits = alloc(m * vocab, e);
    const bool stacked_qkv = !w.layers.empty() && w.layers[0].qkv.q, stacked_gate_up = !w.layers.empty() && w.layers[0].gate_up.q;
    if (stacked_qkv) {
      qkv = alloc(m * (c.q_dim() + 2 * c.kv_dim()), e);
      q1 = backend.view(*qkv, 0, std::size_t(c.q_dim()) * e);
      k1 = backend.view(*qkv, std::size_t(c.q_dim()) * e, std::size_t(c.kv_dim()) * e);
      v1 = backend.view(*qkv, std::size_t(c.q_dim() + c.kv_dim()) * e, std::size_t(c.kv_dim()) * e);
    }
    if (stacked_gate_up) {
      gate_up = alloc(m * 2 * c.intermediate_size, e);
      gate1 = backend.view(*gate_up, 0, std::size_t(c.intermediate_size) * e);
      up1 = backend.view(*gate_up, std::size_t(c.intermediate_size) * e, std::size_t(c.intermediate_size) * e);
    }
    capacity = m;
    for (auto& [width, p] : plans) p.steps.clear();  // their graphs hold the old buffers
  }

  void linear(const engine::Linear& l, const Buffer& x, std::int64_t m, Buffer& y) {
    if (l.q)
      backend.qmv(kernel_for(options.family, l.q->view(), m), *l.q, x, m, y);
    else
      backend.dense_mv(*l.dense, x, m, y);
    if (l.bias) backend.add_bias(y, *l.bias, m, l.n, t);
  }

  // A stacked projection's output [m, sum of widths] split into the parts' buffers [m, width] (at
  // M = 1 the parts are views of it instead: q1, k1, v1, gate1, up1).
  void split(Buffer& stacked, std::int64_t m, std::initializer_list<std::pair<Buffer*, std::int64_t>> parts) {
    std::int64_t total = 0;
    for (const auto& [b, width] : parts) total += width;
    std::size_t offset = 0;
    for (const auto& [b, width] : parts) {
      backend.copy_rows(stacked, offset, std::size_t(total) * e, *b, 0, std::size_t(width) * e, std::size_t(width) * e, m);
      offset += std::size_t(width) * e;
    }
  }

  void norm(const Buffer& x, const Buffer& weight, std::int64_t rows, std::int64_t width, Buffer& y) {
    backend.rmsnorm(x, weight, rows, width, t, eps, config.norm_offset != 0.0, y);
  }
  // The residual add h += delta and the norm of the new h into xn, as one op.
  void add_norm(const Buffer& delta, const Buffer& weight, std::int64_t m) {
    backend.add_rmsnorm(*h, delta, weight, m, config.hidden_size, t, eps, config.norm_offset != 0.0, *xn);
  }

  // The norm of h + delta (of h where delta is null) and the linears that read it, each into its
  // output. Where the backend fuses the norm into a linear (Backend::norm_qmv), the first fused op
  // writes h + delta to h_other, which becomes h; the rest run as add_rmsnorm (or rmsnorm) into xn
  // and the linears. Either way the bytes are those of the two ops. The probe's trace reads xn:
  // with a tracer nothing is fused. With one linear without a bias, `then` is asked of the fused
  // op as well; returns whether it ran (else the caller runs it).
  bool norm_linears(const Buffer* delta, const Buffer& weight, std::int64_t m,
                    std::initializer_list<std::pair<const engine::Linear*, Buffer*>> linears,
                    const LinearEpilogue& then = {}) {
    const bool one_plus = config.norm_offset != 0.0;
    std::size_t fused = 0;
    bool epilogue = false;
    for (const auto& [l, y] : linears) {
      if (tracer || !l->q) break;
      Buffer* out = fused == 0 && delta ? h_other.get() : nullptr;
      const Buffer& from = fused > 0 && delta ? *h_other : *h;  // the first fused op's h_out holds h + delta
      const Kernel kernel = kernel_for(options.family, l->q->view(), m);
      const Buffer* d = fused > 0 ? nullptr : delta;
      if (then.kind != LinearEpilogue::Kind::store && linears.size() == 1 && !l->bias)
        epilogue = backend.norm_qmv(kernel, *l->q, from, d, weight, m, eps, one_plus, out, *y, then);
      if (!epilogue && !backend.norm_qmv(kernel, *l->q, from, d, weight, m, eps, one_plus, out, *y)) break;
      if (l->bias) backend.add_bias(*y, *l->bias, m, l->n, t);
      ++fused;
    }
    if (fused > 0 && delta) std::swap(h, h_other), h_swapped = !h_swapped;
    if (fused == linears.size()) return epilogue;
    if (delta && fused == 0)
      add_norm(*delta, weight, m);
    else
      norm(*h, weight, m, config.hidden_size, *xn);
    std::size_t i = 0;
    for (const auto& [l, y] : linears)
      if (i++ >= fused) linear(*l, *xn, m, *y);
    return false;
  }

  // One width's inputs (the tokens, their positions and their cache rows, std::int32_t, uploaded
  // together before each forward) and its captured steps, per (rows, attention bound, the rows
  // kept with Rows::last): how often each was seen, and its graph once captured.
  struct Plan {
    std::unique_ptr<Buffer> inputs, tokens, positions, cache_rows;  // the last three: views of inputs
    struct Step {
      int seen = 0;
      std::unique_ptr<Graph> graph;
    };
    std::map<std::tuple<int, std::int64_t, std::vector<std::int64_t>>, Step> steps;
  };
  std::map<std::int64_t, Plan> plans;
  std::int64_t replayed = 0;  // forwards run as a replayed graph

  Plan& plan(std::int64_t m) {
    Plan& p = plans[m];
    if (!p.inputs) {
      const std::size_t bytes = std::size_t(m) * sizeof(std::int32_t);
      p.inputs = backend.allocate(3 * bytes);
      p.tokens = backend.view(*p.inputs, 0, bytes);
      p.positions = backend.view(*p.inputs, bytes, bytes);
      p.cache_rows = backend.view(*p.inputs, 2 * bytes, bytes);
    }
    return p;
  }

  // The attention bound of a forward whose last row is at `last`: the end of a power-of-two number
  // of chunks, within the cache. It fixes attention's grid, so a captured step serves every
  // position up to it; no byte depends on it.
  std::int64_t attention_bound(std::int64_t last) const {
    std::int64_t chunks = 1;
    while (chunks * order::kAttentionChunk <= last) chunks *= 2;
    return std::min(chunks * order::kAttentionChunk - 1, options.context_length - 1);
  }

  void layer(std::size_t index, std::int64_t m, const Buffer& positions, const Buffer& cache_rows, std::int64_t bound) {
    const ModelConfig& c = config;
    const engine::LayerWeights& L = w.layers[index];
    const bool local = !c.sliding_layers.empty() && c.sliding_layers[index];
    const std::int64_t hidden = m * c.hidden_size, at = std::int64_t(index);
    const std::int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.q_dim(), KV = c.kv_dim();

    // The input norm: of h at layer 0, of h + the MLP's output (pending) where the previous
    // layer left it to this one; else the previous layer's last op made it (in xn).
    const Buffer* delta = pending;
    pending = nullptr;
    const bool normed = index > 0 && !delta;
    Buffer *qb = q.get(), *kb = k.get(), *vb = v.get();
    const Buffer& steps = local ? *rope_local : *rope_global;
    bool roped = false;  // RoPE and the cache write done in the q/k/v linear's kernel
    if (L.qkv.q) {
      // At M = 1 the stacked output's parts are q, k and v (views), so the linear's kernel may
      // rotate and cache them as it stores them, unless a q/k norm comes in between.
      LinearEpilogue then;
      if (m == 1 && !c.qk_norm)
        then = {LinearEpilogue::Kind::rope_write, c.activation, c.num_heads, c.num_kv_heads, c.head_dim, &positions,
                &cache_rows, &steps, c.rope_traditional, keys[index].get(), values[index].get()};
      if (normed)
        linear(L.qkv, *xn, m, *qkv);
      else
        roped = norm_linears(delta, *L.input_norm, m, {{&L.qkv, qkv.get()}}, then);
      if (m == 1)
        qb = q1.get(), kb = k1.get(), vb = v1.get();
      else
        split(*qkv, m, {{qb, Q}, {kb, KV}, {vb, KV}});
    } else if (normed) {
      linear(L.q_proj, *xn, m, *qb);
      linear(L.k_proj, *xn, m, *kb);
      linear(L.v_proj, *xn, m, *vb);
    } else {
      norm_linears(delta, *L.input_norm, m, {{&L.q_proj, qb}, {&L.k_proj, kb}, {&L.v_proj, vb}});
    }
    trace(at, "input_norm", *xn, m, H);
    trace(at, "q_proj", *qb, m, Q);
    trace(at, "k_proj", *kb, m, KV);
    trace(at, "v_proj", *vb, m, KV);
    if (c.qk_norm) {
      norm(*qb, *L.q_norm, m * c.num_heads, c.head_dim, *qb);
      trace(at, "q_norm", *qb, m, Q);
      norm(*kb, *L.k_norm, m * c.num_kv_heads, c.head_dim, *kb);
      trace(at, "k_norm", *kb, m, KV);
    }
    if (!roped)
      backend.rope_write(*qb, *kb, *vb, m, c.num_heads, c.num_kv_heads, c.head_dim, t, positions, cache_rows, steps,
                         c.rope_traditional, *keys[index], *values[index]);
    trace(at, "rope_q", *qb, m, Q);
    trace(at, "rope_k", *kb, m, KV);
    const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim,
                               order::attention_scale(c.query_pre_attn_scalar), local ? c.sliding_window : 0};
    backend.attention(*qb, *keys[index], *values[index], m, positions, cache_rows, bound, shape, t, *attn);
    trace(at, "attention", *attn, m, Q);
    linear(L.o_proj, *attn, m, *o);
    trace(at, "o_proj", *o, m, H);
    if (c.sandwich_norm) {
      norm(*o, *L.post_attention_norm, m, H, *o);
      trace(at, "post_attention_norm", *o, m, H);
    }
    const Buffer& mlp_norm = c.sandwich_norm ? *L.pre_feedforward_norm : *L.post_attention_norm;
    Buffer *gb = gate.get(), *ub = up.get();
    bool gated = false;  // the activation done in the gate/up linear's kernel, into gate1
    if (L.gate_up.q)
      gated = norm_linears(o.get(), mlp_norm, m, {{&L.gate_up, gate_up.get()}},
                           m == 1 ? LinearEpilogue{LinearEpilogue::Kind::gated, c.activation} : LinearEpilogue{});
    else
      norm_linears(o.get(), mlp_norm, m, {{&L.gate_proj, gb}, {&L.up_proj, ub}});
    trace(at, "attention_residual", *h, m, H);
    trace(at, c.sandwich_norm ? "pre_feedforward_norm" : "post_attention_norm", *xn, m, H);
    if (L.gate_up.q) {
      if (m == 1)
        gb = gate1.get(), ub = up1.get();
      else
        split(*gate_up, m, {{gb, I}, {ub, I}});
    }
    trace(at, "gate_proj", *gb, m, I);
    trace(at, "up_proj", *ub, m, I);
    if (!gated) backend.gated_activation(*gb, *ub, m * I, c.activation, t, *gb);
    trace(at, "gated_activation", *gb, m, I);
    linear(L.down_proj, *gb, m, *down);
    trace(at, "down_proj", *down, m, H);
    if (c.sandwich_norm) {
      norm(*down, *L.post_feedforward_norm, m, H, *down);
      trace(at, "post_feedforward_norm", *down, m, H);
    }
    if (index + 1 == w.layers.size())
      backend.add(*h, *down, hidden, t, *h);
    else if (tracer)
      add_norm(*down, *w.layers[index + 1].input_norm, m);  // the next layer's input norm, traced here
    else
      pending = down.get();  // added by the next layer's input norm
    trace(at, "mlp_residual", *h, m, H);
  }

  // The forward's ops from the embedding to the logits: what a captured step holds. With
  // Rows::last, the logits of rows `kept` only.
  void issue_forward(std::int64_t m, const Plan& p, std::int64_t bound, Rows rows,
                     const std::vector<std::int64_t>& kept) {
    const ModelConfig& c = config;
    if (h_swapped) std::swap(h, h_other), h_swapped = false;  // every forward from the same buffers
    pending = nullptr;
    if (w.embed.q)
      backend.embed(*w.embed.q, *p.tokens, m, *h);
    else
      backend.embed(*w.embed.dense, *p.tokens, m, *h);
    if (c.scale_embeddings) backend.scale(*h, m * c.hidden_size, embed_scale, t);
    trace(-1, "embed", *h, m, c.hidden_size);
    for (std::size_t l = 0; l < w.layers.size(); ++l) layer(l, m, *p.positions, *p.cache_rows, bound);
    const std::int64_t out = rows == Rows::all ? m : std::int64_t(kept.size());
    if (rows == Rows::last) {  // only the kept rows: their bytes are the same as in the full computation
      const std::size_t row = std::size_t(c.hidden_size) * e;
      for (std::size_t j = 0; j < kept.size(); ++j) backend.copy(*h, std::size_t(kept[j]) * row, *xn, j * row, row);
      norm(*xn, *w.final_norm, out, c.hidden_size, *o);
    } else {
      norm(*h, *w.final_norm, m, c.hidden_size, *o);
    }
    trace(-1, "final_norm", *o, out, c.hidden_size);
    linear(w.head(), *o, out, *logits);
    trace(-1, "head", *logits, out, w.head().n);
  }
};

Decoder::Decoder(Backend& backend, const Checkpoint& checkpoint, const DecoderOptions& options)
    : s_(std::make_unique<State>(backend, checkpoint, options)) {
  State& s = *s_;
  const ModelConfig& c = s.config;
  to_string(options.family);  // refuses a value outside the enum
  if (c.head_dim % order::kDotPartials != 0 || c.head_dim > order::kMaxHeadDim)
    fail("head_dim = " + std::to_string(c.head_dim) + " is not a multiple of 8 up to " +
         std::to_string(order::kMaxHeadDim) + " (the attention order's limit)");
  std::int64_t context = options.context_length;
  if (context == 0) context = c.max_position_embeddings > 0 ? std::min(c.max_position_embeddings, kDefaultContext) : kDefaultContext;
  if (context < 1 || context > (std::int64_t(1) << 24))
    fail("context length " + std::to_string(context) + " is out of range [1, 2^24]");
  s.options.context_length = context;
  s.eps = float(c.rms_norm_eps);
  if (c.scale_embeddings) {  // sqrt(hidden) rounded to the model dtype, as Gemma computes it
    float f = float(std::sqrt(double(c.hidden_size)));
    std::byte stored[4];
    store_f32(stored, 0, s.t, f);
    s.embed_scale = load_f32(stored, 0, s.t);
  }
  // Stacked projections keep every row's bytes where a row's kernel reads no other row (qmv and
  // qmv_streamed: the exact and narrow families).
  const bool stack = options.family == KernelFamily::exact || options.family == KernelFamily::narrow;
  s.w = engine::upload_weights(backend, checkpoint, stack);
  auto steps_buffer = [&](bool local) {
    const std::vector<std::uint64_t> steps = order::rope_phase_steps(order::rope_inverse_frequencies(rope_params(c, local)));
    auto b = backend.allocate(steps.size() * sizeof(std::uint64_t));
    backend.upload(*b, std::as_bytes(std::span(steps)));
    return b;
  };
  s.rope_global = steps_buffer(false);
  s.rope_local = c.sliding_layers.empty() ? steps_buffer(false) : steps_buffer(true);
  if (options.sequences < 1 || options.sequences > kMaxSequences)
    fail("sequences = " + std::to_string(options.sequences) + " is out of range [1, " +
         std::to_string(kMaxSequences) + "]");
  if (context * options.sequences > std::numeric_limits<std::int32_t>::max())
    fail(std::to_string(options.sequences) + " sequences of " + std::to_string(context) +
         " positions are more cache rows than 32-bit row indices reach");
  s.lengths.assign(std::size_t(options.sequences), 0);
  const std::size_t cache = std::size_t(context * options.sequences) * std::size_t(c.kv_dim()) * s.e;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    s.keys.push_back(backend.allocate(cache));
    s.values.push_back(backend.allocate(cache));
  }
}

Decoder::~Decoder() = default;

const ModelConfig& Decoder::config() const { return s_->config; }
const DecoderOptions& Decoder::options() const { return s_->options; }
DType Decoder::dtype() const { return s_->t; }
std::int64_t Decoder::vocab_size() const { return s_->w.head().n; }
std::int64_t Decoder::context_length() const { return s_->options.context_length; }
std::int64_t Decoder::sequences() const { return s_->options.sequences; }
std::int64_t Decoder::length() const { return s_->lengths[0]; }
std::int64_t Decoder::length(std::int64_t sequence) const {
  if (sequence < 0 || sequence >= s_->options.sequences)
    fail("sequence " + std::to_string(sequence) + " is not one of the cache's " +
         std::to_string(s_->options.sequences));
  return s_->lengths[std::size_t(sequence)];
}
std::int64_t Decoder::logits_rows() const { return s_->logits_rows; }
std::int64_t Decoder::replayed_forwards() const { return s_->replayed; }

void Decoder::truncate(std::int64_t length) { truncate(0, length); }

void Decoder::truncate(std::int64_t sequence, std::int64_t length) {
  const std::int64_t held = this->length(sequence);
  if (length < 0 || length > held)
    fail("cannot truncate to " + std::to_string(length) + ": the cache holds " + std::to_string(held) + " positions" +
         (s_->options.sequences > 1 ? " of sequence " + std::to_string(sequence) : std::string()));
  s_->lengths[std::size_t(sequence)] = length;
}

void Decoder::forward(std::span<const std::int32_t> tokens, std::int64_t start, Rows rows) {
  const Part part{0, tokens, start};
  forward(std::span(&part, 1), rows);
}

void Decoder::check(std::span<const Part> parts) const {
  const State& s = *s_;
  if (parts.empty()) fail("no tokens to run");
  const std::int64_t context = s.options.context_length, embed_rows = s.w.embed.n;
  std::set<std::int64_t> seen;
  std::int64_t m = 0;
  for (const Part& part : parts) {
    const std::int64_t length = this->length(part.sequence), size = std::int64_t(part.tokens.size());
    const std::string where = parts.size() > 1 ? " (sequence " + std::to_string(part.sequence) + ")" : "";
    if (!seen.insert(part.sequence).second) fail("sequence " + std::to_string(part.sequence) + " is in two parts");
    if (size == 0) fail("no tokens to run" + where);
    if (part.start < 0 || part.start > length)
      fail("start position " + std::to_string(part.start) + " is past the cache's " + std::to_string(length) +
           " positions" + where);
    if (size > context - part.start)
      fail(std::to_string(size) + " tokens from position " + std::to_string(part.start) + " overflow the context of " +
           std::to_string(context) + where);
    for (std::size_t i = 0; i < part.tokens.size(); ++i)
      if (part.tokens[i] < 0 || part.tokens[i] >= embed_rows)
        fail("token " + std::to_string(part.tokens[i]) + " (at " + std::to_string(m + std::int64_t(i)) +
             ") is outside the vocabulary [0, " + std::to_string(embed_rows) + ")" + where);
    m += size;
  }
  if (m > std::numeric_limits<std::int32_t>::max()) fail(std::to_string(m) + " rows are more than one forward runs");
}

void Decoder::forward(std::span<const Part> parts, Rows rows) {
  State& s = *s_;
  check(parts);
  if (rows != Rows::all && rows != Rows::last) fail("rows value " + std::to_string(int(rows)) + " is not a Rows");
  const std::int64_t context = s.options.context_length;
  std::int64_t m = 0, last = 0;
  for (const Part& part : parts) {
    m += std::int64_t(part.tokens.size());
    last = std::max(last, part.start + std::int64_t(part.tokens.size()) - 1);
  }

  s.reserve(m);
  s.logits_rows = 0;
  State::Plan& plan = s.plan(m);
  // Tokens, then positions, then cache rows (sequence s's position p at row s * context + p).
  std::vector<std::int32_t> inputs(std::size_t(3 * m));
  std::vector<std::int64_t> kept;
  std::size_t at = 0;
  for (const Part& part : parts) {
    for (std::size_t i = 0; i < part.tokens.size(); ++i, ++at) {
      const std::int64_t position = part.start + std::int64_t(i);
      inputs[at] = part.tokens[i];
      inputs[std::size_t(m) + at] = std::int32_t(position);
      inputs[std::size_t(2 * m) + at] = std::int32_t(part.sequence * context + position);
    }
    if (rows == Rows::last) kept.push_back(std::int64_t(at) - 1);
    s.lengths[std::size_t(part.sequence)] = part.start;  // later positions are forgotten
  }
  s.backend.upload(*plan.inputs, std::as_bytes(std::span(inputs)));
  const std::int64_t bound = s.attention_bound(last);
  const std::function<void()> issue = [&] { s.issue_forward(m, plan, bound, rows, kept); };
  if (!s.tracer && s.options.graphs) {
    State::Plan::Step& step = plan.steps[{int(rows), bound, kept}];
    if (step.graph && s.backend.replay(*step.graph)) {
      ++s.replayed;
    } else if (++step.seen < 2) {  // the first forward of its kind runs as it comes (and grows any workspace)
      issue();
    } else {  // captured (nullptr where the backend runs ops as they come), then replayed
      try {
        step.graph = s.backend.capture(issue);
      } catch (const std::runtime_error& e) {  // the device refused to capture: run op by op from now on
        std::fprintf(stderr, "[exactq] decoder: capturing the step failed (%s); its ops are issued one by one\n", e.what());
        s.options.graphs = false;
      }
      if (step.graph && s.backend.replay(*step.graph))
        ++s.replayed;
      else
        issue();
    }
  } else {
    issue();
  }
  for (const Part& part : parts) s.lengths[std::size_t(part.sequence)] = part.start + std::int64_t(part.tokens.size());
  s.logits_rows = rows == Rows::all ? m : std::int64_t(parts.size());
}

std::vector<std::byte> Decoder::logits() {
  State& s = *s_;
  std::vector<std::byte> bytes(std::size_t(s.logits_rows * vocab_size()) * s.e);
  if (bytes.empty()) return bytes;
  Buffer& staging = s.staging(bytes.size());
  s.backend.copy(*s.logits, 0, staging, 0, bytes.size());
  s.backend.synchronize();
  s.backend.download(staging, bytes);
  return bytes;
}

void Decoder::set_tracer(Tracer tracer, bool values) {
  s_->tracer = std::move(tracer);
  s_->trace_values = values;
}

std::vector<std::int32_t> Decoder::greedy() {
  State& s = *s_;
  std::vector<std::int32_t> ids(std::size_t(s.logits_rows));
  if (ids.empty()) return ids;
  s.backend.argmax(*s.logits, s.logits_rows, vocab_size(), s.t, *s.indices);
  Buffer& staging = s.staging(ids.size() * sizeof(std::int32_t));
  s.backend.copy(*s.indices, 0, staging, 0, staging.size());
  s.backend.synchronize();
  s.backend.download(staging, std::as_writable_bytes(std::span(ids)));
  return ids;
}

}  // namespace exactq
