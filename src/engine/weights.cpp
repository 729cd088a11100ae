// Copies a loaded checkpoint's tensors to a backend: quantized modules as Matrices (in qmv_mma's
// fragment layout too where the backend keeps one), dense ones as DenseMatrices, norms and biases
// as Buffers. q/k/v and gate/up may be stacked into one matrix each (fewer, longer launches).
#include "engine/weights.h"

#include <initializer_list>

namespace exactq::engine {

namespace {

std::unique_ptr<Buffer> upload(Backend& backend, const DenseView& v) {
  auto b = backend.allocate(v.bytes.size());
  backend.upload(*b, v.bytes);
  return b;
}

std::unique_ptr<Buffer> upload(Backend& backend, const std::optional<DenseView>& v) {
  return v ? upload(backend, *v) : nullptr;
}

Linear upload(Backend& backend, const LinearView& v) {
  Linear l;
  l.n = v.n;
  l.k = v.k;
  if (v.quantized)
    l.q = backend.load(v.q);
  else
    l.dense = backend.load_dense(v.weight.dtype, v.n, v.k, v.weight.bytes);
  if (v.bias) l.bias = upload(backend, *v.bias);
  return l;
}

// The parts' rows one after another: MLX's layout keeps each row's codes, scales and biases
// together, so the stacked matrix's bytes are the parts' bytes in order. Empty where the parts
// differ in format or some but not all have a bias.
Linear stacked(Backend& backend, std::initializer_list<const LinearView*> parts) {
  const LinearView& first = **parts.begin();
  Linear l;
  for (const LinearView* p : parts)
    if (!p->quantized || p->k != first.k || p->q.bits != first.q.bits || p->q.group != first.q.group ||
        p->q.dtype != first.q.dtype || p->q.layout != WeightLayout::mlx || p->bias.has_value() != first.bias.has_value() ||
        (p->bias && p->bias->dtype != first.bias->dtype))
      return l;
  QuantizedMatrix m;
  m.k = first.k, m.bits = first.q.bits, m.group = first.q.group, m.dtype = first.q.dtype;
  std::vector<std::byte> bias;
  for (const LinearView* p : parts) {
    m.n += p->n;
    m.packed.insert(m.packed.end(), p->q.packed.begin(), p->q.packed.end());
    m.scales.insert(m.scales.end(), p->q.scales.begin(), p->q.scales.end());
    m.biases.insert(m.biases.end(), p->q.biases.begin(), p->q.biases.end());
    if (p->bias) bias.insert(bias.end(), p->bias->bytes.begin(), p->bias->bytes.end());
  }
  l.n = m.n;
  l.k = m.k;
  l.q = backend.load(m.view());
  if (!bias.empty()) {
    l.bias = backend.allocate(bias.size());
    backend.upload(*l.bias, bias);
  }
  return l;
}

// A part whose rows live in a stacked matrix: its shape alone.
Linear shape_of(const LinearView& v) {
  Linear l;
  l.n = v.n;
  l.k = v.k;
  return l;
}

}  // namespace

Weights upload_weights(Backend& backend, const Checkpoint& c, bool stack) {
  Weights w;
  w.embed = upload(backend, c.embed_tokens());
  if (!c.tied()) w.lm_head = upload(backend, c.lm_head());
  w.final_norm = upload(backend, c.final_norm());
  for (const LayerView& v : c.layers()) {
    LayerWeights l;
    if (stack) {
      l.qkv = stacked(backend, {&v.q_proj, &v.k_proj, &v.v_proj});
      l.gate_up = stacked(backend, {&v.gate_proj, &v.up_proj});
    }
    const bool qkv = l.qkv.q != nullptr, gate_up = l.gate_up.q != nullptr;
    l.q_proj = qkv ? shape_of(v.q_proj) : upload(backend, v.q_proj);
    l.k_proj = qkv ? shape_of(v.k_proj) : upload(backend, v.k_proj);
    l.v_proj = qkv ? shape_of(v.v_proj) : upload(backend, v.v_proj);
    l.o_proj = upload(backend, v.o_proj);
    l.gate_proj = gate_up ? shape_of(v.gate_proj) : upload(backend, v.gate_proj);
    l.up_proj = gate_up ? shape_of(v.up_proj) : upload(backend, v.up_proj);
    l.down_proj = upload(backend, v.down_proj);
    l.input_norm = upload(backend, v.input_norm);
    l.post_attention_norm = upload(backend, v.post_attention_norm);
    l.pre_feedforward_norm = upload(backend, v.pre_feedforward_norm);
    l.post_feedforward_norm = upload(backend, v.post_feedforward_norm);
    l.q_norm = upload(backend, v.q_norm);
    l.k_norm = upload(backend, v.k_norm);
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace exactq::engine
