// Copies a loaded checkpoint's tensors to a backend: quantized modules as Matrices (in qmv_mma's
// fragment layout too where the backend keeps one), dense ones as DenseMatrices, norms and biases
// as Buffers.
#include "engine/weights.h"

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

}  // namespace

Weights upload_weights(Backend& backend, const Checkpoint& c) {
  Weights w;
  w.embed = upload(backend, c.embed_tokens());
  if (!c.tied()) w.lm_head = upload(backend, c.lm_head());
  w.final_norm = upload(backend, c.final_norm());
  for (const LayerView& v : c.layers()) {
    LayerWeights l;
    l.q_proj = upload(backend, v.q_proj);
    l.k_proj = upload(backend, v.k_proj);
    l.v_proj = upload(backend, v.v_proj);
    l.o_proj = upload(backend, v.o_proj);
    l.gate_proj = upload(backend, v.gate_proj);
    l.up_proj = upload(backend, v.up_proj);
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
