// A checkpoint's weights copied to one backend, in the shapes the forward pass reads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "exactq/backend.h"
#include "exactq/model.h"

namespace exactq::engine {

// A linear layer or embedding [n, k]: quantized (q) or dense, with an optional bias.
struct Linear {
  std::int64_t n = 0, k = 0;
  std::unique_ptr<Matrix> q;
  std::unique_ptr<DenseMatrix> dense;
  std::unique_ptr<Buffer> bias;
};

struct LayerWeights {
  Linear q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;
  // Where stacked: q/k/v's rows in one matrix [Q + 2 KV, H] and gate/up's in one [2 I, H]; the
  // parts' own Linears then hold no matrix.
  Linear qkv, gate_up;
  std::unique_ptr<Buffer> input_norm, post_attention_norm;
  std::unique_ptr<Buffer> pre_feedforward_norm, post_feedforward_norm, q_norm, k_norm;  // where the model has them
};

struct Weights {
  Linear embed;
  Linear lm_head;  // empty where the head is the embedding (tied)
  std::unique_ptr<Buffer> final_norm;
  std::vector<LayerWeights> layers;
  const Linear& head() const { return lm_head.q || lm_head.dense ? lm_head : embed; }
};

// `stack`: q/k/v and gate/up stacked where the parts share one quantized format and all or none
// have a bias. Only for kernels whose rows' bytes do not depend on the matrix's other rows (the
// exact family's qmv and qmv_streamed).
Weights upload_weights(Backend& backend, const Checkpoint& checkpoint, bool stack);

}  // namespace exactq::engine
