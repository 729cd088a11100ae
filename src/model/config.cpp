// config.json -> ModelConfig. Defaults follow the Hugging Face config classes (what a field left
// out means to the library that wrote the checkpoint); ranges are wide enough for any released
// model and narrow enough that sizes computed from them cannot overflow.
#include <fmt/format.h>

#include "model/config_parts.h"
#include "model/json_fields.h"

namespace exactq {

std::string_view to_string(Arch a) {
  switch (a) {
    case Arch::llama: return "llama";
    case Arch::qwen2: return "qwen2";
    case Arch::qwen3: return "qwen3";
    default: return "gemma3";
  }
}

namespace {

constexpr int kMaxConfigDepth = 16;

struct Kind {
  Arch arch;
  bool nested;  // the text model sits under text_config, its tensors under "language_model."
};

bool kind_of_model_type(std::string_view t, Kind& k) {
  if (t == "llama" || t == "mistral") k = {Arch::llama, false};
  else if (t == "qwen2") k = {Arch::qwen2, false};
  else if (t == "qwen3") k = {Arch::qwen3, false};
  else if (t == "gemma3_text") k = {Arch::gemma3, false};
  else if (t == "gemma3") k = {Arch::gemma3, true};
  else return false;
  return true;
}

bool kind_of_architecture(std::string_view a, Kind& k) {
  if (a == "LlamaForCausalLM" || a == "MistralForCausalLM") k = {Arch::llama, false};
  else if (a == "Qwen2ForCausalLM") k = {Arch::qwen2, false};
  else if (a == "Qwen3ForCausalLM") k = {Arch::qwen3, false};
  else if (a == "Gemma3ForCausalLM") k = {Arch::gemma3, false};
  else if (a == "Gemma3ForConditionalGeneration") k = {Arch::gemma3, true};
  else return false;
  return true;
}

// model_type decides; architectures[0] is used where model_type is absent and must agree where
// both are given.
Kind detect_kind(const Fields& root, std::string& model_type) {
  Kind k{};
  const auto type = root.optional_string("model_type");
  std::optional<std::string> arch;
  if (const nlohmann::json* list = root.get("architectures")) {
    if (!list->is_array() || list->empty() || !(*list)[0].is_string())
      root.fail("architectures", fmt::format("{} is not a list of names", printable(list->dump(), 80)));
    arch = (*list)[0].get<std::string>();
  }
  if (type) {
    if (!kind_of_model_type(*type, k))
      root.fail("model_type", fmt::format("'{}' is not supported (llama, mistral, qwen2, qwen3, gemma3_text, gemma3)", printable(*type)));
    Kind a{};
    if (arch && kind_of_architecture(*arch, a) && a.arch != k.arch)
      root.fail("architectures", fmt::format("'{}' contradicts model_type '{}'", printable(*arch), printable(*type)));
    model_type = *type;
    return k;
  }
  if (!arch) root.fail("model_type", "is missing (and no architectures are given)");
  if (!kind_of_architecture(*arch, k)) root.fail("architectures", fmt::format("'{}' is not supported", printable(*arch)));
  model_type = k.nested ? "gemma3" : std::string(to_string(k.arch));
  return k;
}

void parse_rope_scaling(const Fields& t, ModelConfig& c) {
  const nlohmann::json* r = t.get("rope_scaling");
  if (r == nullptr) return;
  if (!r->is_object()) t.fail("rope_scaling", fmt::format("{} is not an object", printable(r->dump(), 80)));
  const Fields f(*r, t.file(), t.where() + "rope_scaling.");
  const auto a = f.optional_string("rope_type"), b = f.optional_string("type");
  if (a && b && *a != *b) f.fail("type", fmt::format("'{}' contradicts rope_type '{}'", printable(*b), printable(*a)));
  const std::string type = a ? *a : b ? *b : "";
  if (type == "default") return;
  if (type == "linear") {
    c.rope_scaling.kind = RopeScaling::Kind::linear;
    c.rope_scaling.factor = f.real("factor", 0.0, 1e6);
  } else if (type == "llama3") {
    auto& s = c.rope_scaling;
    s.kind = RopeScaling::Kind::llama3;
    s.factor = f.real("factor", 0.0, 1e6);
    s.low_freq_factor = f.real("low_freq_factor", 0.0, 1e6);
    s.high_freq_factor = f.real("high_freq_factor", 0.0, 1e6);
    s.original_max_position_embeddings = f.integer("original_max_position_embeddings", 1, std::int64_t(1) << 24);
    if (!(s.low_freq_factor < s.high_freq_factor))
      f.fail("high_freq_factor", fmt::format("{} is not above low_freq_factor {}", s.high_freq_factor, s.low_freq_factor));
  } else {
    f.fail("rope_type", fmt::format("'{}' is not supported (default, linear, llama3)", printable(type)));
  }
  if (c.rope_scaling.factor < 1.0)
    f.fail("factor", fmt::format("{} is below 1 (scaling only stretches positions)", c.rope_scaling.factor));
}

void parse_gemma3(const Fields& t, ModelConfig& c) {
  c.qk_norm = true;
  c.sandwich_norm = true;
  c.norm_offset = 1.0;
  c.scale_embeddings = true;
  c.activation = Activation::gelu_tanh;
  for (const char* key : {"hidden_activation", "hidden_act"})
    if (const auto act = t.optional_string(key); act && *act != "gelu_pytorch_tanh")
      t.fail(key, fmt::format("'{}' is not supported (gelu_pytorch_tanh)", printable(*act)));
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"})
    if (t.has(key)) t.fail(key, "soft-capping is not supported (Gemma 3 has none: null)");
  c.query_pre_attn_scalar = t.real("query_pre_attn_scalar", 0.0, 1e9, 256.0);
  c.rope_local_theta = t.real("rope_local_base_freq", 0.0, 1e12, 10000.0);
  c.sliding_window = t.integer("sliding_window", 1, std::int64_t(1) << 24, 4096);
  c.sliding_layers.assign(std::size_t(c.num_layers), false);
  if (const nlohmann::json* types = t.get("layer_types")) {
    if (!types->is_array() || std::int64_t(types->size()) != c.num_layers)
      t.fail("layer_types", fmt::format("is not a list of {} layer types", c.num_layers));
    for (std::size_t i = 0; i < types->size(); ++i) {
      const auto& v = (*types)[i];
      if (v == "sliding_attention") c.sliding_layers[i] = true;
      else if (v != "full_attention") t.fail("layer_types", fmt::format("entry {} is {}", i, printable(v.dump(), 60)));
    }
  } else {
    // Every pattern-th layer is global, the others slide (mlx-lm's and HF's rule).
    const std::int64_t pattern = t.integer("sliding_window_pattern", 1, 1 << 20, 6);
    for (std::int64_t i = 0; i < c.num_layers; ++i) c.sliding_layers[std::size_t(i)] = (i + 1) % pattern != 0;
  }
}

}  // namespace

ModelConfig parse_model_config(std::string_view json_text, const std::string& file) {
  nlohmann::json root;
  try {
    root = parse_json_strict(json_text, kMaxConfigDepth);
  } catch (const JsonRefused& e) {
    checkpoint_fail(file, e.what());
  }
  if (!root.is_object()) checkpoint_fail(file, "is not a JSON object");
  const Fields top(root, file, "");
  ModelConfig c;
  const Kind kind = detect_kind(top, c.model_type);
  c.arch = kind.arch;
  const nlohmann::json* text = &root;
  if (kind.nested) {
    text = top.get("text_config");
    if (text == nullptr || !text->is_object()) top.fail("text_config", "is missing or not an object (model_type gemma3)");
    c.tensor_prefix = "language_model.";
  }
  const Fields t(*text, file, kind.nested ? "text_config." : "");
  const bool gemma = c.arch == Arch::gemma3;
  constexpr std::int64_t kMaxWidth = std::int64_t(1) << 20;

  c.hidden_size = t.integer("hidden_size", 1, kMaxWidth);
  c.intermediate_size = t.integer("intermediate_size", 1, kMaxWidth);
  c.num_layers = t.integer("num_hidden_layers", 1, 4096);
  c.num_heads = gemma ? t.integer("num_attention_heads", 1, 4096, 8) : t.integer("num_attention_heads", 1, 4096);
  c.num_kv_heads = t.integer("num_key_value_heads", 1, 4096, gemma ? 4 : c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    t.fail("num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}", c.num_kv_heads, c.num_heads));
  const std::int64_t default_head_dim = gemma ? 256 : c.arch == Arch::qwen3 ? 128 : 0;
  if (const auto hd = t.optional_int("head_dim", 2, 4096)) {
    c.head_dim = *hd;
  } else if (default_head_dim != 0) {
    c.head_dim = default_head_dim;
  } else {
    if (c.hidden_size % c.num_heads != 0)
      t.fail("num_attention_heads", fmt::format("{} does not divide hidden_size {}", c.num_heads, c.hidden_size));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) t.fail("head_dim", fmt::format("{} is odd (rotary embeddings rotate pairs)", c.head_dim));
  if (c.q_dim() > kMaxWidth) t.fail("head_dim", fmt::format("{} x {} heads is over {}", c.head_dim, c.num_heads, kMaxWidth));

  constexpr std::int64_t kMaxVocab = std::int64_t(1) << 24;
  if (kind.nested) {
    // mlx-lm's gemma3 overwrites text_config's vocab_size with the top level's (default 262208).
    const auto outer = top.optional_int("vocab_size", 1, kMaxVocab), inner = t.optional_int("vocab_size", 1, kMaxVocab);
    if (outer && inner && *outer != *inner)
      t.fail("vocab_size", fmt::format("{} contradicts the top-level vocab_size {}", *inner, *outer));
    c.vocab_size = outer ? *outer : inner ? *inner : 262208;
  } else {
    c.vocab_size = gemma ? t.integer("vocab_size", 1, kMaxVocab, 262208) : t.integer("vocab_size", 1, kMaxVocab);
  }
  c.max_position_embeddings = t.integer("max_position_embeddings", 1, std::int64_t(1) << 30, 0);
  c.rms_norm_eps = gemma ? t.real("rms_norm_eps", 0.0, 0.1, 1e-6) : t.real("rms_norm_eps", 0.0, 0.1);
  c.rope_theta = t.real("rope_theta", 0.0, 1e12, c.arch == Arch::llama ? 10000.0 : 1000000.0);
  c.rope_traditional = t.boolean("rope_traditional", false);
  parse_rope_scaling(t, c);
  c.tie_word_embeddings = top.optional_bool("tie_word_embeddings");
  if (kind.nested && !c.tie_word_embeddings) c.tie_word_embeddings = t.optional_bool("tie_word_embeddings");
  c.query_pre_attn_scalar = double(c.head_dim);

  switch (c.arch) {
    case Arch::llama:
      // Mistral's sliding_window is ignored, as mlx-lm's llama model ignores it.
      c.attention_bias = c.attention_out_bias = t.boolean("attention_bias", false);
      c.mlp_bias = t.boolean("mlp_bias", false);
      break;
    case Arch::qwen2: c.attention_bias = true; break;
    case Arch::qwen3:
      c.qk_norm = true;
      c.attention_bias = c.attention_out_bias = t.boolean("attention_bias", false);
      break;
    case Arch::gemma3: parse_gemma3(t, c); break;
  }
  c.quantization = parse_quantization(top);
  return c;
}

}  // namespace exactq
