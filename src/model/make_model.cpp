// make-model: a random checkpoint in the mlx-community layout.
//
// Initial statistics, chosen so that activations and logits stay in the ranges of a trained model:
// * linear layers and the embedding: normal, std 0.02 (the initializer_range these families'
//   configs state). A row of K such weights against an RMS-normalised input gives outputs of std
//   0.02 * sqrt(K): about 1.3 at K = 4096, as trained projections give.
// * o_proj and down_proj (the writes into the residual stream): std 0.02 / sqrt(2 * layers), as
//   GPT-2 and its successors scale them, so the residual stream does not grow with depth.
// * norms: the effective scale near 1: weight 1 + N(0, 0.02) for llama and qwen3, and
//   N(0, 0.02) for gemma3, whose RMSNorm multiplies by (1 + weight).
// The normal variates are sums of six uniforms (Irwin-Hall, scaled to unit variance): integer
// arithmetic and one exact scaling, so the same seed gives the same bytes on any machine and
// libm. Each row draws from its own counter-based stream, so neither the order of the tensors
// nor the thread count changes a byte.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exactq/checkpoint_writer.h"
#include "exactq/model.h"
#include "exactq/quantize.h"
#include "model/random_weights.h"

namespace exactq {

namespace {

struct Shape {
  std::string name;
  std::int64_t hidden, inter, layers, heads, kv, head_dim, vocab;
};

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all = {
      {"tiny", 256, 512, 2, 4, 2, 64, 1024},
      {"small", 1024, 2816, 8, 16, 4, 64, 32000},
      {"llama3-8b", 4096, 14336, 32, 32, 8, 128, 128256},   // Meta-Llama-3-8B
      {"qwen3-8b", 4096, 12288, 36, 32, 8, 128, 151936},    // Qwen3-8B
      {"gemma3-12b", 3840, 15360, 48, 16, 8, 256, 262208},  // gemma-3-12b (text model)
  };
  return all;
}

const Shape& shape_of(const std::string& name) {
  for (const auto& s : shapes())
    if (s.name == name) return s;
  throw std::invalid_argument(fmt::format("--shape '{}' is not a shape (tiny, small, llama3-8b, qwen3-8b, gemma3-12b)", name));
}

std::vector<std::string> specials_of(const std::string& arch) {
  if (arch == "llama") return {"<|begin_of_text|>", "<|end_of_text|>"};
  if (arch == "qwen3") return {"<|im_start|>", "<|endoftext|>"};
  return {"<bos>", "<eos>"};
}

std::string torch_dtype(DType t) { return t == DType::f32 ? "float32" : t == DType::f16 ? "float16" : "bfloat16"; }

}  // namespace

const std::vector<std::string>& make_model_arches() {
  static const std::vector<std::string> a = {"llama", "qwen3", "gemma3"};
  return a;
}
const std::vector<std::string>& make_model_shapes() {
  static const std::vector<std::string> s = [] {
    std::vector<std::string> v;
    for (const auto& x : shapes()) v.push_back(x.name);
    return v;
  }();
  return s;
}

std::string make_model_config(const MakeModelOptions& o) {
  const Shape& s = shape_of(o.shape);
  if (o.arch != "llama" && o.arch != "qwen3" && o.arch != "gemma3")
    throw std::invalid_argument(fmt::format("--arch '{}' is not an architecture (llama, qwen3, gemma3)", o.arch));
  if (!is_supported_bits(o.bits)) throw std::invalid_argument(fmt::format("--bits {} is not 2, 3, 4, 5, 6 or 8", o.bits));
  if (!is_supported_group(o.group)) throw std::invalid_argument(fmt::format("--group {} is not 32, 64 or 128", o.group));
  const nlohmann::json quant = {{"group_size", o.group}, {"bits", o.bits}};
  const std::int64_t bos = s.vocab - 2, eos = s.vocab - 1;
  nlohmann::json text = {{"hidden_size", s.hidden},
                         {"intermediate_size", s.inter},
                         {"num_hidden_layers", s.layers},
                         {"num_attention_heads", s.heads},
                         {"num_key_value_heads", s.kv},
                         {"head_dim", s.head_dim},
                         {"vocab_size", s.vocab},
                         {"initializer_range", 0.02}};
  nlohmann::json c;
  if (o.arch == "gemma3") {
    text.update({{"model_type", "gemma3_text"}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
                 {"rope_local_base_freq", 10000.0}, {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}},
                 {"sliding_window", 1024}, {"sliding_window_pattern", 6}, {"query_pre_attn_scalar", s.head_dim},
                 {"hidden_activation", "gelu_pytorch_tanh"}, {"max_position_embeddings", 131072}});
    c = {{"architectures", {"Gemma3ForConditionalGeneration"}}, {"model_type", "gemma3"}, {"text_config", text},
         {"vocab_size", s.vocab}, {"eos_token_id", eos}, {"bos_token_id", bos}};
  } else {
    const bool llama = o.arch == "llama";
    c = text;
    c.update({{"architectures", {llama ? "LlamaForCausalLM" : "Qwen3ForCausalLM"}}, {"model_type", o.arch},
              {"attention_bias", false}, {"hidden_act", "silu"}, {"rms_norm_eps", llama ? 1e-5 : 1e-6},
              {"rope_theta", llama ? 500000.0 : 1000000.0}, {"rope_scaling", nullptr},
              {"max_position_embeddings", llama ? 8192 : 40960}, {"tie_word_embeddings", false},
              {"bos_token_id", bos}, {"eos_token_id", eos}});
    if (llama) c["mlp_bias"] = false;
  }
  c["torch_dtype"] = torch_dtype(o.dtype);
  c["quantization"] = quant;
  c["quantization_config"] = quant;
  return c.dump(4);  // keys sorted, indented by 4, as mlx-lm's save_config writes
}

std::vector<PlannedTensor> make_model_plan(const MakeModelOptions& o) {
  const ModelConfig cfg = parse_model_config(make_model_config(o), "make-model config.json");
  const StDType t = to_st_dtype(o.dtype);
  std::vector<PlannedTensor> plan;
  for (const ModuleSpec& m : model_modules(cfg, cfg.arch != Arch::gemma3)) {
    if (m.kind == ModuleKind::norm) {
      plan.push_back({m.path + ".weight", t, {m.n}});
      continue;
    }
    if (m.k % o.group == 0) {
      plan.push_back({m.path + ".weight", StDType::U32, {m.n, m.k * o.bits / 32}});
      plan.push_back({m.path + ".scales", t, {m.n, m.k / o.group}});
      plan.push_back({m.path + ".biases", t, {m.n, m.k / o.group}});
    } else {
      plan.push_back({m.path + ".weight", t, {m.n, m.k}});
    }
    if (m.has_bias) plan.push_back({m.path + ".bias", t, {m.n}});
  }
  std::sort(plan.begin(), plan.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return plan;
}

MakeModelResult make_model(const MakeModelOptions& o, const std::string& dir) {
  const std::string config_text = make_model_config(o);
  const ModelConfig cfg = parse_model_config(config_text, "make-model config.json");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    throw std::invalid_argument(fmt::format("--out '{}' exists and is not empty", dir));
  fs::create_directories(dir, ec);
  if (ec) throw std::invalid_argument(fmt::format("--out '{}' cannot be created: {}", dir, ec.message()));

  const bool gemma = cfg.arch == Arch::gemma3;
  const bool tied = gemma;  // Gemma 3 ties its head to the embedding; the 8B llama and qwen3 do not
  const double residual_std = 0.02 / std::sqrt(2.0 * double(cfg.num_layers));
  std::vector<TensorToWrite> tensors;
  std::int64_t parameters = 0;
  for (const ModuleSpec& m : model_modules(cfg, !tied)) {
    const bool writes_residual = m.path.ends_with("o_proj") || m.path.ends_with("down_proj");
    RandomSpec r;
    r.seed = o.seed;
    r.threads = o.threads;
    r.dtype = o.dtype;
    if (m.kind == ModuleKind::norm) {
      r.name = m.path + ".weight";
      r.mean = gemma ? 0.0 : 1.0;
      r.std = 0.02;
      tensors.push_back(random_dense(r, {m.n}));
      parameters += m.n;
      continue;
    }
    r.name = m.path;
    r.std = writes_residual ? residual_std : 0.02;
    const bool quantize_it = m.k % o.group == 0;  // as MLX leaves a K the group does not divide
    for (auto& t : random_linear(r, m.n, m.k, quantize_it ? o.bits : 0, o.group)) tensors.push_back(std::move(t));
    parameters += m.n * m.k;
    if (m.has_bias) {
      r.name = m.path + ".bias";
      r.mean = 0.0;
      tensors.push_back(random_dense(r, {m.n}));
      parameters += m.n;
    }
  }
  MakeModelResult result;
  result.parameters = parameters;
  result.files = write_mlx_checkpoint(dir, tensors, config_text, o.max_shard_bytes, parameters);
  const auto specials = specials_of(o.arch);
  write_file((fs::path(dir) / "tokenizer.json").string(), tokenizer_json(cfg.vocab_size, specials));
  const nlohmann::json tok_config = {{"bos_token", specials[0]},
                                     {"eos_token", specials[1]},
                                     {"tokenizer_class", "PreTrainedTokenizerFast"},
                                     {"model_max_length", cfg.max_position_embeddings}};
  write_file((fs::path(dir) / "tokenizer_config.json").string(), tok_config.dump(2));
  for (const auto& f : result.files) result.bytes += fs::file_size(fs::path(dir) / f);
  return result;
}

}  // namespace exactq
