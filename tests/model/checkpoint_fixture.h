// Tiny checkpoints built by the tests themselves, for the loader's tests: the tensor names are
// listed here from mlx-lm's module names (not from exactq's layout code), quantized modules get
// random packed codes and random scales/biases, and the files are written as mlx-lm writes them
// (model.safetensors, or shards plus model.safetensors.index.json).
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exactq/safetensors.h"
#include "test_util.h"

namespace exactq::test {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / ("exactq-model-" + std::to_string(fresh_seed()))) { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

struct Tiny {
  std::string model_type = "llama";  // llama, mistral, qwen2, qwen3, gemma3_text, gemma3
  std::int64_t hidden = 128, inter = 192, layers = 2, heads = 4, kv = 2, head_dim = 32, vocab = 320;
  bool tied = false;
  int bits = 4, group = 64;
  DType dtype = DType::bf16;
  bool quantized = true;  // false: a Hugging Face checkpoint (dense weights, no quantization entry)
};

struct Fixture {
  nlohmann::json config;
  std::vector<TensorToWrite> tensors;
  TensorToWrite& at(const std::string& name) {
    for (auto& t : tensors)
      if (t.name == name) return t;
    throw std::runtime_error("fixture has no " + name);
  }
  void erase(const std::string& name) {
    std::erase_if(tensors, [&](const TensorToWrite& t) { return t.name == name; });
  }
  std::string prefix;
};

inline std::vector<std::byte> random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> b(n);
  for (auto& x : b) x = std::byte(rng());
  return b;
}

inline std::vector<std::byte> random_floats(std::size_t n, DType t, float center, float spread, std::mt19937_64& rng) {
  std::vector<std::byte> b(n * ref_size(t));
  std::uniform_real_distribution<float> u(center - spread, center + spread);
  for (std::size_t i = 0; i < n; ++i) ref_store(b.data(), i, t, u(rng));
  return b;
}

inline Fixture tiny_fixture(const Tiny& s, std::mt19937_64& rng) {
  Fixture f;
  const bool gemma = s.model_type.starts_with("gemma3");
  const bool nested = s.model_type == "gemma3";
  f.prefix = nested ? "language_model." : "";
  nlohmann::json text = {{"model_type", nested ? "gemma3_text" : s.model_type},
                         {"hidden_size", s.hidden},
                         {"intermediate_size", s.inter},
                         {"num_hidden_layers", s.layers},
                         {"num_attention_heads", s.heads},
                         {"num_key_value_heads", s.kv},
                         {"head_dim", s.head_dim},
                         {"vocab_size", s.vocab},
                         {"rms_norm_eps", 1e-5},
                         {"tie_word_embeddings", s.tied}};
  const nlohmann::json quant = {{"group_size", s.group}, {"bits", s.bits}};
  if (nested) f.config = {{"model_type", "gemma3"}, {"text_config", text}, {"vocab_size", s.vocab}};
  else f.config = text;
  if (s.quantized) {
    f.config["quantization"] = quant;
    f.config["quantization_config"] = quant;
  }

  const StDType st = s.dtype == DType::f32 ? StDType::F32 : s.dtype == DType::f16 ? StDType::F16 : StDType::BF16;
  auto dense = [&](const std::string& name, std::vector<std::int64_t> shape, float center) {
    std::size_t n = 1;
    for (auto d : shape) n *= std::size_t(d);
    f.tensors.push_back({name, st, shape, random_floats(n, s.dtype, center, 0.05f, rng)});
  };
  auto quantized = [&](const std::string& path, std::int64_t n, std::int64_t k) {
    if (!s.quantized) return dense(path + ".weight", {n, k}, 0.0f);
    f.tensors.push_back({path + ".weight", StDType::U32, {n, k * s.bits / 32}, random_bytes(std::size_t(n * k * s.bits / 8), rng)});
    dense(path + ".scales", {n, k / s.group}, 0.01f);
    dense(path + ".biases", {n, k / s.group}, -0.05f);
  };
  const std::string m = f.prefix + "model.";
  const std::int64_t q = s.heads * s.head_dim, kvd = s.kv * s.head_dim;
  quantized(m + "embed_tokens", s.vocab, s.hidden);
  for (std::int64_t i = 0; i < s.layers; ++i) {
    const std::string l = m + "layers." + std::to_string(i) + ".";
    dense(l + "input_layernorm.weight", {s.hidden}, 1.0f);
    dense(l + "post_attention_layernorm.weight", {s.hidden}, 1.0f);
    quantized(l + "self_attn.q_proj", q, s.hidden);
    quantized(l + "self_attn.k_proj", kvd, s.hidden);
    quantized(l + "self_attn.v_proj", kvd, s.hidden);
    quantized(l + "self_attn.o_proj", s.hidden, q);
    quantized(l + "mlp.gate_proj", s.inter, s.hidden);
    quantized(l + "mlp.up_proj", s.inter, s.hidden);
    quantized(l + "mlp.down_proj", s.hidden, s.inter);
    if (s.model_type == "qwen2")
      for (const char* p : {"q_proj", "k_proj", "v_proj"})
        dense(l + "self_attn." + p + ".bias", {std::string(p) == "q_proj" ? q : kvd}, 0.0f);
    if (s.model_type == "qwen3" || gemma) {
      dense(l + "self_attn.q_norm.weight", {s.head_dim}, 1.0f);
      dense(l + "self_attn.k_norm.weight", {s.head_dim}, 1.0f);
    }
    if (gemma) {
      dense(l + "pre_feedforward_layernorm.weight", {s.hidden}, 0.0f);
      dense(l + "post_feedforward_layernorm.weight", {s.hidden}, 0.0f);
    }
  }
  dense(m + "norm.weight", {s.hidden}, 1.0f);
  if (!s.tied) quantized(f.prefix + "lm_head", s.vocab, s.hidden);
  std::sort(f.tensors.begin(), f.tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return f;
}

inline void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// Shard i holds the tensors whose position is i modulo `shards` (so each shard has some of
// every kind); the index maps every tensor, as mlx-lm writes it.
inline void write_fixture(const fs::path& dir, const Fixture& f, int shards = 1) {
  write_text(dir / "config.json", f.config.dump(2));
  std::vector<std::vector<const TensorToWrite*>> parts;
  parts.resize(std::size_t(shards));
  for (std::size_t i = 0; i < f.tensors.size(); ++i) parts[i % std::size_t(shards)].push_back(&f.tensors[i]);
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
    const std::string file = shards == 1 ? "model.safetensors" : name;
    const auto bytes = safetensors_bytes(parts[std::size_t(s)], {{"format", "mlx"}});
    write_file((dir / file).string(), bytes);
    for (const auto* t : parts[std::size_t(s)]) index["weight_map"][t->name] = file;
  }
  if (shards > 1) write_text(dir / "model.safetensors.index.json", index.dump(4));
}

}  // namespace exactq::test
