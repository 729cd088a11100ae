// The modules a config needs, with the names mlx-lm gives them (llama.py, qwen2.py, qwen3.py,
// gemma3_text.py: "model.embed_tokens", "model.layers.{i}.self_attn.q_proj", ...).
#include <fmt/format.h>

#include "exactq/model.h"

namespace exactq {

std::vector<ModuleSpec> model_modules(const ModelConfig& c, bool with_lm_head) {
  const std::string m = c.tensor_prefix + "model.";
  std::vector<ModuleSpec> out;
  out.push_back({m + "embed_tokens", ModuleKind::embedding, c.vocab_size, c.hidden_size, false});
  auto linear = [&](const std::string& path, std::int64_t n, std::int64_t k, bool bias) {
    out.push_back({path, ModuleKind::linear, n, k, bias});
  };
  auto norm = [&](const std::string& path, std::int64_t n) { out.push_back({path, ModuleKind::norm, n, 0, false}); };
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = fmt::format("{}layers.{}.", m, i);
    norm(l + "input_layernorm", c.hidden_size);
    linear(l + "self_attn.q_proj", c.q_dim(), c.hidden_size, c.attention_bias);
    linear(l + "self_attn.k_proj", c.kv_dim(), c.hidden_size, c.attention_bias);
    linear(l + "self_attn.v_proj", c.kv_dim(), c.hidden_size, c.attention_bias);
    linear(l + "self_attn.o_proj", c.hidden_size, c.q_dim(), c.attention_out_bias);
    if (c.qk_norm) {
      norm(l + "self_attn.q_norm", c.head_dim);
      norm(l + "self_attn.k_norm", c.head_dim);
    }
    norm(l + "post_attention_layernorm", c.hidden_size);
    if (c.sandwich_norm) {
      norm(l + "pre_feedforward_layernorm", c.hidden_size);
      norm(l + "post_feedforward_layernorm", c.hidden_size);
    }
    linear(l + "mlp.gate_proj", c.intermediate_size, c.hidden_size, c.mlp_bias);
    linear(l + "mlp.up_proj", c.intermediate_size, c.hidden_size, c.mlp_bias);
    linear(l + "mlp.down_proj", c.hidden_size, c.intermediate_size, c.mlp_bias);
  }
  norm(m + "norm", c.hidden_size);
  if (with_lm_head) linear(c.tensor_prefix + "lm_head", c.vocab_size, c.hidden_size, false);
  return out;
}

}  // namespace exactq
