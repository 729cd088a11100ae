// A checkpoint in the mlx-community layout: config.json parsed into one validated ModelConfig
// (llama incl. Mistral and Llama 3's rope scaling, qwen2, qwen3, gemma3_text and gemma3 with a
// text_config), and the loader that maps the safetensors files and hands every weight out as a
// view: QuantizedMatrixView for quantized modules, dense views otherwise. Nothing is copied.
//
// The decoder is driven by the fields of ModelConfig, not by a class per architecture.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exactq/backend.h"
#include "exactq/format.h"
#include "exactq/safetensors.h"

namespace exactq {

enum class Arch : std::uint8_t { llama, qwen2, qwen3, gemma3 };
std::string_view to_string(Arch a);


struct RopeScaling {
  enum class Kind : std::uint8_t { none, linear, llama3 };
  Kind kind = Kind::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  std::int64_t original_max_position_embeddings = 0;  // llama3
};

// How one module is stored: quantized with (bits, group), or not.
struct QuantSpec {
  bool quantized = false;
  int bits = 0;
  int group = 0;
  bool operator==(const QuantSpec&) const = default;
};

// MLX's `quantization` (or its twin `quantization_config`) entry: {group_size, bits[, mode]},
// plus entries keyed by module path that override it or say `false` (not quantized).
struct QuantizationConfig {
  std::optional<QuantSpec> base;          // nullopt: the config has no quantization at all
  std::map<std::string, QuantSpec> modules;  // per-module overrides, by module path
  // The override for a module path, or nullptr.
  const QuantSpec* override_for(std::string_view path) const;
};

struct ModelConfig {
  Arch arch = Arch::llama;
  std::string model_type;     // as config.json says: llama, mistral, qwen2, qwen3, gemma3_text, gemma3
  std::string tensor_prefix;  // "language_model." where the text model is nested (gemma3), else ""

  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;  // 0 where config.json does not say

  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool rope_traditional = false;
  RopeScaling rope_scaling;
  // Whether the LM head is the embedding; nullopt where config.json does not say (then a
  // checkpoint without lm_head tensors is tied, as mlx-lm's gemma3 treats it).
  std::optional<bool> tie_word_embeddings;

  bool attention_bias = false;      // q/k/v carry .bias (qwen2; llama's attention_bias)
  bool attention_out_bias = false;  // o_proj carries .bias (llama's attention_bias)
  bool mlp_bias = false;            // gate/up/down carry .bias (llama's mlp_bias)
  bool qk_norm = false;             // per-head RMSNorm of q and k (qwen3, gemma3)
  bool sandwich_norm = false;       // gemma3: post-attention and pre/post-feedforward norms
  double norm_offset = 0.0;         // RMSNorm scales by (offset + weight): 1 for gemma3
  bool scale_embeddings = false;    // gemma3: embeddings times sqrt(hidden_size)
  Activation activation = Activation::silu;
  double query_pre_attn_scalar = 0;  // attention scale is this^-1/2 (head_dim unless gemma3 says)

  // gemma3's local layers: sliding-window attention with their own rope base.
  double rope_local_theta = 0;
  std::int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // per layer; empty where every layer is global

  QuantizationConfig quantization;

  std::int64_t q_dim() const { return num_heads * head_dim; }
  std::int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

// Parses and validates the text of config.json (`file` names it in errors). Throws
// CheckpointError naming the field and value on malformed JSON, an unknown model_type, a missing
// field, contradictory fields (kv heads not dividing heads, heads not dividing hidden_size where
// head_dim is not given, quantization and quantization_config disagreeing) or a value out of
// range, including bits or group sizes the kernels do not serve.
ModelConfig parse_model_config(std::string_view json_text, const std::string& file);

// ---- the tensors a config needs --------------------------------------------------------------

enum class ModuleKind : std::uint8_t { linear, embedding, norm };
struct ModuleSpec {
  std::string path;  // e.g. "model.layers.0.self_attn.q_proj" (with the config's tensor_prefix)
  ModuleKind kind = ModuleKind::linear;
  std::int64_t n = 0;  // output rows (embedding: vocab; norm: its length)
  std::int64_t k = 0;  // input size (embedding: hidden; norm: 0)
  bool has_bias = false;
};
// Every module of the text model in a fixed order (embedding, layers, final norm, then lm_head
// where `with_lm_head`).
std::vector<ModuleSpec> model_modules(const ModelConfig& c, bool with_lm_head);

// ---- a loaded checkpoint ---------------------------------------------------------------------

struct DenseView {
  std::string name;
  DType dtype = DType::bf16;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;
};

// A linear layer or embedding, [n, k]: quantized (q) or dense (weight), with an optional bias.
struct LinearView {
  std::string path;
  std::int64_t n = 0;
  std::int64_t k = 0;
  bool quantized = false;
  QuantizedMatrixView q;
  DenseView weight;
  std::optional<DenseView> bias;
  // Bytes read to use every row once: packed codes, scales and biases, or the dense weight, plus
  // the bias.
  std::int64_t bytes() const;
};

struct LayerView {
  LinearView q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;
  DenseView input_norm, post_attention_norm;
  std::optional<DenseView> pre_feedforward_norm, post_feedforward_norm, q_norm, k_norm;
};

struct LoadOptions {
  // Refuse tensors the config does not account for (as mlx-lm's strict load does). When false
  // they are only listed in Checkpoint::unknown_tensors.
  bool strict = true;
};

struct CheckpointFile {
  std::string path;
  std::uint64_t bytes = 0;
  std::size_t tensors = 0;
};

class Checkpoint {
 public:
  // Loads config.json and model.safetensors or the shards named by model.safetensors.index.json
  // from `dir`, and checks every tensor the config needs. Throws CheckpointError naming the file,
  // the tensor and the value.
  static Checkpoint open(const std::string& dir, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  DType dtype() const { return dtype_; }  // of every float tensor (scales, biases, norms)
  const LinearView& embed_tokens() const { return embed_; }
  const LinearView& lm_head() const { return tied_ ? embed_ : lm_head_; }
  bool tied() const { return tied_; }
  const DenseView& final_norm() const { return final_norm_; }
  const std::vector<LayerView>& layers() const { return layers_; }
  const std::vector<CheckpointFile>& files() const { return files_; }
  // Tensors outside the text model that mlx-lm drops on load (a vision tower, rotary tables).
  const std::vector<std::string>& ignored_tensors() const { return ignored_; }
  // Tensors nothing accounts for (only with LoadOptions::strict = false).
  const std::vector<std::string>& unknown_tensors() const { return unknown_; }
  // Every linear layer and embedding, in model_modules order (lm_head last unless tied).
  std::vector<const LinearView*> linears() const;

 private:
  friend class CheckpointLoader;
  ModelConfig config_;
  DType dtype_ = DType::bf16;
  LinearView embed_, lm_head_;
  bool tied_ = false;
  DenseView final_norm_;
  std::vector<LayerView> layers_;
  std::vector<CheckpointFile> files_;
  std::vector<std::string> ignored_, unknown_;
  std::vector<std::shared_ptr<SafetensorsFile>> mapped_;
};

}  // namespace exactq
