// convert: a Hugging Face checkpoint to MLX's quantized layout, quantizing what `mlx_lm.convert -q`
// quantizes (mlx_lm/utils.py quantize_model: every Linear and Embedding whose input size divides
// by the group; norms have no quantized form) and casting every other tensor to the model dtype.
// Like mlx-lm, the weights are cast to the model dtype first and quantized from those values.
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exactq/checkpoint_writer.h"
#include "exactq/model.h"
#include "model/random_weights.h"
#include "model/tensor_table.h"
#include "model/text.h"

namespace exactq {

namespace fs = std::filesystem;

namespace {

// The model dtype: config.json's torch_dtype where it names a float type, else that of the
// embedding as stored.
DType model_dtype(const nlohmann::json& config, const TensorRef& embedding, const std::string& file) {
  const nlohmann::json* where = config.contains("text_config") && config["text_config"].contains("torch_dtype")
                                    ? &config["text_config"]
                                    : &config;
  if (where->contains("torch_dtype") && (*where)["torch_dtype"].is_string()) {
    const std::string t = (*where)["torch_dtype"];
    if (t == "bfloat16") return DType::bf16;
    if (t == "float16") return DType::f16;
    if (t == "float32") return DType::f32;
    checkpoint_fail(file, fmt::format("torch_dtype '{}' is not bfloat16, float16 or float32", printable(t)));
  }
  DType t{};
  if (!to_dtype(embedding.info->dtype, t))
    checkpoint_fail(embedding.file->path(), fmt::format("tensor '{}' has dtype {}, expected BF16, F16 or F32",
                                                        embedding.info->name, to_string(embedding.info->dtype)));
  return t;
}

// The value of element i of a float tensor, widened to f32 and rounded to `to` (the cast).
float cast_value(const TensorRef& r, std::size_t i, DType to) {
  DType from{};
  to_dtype(r.info->dtype, from);
  const float v = load_f32(r.bytes().data(), i, from);
  std::byte b[4];
  store_f32(b, 0, to, v);
  return load_f32(b, 0, to);
}

TensorToWrite cast_tensor(const std::string& name, const TensorRef& r, DType to) {
  DType from{};
  if (!to_dtype(r.info->dtype, from))
    checkpoint_fail(r.file->path(), fmt::format("tensor '{}' has dtype {}, expected BF16, F16 or F32", printable(name),
                                                to_string(r.info->dtype)));
  const std::size_t count = std::size_t(r.info->elements());
  TensorToWrite t{name, to_st_dtype(to), r.info->shape, std::vector<std::byte>(count * dtype_size(to))};
  for (std::size_t i = 0; i < count; ++i) store_f32(t.data.data(), i, to, cast_value(r, i, to));
  return t;
}

}  // namespace

ConvertResult convert_hf(const std::string& hf_dir, const std::string& out, const ConvertOptions& o) {
  if (!is_supported_bits(o.bits)) throw std::invalid_argument(fmt::format("--bits {} is not 2, 3, 4, 5, 6 or 8", o.bits));
  if (!is_supported_group(o.group)) throw std::invalid_argument(fmt::format("--group {} is not 32, 64 or 128", o.group));
  const fs::path in(hf_dir), config_path = in / "config.json";
  const std::string config_text = read_text_file(config_path);
  const ModelConfig cfg = parse_model_config(config_text, config_path.string());
  if (cfg.quantization.base) checkpoint_fail(config_path.string(), "is already quantized (it has a quantization entry)");
  nlohmann::json config = nlohmann::json::parse(config_text);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_empty(out, ec)) throw std::invalid_argument(fmt::format("--out '{}' exists and is not empty", out));
  const TensorTable table = open_tensor_files(in);

  const std::string head = cfg.tensor_prefix + "lm_head.weight";
  // A tied model's stored head (some checkpoints keep one) is dropped, as mlx-lm's sanitize does.
  const bool tied = cfg.tie_word_embeddings ? *cfg.tie_word_embeddings : table.find(head) == nullptr;
  const auto modules = model_modules(cfg, !tied);
  const TensorRef* embedding = table.find(modules.front().path + ".weight");
  if (embedding == nullptr) checkpoint_fail(hf_dir, fmt::format("tensor '{}.weight' is missing", modules.front().path));
  const DType dtype = model_dtype(config, *embedding, config_path.string());

  ConvertResult result;
  std::vector<TensorToWrite> tensors;
  std::map<std::string, bool> used;
  std::int64_t parameters = 0;
  auto need = [&](const std::string& name, const std::vector<std::int64_t>& shape) -> const TensorRef& {
    const TensorRef* r = table.find(name);
    if (r == nullptr) checkpoint_fail(hf_dir, fmt::format("tensor '{}' is missing", printable(name)));
    if (r->info->shape != shape)
      checkpoint_fail(r->file->path(), fmt::format("tensor '{}' has shape [{}], expected [{}]", printable(name),
                                                   fmt::join(r->info->shape, ", "), fmt::join(shape, ", ")));
    used[name] = true;
    return *r;
  };
  for (const ModuleSpec& m : modules) {
    if (m.kind == ModuleKind::norm) {
      const std::string name = m.path + ".weight";
      tensors.push_back(cast_tensor(name, need(name, {m.n}), dtype));
      ++result.unquantized_tensors;
      parameters += m.n;
      continue;
    }
    const std::string name = m.path + ".weight";
    const TensorRef& w = need(name, {m.n, m.k});
    parameters += m.n * m.k;
    if (m.k % o.group == 0) {
      DType from{};
      if (!to_dtype(w.info->dtype, from))
        checkpoint_fail(w.file->path(), fmt::format("tensor '{}' has dtype {}, expected BF16, F16 or F32", printable(name),
                                                    to_string(w.info->dtype)));
      auto row = [&](std::int64_t r, float* values) {
        for (std::int64_t c = 0; c < m.k; ++c) values[c] = cast_value(w, std::size_t(r * m.k + c), dtype);
      };
      for (auto& t : quantized_tensors(m.path, m.n, m.k, o.bits, o.group, dtype, o.threads, row)) tensors.push_back(std::move(t));
      ++result.quantized_modules;
    } else {
      tensors.push_back(cast_tensor(name, w, dtype));
      ++result.unquantized_tensors;
    }
    if (m.has_bias) {
      const std::string bias = m.path + ".bias";
      tensors.push_back(cast_tensor(bias, need(bias, {m.n}), dtype));
      ++result.unquantized_tensors;
      parameters += m.n;
    }
  }
  for (const auto& [name, ref] : table.tensors) {
    if (used.count(name)) continue;
    const bool dropped = name.ends_with(".rotary_emb.inv_freq") || (tied && name == head) ||
                         (!cfg.tensor_prefix.empty() && (name.starts_with("vision_tower.") || name.starts_with("multi_modal_projector.")));
    if (!dropped)
      checkpoint_fail(ref.file->path(), fmt::format("tensor '{}' is not part of a {} model as config.json describes it",
                                                    printable(name), to_string(cfg.arch)));
  }

  const nlohmann::json quant = {{"group_size", o.group}, {"bits", o.bits}, {"mode", "affine"}};
  config["quantization"] = quant;
  config["quantization_config"] = quant;
  fs::create_directories(out, ec);
  if (ec) throw std::invalid_argument(fmt::format("--out '{}' cannot be created: {}", out, ec.message()));
  result.files = write_mlx_checkpoint(out, tensors, config.dump(4), o.max_shard_bytes, parameters);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                        "tokenizer.model", "chat_template.jinja", "chat_template.json"})
    if (fs::exists(in / f, ec)) fs::copy_file(in / f, fs::path(out) / f, fs::copy_options::overwrite_existing);
  return result;
}

}  // namespace exactq
