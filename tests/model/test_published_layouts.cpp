// The tensors of three published mlx-community checkpoints, written out here as facts, against
// what make-model writes for the matching shape (its plan: nothing is generated, the 8B/12B
// models are built only on the GPU machine).
//
// Sources of the facts: the models' public config.json (dimensions), mlx-lm's model definitions
// (module names: llama.py, qwen3.py, gemma3.py/gemma3_text.py) and its quantizer
// (mlx_lm/utils.py quantize_model: every Linear and Embedding whose input size divides by the
// group, so norms stay dense; U32 weights [out, in*bits/32], scales and biases [out, in/group]).
// * mlx-community/Meta-Llama-3-8B-Instruct-4bit: made by mlx-lm in April 2024, whose convert
//   saved quantized models in float16 (`dtype = mx.float16 if quantize`): scales, biases and
//   norms are F16. One model.safetensors of 4.52 GB plus the index. Untied lm_head.
// * mlx-community/Qwen3-8B-4bit: BF16 (convert keeps the config's torch_dtype since late 2024);
//   q_norm/k_norm [128] per layer; untied lm_head.
// * mlx-community/gemma-3-12b-it-4bit: the multimodal gemma3 model, text tensors under
//   "language_model."; BF16. Its vision_tower.* and multi_modal_projector.* tensors are not
//   listed (exactq loads the text model and reports them as ignored), nor is a
//   language_model.lm_head: the head is the embedding (make-model writes none; the loader takes
//   a present one as an untied head).
#include <gtest/gtest.h>

#include <map>

#include "exactq/checkpoint_writer.h"
#include "test_util.h"

namespace exactq::test {
namespace {

using Shape = std::vector<std::int64_t>;
struct Fact {
  StDType dtype;
  Shape shape;
};
using Facts = std::map<std::string, Fact>;

// A quantized 4-bit, group-64 module: weight [n, k/8] U32, scales and biases [n, k/64].
void quantized(Facts& f, const std::string& path, std::int64_t n, std::int64_t k, StDType t) {
  f[path + ".weight"] = {StDType::U32, {n, k / 8}};
  f[path + ".scales"] = {t, {n, k / 64}};
  f[path + ".biases"] = {t, {n, k / 64}};
}

Facts llama3_8b_instruct_4bit() {
  const StDType t = StDType::F16;
  Facts f;
  f["model.embed_tokens.weight"] = {StDType::U32, {128256, 512}};
  f["model.embed_tokens.scales"] = {t, {128256, 64}};
  f["model.embed_tokens.biases"] = {t, {128256, 64}};
  f["model.norm.weight"] = {t, {4096}};
  f["lm_head.weight"] = {StDType::U32, {128256, 512}};
  f["lm_head.scales"] = {t, {128256, 64}};
  f["lm_head.biases"] = {t, {128256, 64}};
  for (int i = 0; i < 32; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    f[l + "input_layernorm.weight"] = {t, {4096}};
    f[l + "post_attention_layernorm.weight"] = {t, {4096}};
    quantized(f, l + "self_attn.q_proj", 4096, 4096, t);
    quantized(f, l + "self_attn.k_proj", 1024, 4096, t);
    quantized(f, l + "self_attn.v_proj", 1024, 4096, t);
    quantized(f, l + "self_attn.o_proj", 4096, 4096, t);
    quantized(f, l + "mlp.gate_proj", 14336, 4096, t);
    quantized(f, l + "mlp.up_proj", 14336, 4096, t);
    quantized(f, l + "mlp.down_proj", 4096, 14336, t);
  }
  return f;
}

Facts qwen3_8b_4bit() {
  const StDType t = StDType::BF16;
  Facts f;
  quantized(f, "model.embed_tokens", 151936, 4096, t);
  quantized(f, "lm_head", 151936, 4096, t);
  f["model.norm.weight"] = {t, {4096}};
  for (int i = 0; i < 36; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    f[l + "input_layernorm.weight"] = {t, {4096}};
    f[l + "post_attention_layernorm.weight"] = {t, {4096}};
    f[l + "self_attn.q_norm.weight"] = {t, {128}};
    f[l + "self_attn.k_norm.weight"] = {t, {128}};
    quantized(f, l + "self_attn.q_proj", 4096, 4096, t);
    quantized(f, l + "self_attn.k_proj", 1024, 4096, t);
    quantized(f, l + "self_attn.v_proj", 1024, 4096, t);
    quantized(f, l + "self_attn.o_proj", 4096, 4096, t);
    quantized(f, l + "mlp.gate_proj", 12288, 4096, t);
    quantized(f, l + "mlp.up_proj", 12288, 4096, t);
    quantized(f, l + "mlp.down_proj", 4096, 12288, t);
  }
  return f;
}

Facts gemma3_12b_it_4bit_text() {
  const StDType t = StDType::BF16;
  Facts f;
  const std::string m = "language_model.model.";
  quantized(f, m + "embed_tokens", 262208, 3840, t);
  f[m + "norm.weight"] = {t, {3840}};
  for (int i = 0; i < 48; ++i) {
    const std::string l = m + "layers." + std::to_string(i) + ".";
    for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"})
      f[l + n + ".weight"] = {t, {3840}};
    f[l + "self_attn.q_norm.weight"] = {t, {256}};
    f[l + "self_attn.k_norm.weight"] = {t, {256}};
    quantized(f, l + "self_attn.q_proj", 4096, 3840, t);  // 16 heads x 256
    quantized(f, l + "self_attn.k_proj", 2048, 3840, t);  // 8 kv heads x 256
    quantized(f, l + "self_attn.v_proj", 2048, 3840, t);
    quantized(f, l + "self_attn.o_proj", 3840, 4096, t);
    quantized(f, l + "mlp.gate_proj", 15360, 3840, t);
    quantized(f, l + "mlp.up_proj", 15360, 3840, t);
    quantized(f, l + "mlp.down_proj", 3840, 15360, t);
  }
  return f;
}

void expect_plan_matches(const MakeModelOptions& o, const Facts& facts, std::size_t count) {
  ASSERT_EQ(facts.size(), count) << "the facts themselves";
  const auto plan = make_model_plan(o);
  EXPECT_EQ(plan.size(), facts.size());
  for (const auto& p : plan) {
    const auto it = facts.find(p.name);
    if (it == facts.end()) {
      ADD_FAILURE() << "make-model writes " << p.name << ", the published checkpoint has no such tensor";
      continue;
    }
    EXPECT_EQ(p.dtype, it->second.dtype) << p.name;
    EXPECT_EQ(p.shape, it->second.shape) << p.name;
  }
}

TEST(MakeModelPublished, Llama3_8bInstruct4bit) {
  MakeModelOptions o;
  o.arch = "llama";
  o.shape = "llama3-8b";
  o.dtype = DType::f16;
  expect_plan_matches(o, llama3_8b_instruct_4bit(), 7 + 32 * 23);
}

TEST(MakeModelPublished, Qwen3_8b4bit) {
  MakeModelOptions o;
  o.arch = "qwen3";
  o.shape = "qwen3-8b";
  expect_plan_matches(o, qwen3_8b_4bit(), 7 + 36 * 25);
}

TEST(MakeModelPublished, Gemma3_12bIt4bitTextModel) {
  MakeModelOptions o;
  o.arch = "gemma3";
  o.shape = "gemma3-12b";
  expect_plan_matches(o, gemma3_12b_it_4bit_text(), 4 + 48 * 27);
}

}  // namespace
}  // namespace exactq::test
