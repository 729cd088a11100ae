// config.json -> ModelConfig on the published configs of the supported families (values as the
// Hugging Face repositories publish them), and one refusal per malformed kind, each from a valid
// config that parses (the positive control) with one field changed.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "exactq/model.h"
#include "test_util.h"

namespace exactq::test {
namespace {

using nlohmann::json;

// meta-llama/Meta-Llama-3-8B-Instruct's config.json (the fields a loader reads), plus the
// quantization entry mlx-lm adds.
json llama3_8b() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": null, "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "vocab_size": 128256, "quantization": {"group_size": 64, "bits": 4},
    "quantization_config": {"group_size": 64, "bits": 4}})");
}

// Qwen/Qwen3-8B.
json qwen3_8b() {
  return json::parse(R"({"architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 40960,
    "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 151936,
    "quantization": {"group_size": 64, "bits": 4, "mode": "affine"}})");
}

// google/gemma-3-12b-it: the text model under text_config, heads and vocab stated or defaulted.
json gemma3_12b() {
  return json::parse(R"({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "mm_tokens_per_image": 256, "text_config": {"hidden_size": 3840, "intermediate_size": 15360,
    "model_type": "gemma3_text", "num_attention_heads": 16, "num_hidden_layers": 48, "num_key_value_heads": 8,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"},
    "quantization": {"group_size": 64, "bits": 4}})");
}

ModelConfig parse(const json& j) { return parse_model_config(j.dump(), "/m/config.json"); }

void expect_refused(const json& j, std::initializer_list<std::string> needles) {
  try {
    parse(j);
    ADD_FAILURE() << "accepted: " << j.dump();
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("/m/config.json"), std::string::npos) << m;
    for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "'" << n << "' not in: " << m;
  }
}

TEST(Config, Llama3) {
  const ModelConfig c = parse(llama3_8b());
  EXPECT_EQ(c.arch, Arch::llama);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::none);
  EXPECT_EQ(c.tie_word_embeddings, false);
  EXPECT_FALSE(c.qk_norm || c.attention_bias || c.sandwich_norm);
  ASSERT_TRUE(c.quantization.base);
  EXPECT_EQ(*c.quantization.base, (QuantSpec{true, 4, 64}));
  EXPECT_EQ(c.tensor_prefix, "");
}

TEST(Config, Llama31RopeScaling) {
  json j = llama3_8b();
  j["rope_scaling"] = json::parse(R"({"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"})");
  j["max_position_embeddings"] = 131072;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::llama3);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  j["rope_scaling"]["high_freq_factor"] = 0.5;
  expect_refused(j, {"rope_scaling.high_freq_factor", "0.5"});
  j["rope_scaling"] = json::parse(R"({"factor": 4.0, "rope_type": "yarn"})");
  expect_refused(j, {"rope_scaling.rope_type", "yarn"});
}

TEST(Config, MistralIsLlama) {
  const ModelConfig c = parse(json::parse(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
    "sliding_window": null, "tie_word_embeddings": false, "vocab_size": 32768})"));
  EXPECT_EQ(c.arch, Arch::llama);
  EXPECT_EQ(c.model_type, "mistral");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FALSE(c.quantization.base);
}

TEST(Config, Qwen2HasQkvBias) {
  // Qwen/Qwen2.5-7B-Instruct.
  const ModelConfig c = parse(json::parse(R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584,
    "intermediate_size": 18944, "max_position_embeddings": 32768, "model_type": "qwen2", "num_attention_heads": 28,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 131072, "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 152064})"));
  EXPECT_EQ(c.arch, Arch::qwen2);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
}

TEST(Config, Qwen3) {
  const ModelConfig c = parse(qwen3_8b());
  EXPECT_EQ(c.arch, Arch::qwen3);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_layers, 36);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.vocab_size, 151936);
}

TEST(Config, Gemma3WithTextConfig) {
  const ModelConfig c = parse(gemma3_12b());
  EXPECT_EQ(c.arch, Arch::gemma3);
  EXPECT_EQ(c.tensor_prefix, "language_model.");
  EXPECT_EQ(c.hidden_size, 3840);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.head_dim, 256);  // not hidden/heads = 240: Gemma states it apart
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::linear);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.norm_offset, 1.0);
  EXPECT_EQ(c.activation, Activation::gelu_tanh);
  ASSERT_EQ(c.sliding_layers.size(), 48u);
  for (std::size_t i = 0; i < 48; ++i) EXPECT_EQ(c.sliding_layers[i], (i + 1) % 6 != 0) << i;
  // The same text model as a plain gemma3_text config.
  json t = gemma3_12b()["text_config"];
  t["quantization"] = {{"group_size", 64}, {"bits", 4}};
  const ModelConfig d = parse(t);
  EXPECT_EQ(d.tensor_prefix, "");
  EXPECT_EQ(d.head_dim, 256);
  EXPECT_EQ(d.num_kv_heads, 8);
}

TEST(Config, QuantizationOverridesAndTwin) {
  json j = qwen3_8b();
  j["quantization"]["model.layers.0.mlp.down_proj"] = {{"group_size", 32}, {"bits", 8}};
  j["quantization"]["lm_head"] = false;
  j["quantization_config"] = j["quantization"];
  const ModelConfig c = parse(j);
  EXPECT_EQ(*c.quantization.override_for("model.layers.0.mlp.down_proj"), (QuantSpec{true, 8, 32}));
  EXPECT_FALSE(c.quantization.override_for("lm_head")->quantized);
  EXPECT_EQ(c.quantization.override_for("model.layers.1.mlp.down_proj"), nullptr);
  // Twins that disagree.
  j["quantization_config"]["bits"] = 8;
  expect_refused(j, {"quantization_config", "disagrees"});
  // Only the twin present is enough.
  json k = qwen3_8b();
  k["quantization_config"] = k["quantization"];
  k.erase("quantization");
  EXPECT_EQ(*parse(k).quantization.base, (QuantSpec{true, 4, 64}));
}

TEST(Config, RefusesBitsAndGroupsTheKernelsDoNotServe) {
  json j = qwen3_8b();
  j["quantization"]["bits"] = 7;
  expect_refused(j, {"quantization", "bits 7"});
  j = qwen3_8b();
  j["quantization"]["group_size"] = 48;
  expect_refused(j, {"quantization", "group_size 48"});
  j = qwen3_8b();
  j["quantization"]["model.layers.3.self_attn.q_proj"] = {{"bits", 1}};
  expect_refused(j, {"model.layers.3.self_attn.q_proj", "bits 1"});
  j = qwen3_8b();
  j["quantization"]["mode"] = "mxfp4";
  expect_refused(j, {"quantization", "mxfp4"});
  j = qwen3_8b();
  j["quantization"]["model.layers.3.mlp"] = true;
  expect_refused(j, {"model.layers.3.mlp", "true"});
  j = qwen3_8b();
  j.erase("quantization");
  j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  expect_refused(j, {"quantization_config", "gptq"});
}

TEST(Config, RefusesMissingFields) {
  for (const char* field : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                            "rms_norm_eps"}) {
    json j = llama3_8b();
    j.erase(field);
    expect_refused(j, {field, "missing"});
  }
  json g = gemma3_12b();
  g.erase("text_config");
  expect_refused(g, {"text_config"});
  json t = llama3_8b();
  t.erase("model_type");
  t.erase("architectures");
  expect_refused(t, {"model_type", "missing"});
}

TEST(Config, RefusesContradictions) {
  json j = llama3_8b();
  j["num_key_value_heads"] = 5;
  expect_refused(j, {"num_key_value_heads", "5", "32"});
  j = llama3_8b();
  j["num_attention_heads"] = 30;  // 4096 / 30 is not whole; llama derives head_dim from it
  j["num_key_value_heads"] = 6;
  expect_refused(j, {"num_attention_heads", "30", "4096"});
  j = llama3_8b();
  j["architectures"] = {"Qwen3ForCausalLM"};
  expect_refused(j, {"architectures", "Qwen3ForCausalLM", "llama"});
  j = gemma3_12b();
  j["vocab_size"] = 1000;
  j["text_config"]["vocab_size"] = 2000;
  expect_refused(j, {"text_config.vocab_size", "2000", "1000"});
}

TEST(Config, RefusesOutOfRangeValues) {
  struct Case {
    const char* field;
    json value;
    const char* shown;  // how the message prints the value
  };
  const Case cases[] = {{"hidden_size", 0, "0"},
                        {"hidden_size", -4096, "-4096"},
                        {"num_hidden_layers", 1e9, "1000000000.0"},
                        {"vocab_size", "128256", "\"128256\""},
                        {"rms_norm_eps", 0.0, "0 is out of range"},
                        {"rope_theta", -1.0, "-1 is out of range"},
                        {"intermediate_size", 1.5, "1.5"},
                        {"tie_word_embeddings", "no", "\"no\""},
                        {"vocab_size", 18446744073709551615ull, "18446744073709551615"}};
  for (const auto& c : cases) {
    json j = llama3_8b();
    j[c.field] = c.value;
    expect_refused(j, {c.field, c.shown});
  }
  json g = gemma3_12b();
  g["text_config"]["head_dim"] = 255;
  expect_refused(g, {"text_config.head_dim", "255"});
}

TEST(Config, RefusesMalformedJsonAndUnknownModels) {
  const std::string valid = llama3_8b().dump();
  EXPECT_NO_THROW(parse_model_config(valid, "c"));
  EXPECT_THROW(parse_model_config(valid.substr(0, valid.size() - 1), "c"), CheckpointError);
  EXPECT_THROW(parse_model_config(std::string(valid).replace(2, 1, "\xff"), "c"), CheckpointError);
  EXPECT_THROW(parse_model_config("{\"model_type\": \"llama\", \"model_type\": \"qwen3\"}", "c"), CheckpointError);
  EXPECT_THROW(parse_model_config("[]", "c"), CheckpointError);
  json j = llama3_8b();
  j["model_type"] = "gpt2";
  expect_refused(j, {"model_type", "gpt2"});
}

}  // namespace
}  // namespace exactq::test
