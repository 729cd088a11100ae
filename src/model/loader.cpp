// The loader: every tensor the config needs, checked for name, dtype and shape, resolved into
// views. A module is quantized as MLX decides it (mlx_lm/utils.py load_model): by its entry in
// the config's quantization where it has one, else by whether "<path>.scales" is present.
#include <set>

#include <fmt/format.h>

#include "exactq/model.h"
#include "model/tensor_table.h"
#include "model/text.h"

namespace exactq {

namespace fs = std::filesystem;

std::int64_t LinearView::bytes() const {
  std::int64_t b = quantized ? q.weight_bytes() : std::int64_t(weight.bytes.size());
  if (bias) b += std::int64_t(bias->bytes.size());
  return b;
}

std::vector<const LinearView*> Checkpoint::linears() const {
  std::vector<const LinearView*> out{&embed_};
  for (const auto& l : layers_)
    for (const LinearView* p : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      out.push_back(p);
  if (!tied_) out.push_back(&lm_head_);
  return out;
}

class CheckpointLoader {
 public:
  CheckpointLoader(const fs::path& dir, const LoadOptions& options) : dir_(dir), options_(options) {}

  Checkpoint load() {
    const fs::path config_path = dir_ / "config.json";
    c_.config_ = parse_model_config(read_text_file(config_path), config_path.string());
    table_ = open_tensor_files(dir_);
    const ModelConfig& cfg = c_.config_;
    const std::string head = cfg.tensor_prefix + "lm_head.weight";
    const bool has_head = table_.find(head) != nullptr;
    if (cfg.tie_word_embeddings.value_or(false) && has_head)
      fail(head, fmt::format("is present although config.json says tie_word_embeddings = true"));
    c_.tied_ = cfg.tie_word_embeddings ? *cfg.tie_word_embeddings : !has_head;

    std::size_t at = 0;
    const auto modules = model_modules(cfg, !c_.tied_);
    auto next_linear = [&] { return linear(modules[at++]); };
    auto next_norm = [&] { return norm(modules[at++]); };
    c_.embed_ = next_linear();
    c_.layers_.resize(std::size_t(cfg.num_layers));
    for (auto& l : c_.layers_) {
      l.input_norm = next_norm();
      l.q_proj = next_linear();
      l.k_proj = next_linear();
      l.v_proj = next_linear();
      l.o_proj = next_linear();
      if (cfg.qk_norm) {
        l.q_norm = next_norm();
        l.k_norm = next_norm();
      }
      l.post_attention_norm = next_norm();
      if (cfg.sandwich_norm) {
        l.pre_feedforward_norm = next_norm();
        l.post_feedforward_norm = next_norm();
      }
      l.gate_proj = next_linear();
      l.up_proj = next_linear();
      l.down_proj = next_linear();
    }
    c_.final_norm_ = next_norm();
    if (!c_.tied_) c_.lm_head_ = next_linear();
    sort_out_the_rest();
    c_.files_ = table_.file_infos;
    c_.mapped_ = std::move(table_.files);
    return std::move(c_);
  }

 private:
  [[noreturn]] void fail(const std::string& tensor, const std::string& what) const {
    const TensorRef* r = table_.find(tensor);
    checkpoint_fail(r ? r->file->path() : dir_.string(), fmt::format("tensor '{}' {}", printable(tensor), what));
  }

  const TensorRef& need(const std::string& name, const std::string& why) {
    const TensorRef* r = table_.find(name);
    if (r == nullptr) fail(name, "is missing (" + why + ")");
    used_.insert(name);
    return *r;
  }

  static std::string shape_text(const std::vector<std::int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

  void expect_shape(const std::string& name, const TensorRef& r, const std::vector<std::int64_t>& shape, const std::string& why) {
    if (r.info->shape != shape)
      fail(name, fmt::format("has shape {}, expected {} ({})", shape_text(r.info->shape), shape_text(shape), why));
  }

  // A float tensor in the checkpoint's one dtype (set by the first float tensor seen).
  DenseView dense(const std::string& name, const TensorRef& r) {
    DType t{};
    if (!to_dtype(r.info->dtype, t)) fail(name, fmt::format("has dtype {}, expected BF16, F16 or F32", to_string(r.info->dtype)));
    if (!dtype_from_) {
      c_.dtype_ = t;
      dtype_from_ = name;
    } else if (t != c_.dtype_) {
      fail(name, fmt::format("has dtype {}, but the checkpoint's dtype is {} (from '{}')", to_string(r.info->dtype),
                             to_string(to_st_dtype(c_.dtype_)), printable(*dtype_from_)));
    }
    return DenseView{name, t, r.info->shape, r.bytes()};
  }

  DenseView norm(const ModuleSpec& m) {
    const std::string name = m.path + ".weight";
    const TensorRef& r = need(name, "a norm of the model");
    expect_shape(name, r, {m.n}, "the norm's width");
    return dense(name, r);
  }

  QuantSpec spec_for(const ModuleSpec& m) {
    const QuantizationConfig& q = c_.config_.quantization;
    if (const QuantSpec* o = q.override_for(m.path)) return *o;
    if (table_.find(m.path + ".scales") == nullptr) return QuantSpec{};
    if (!q.base) fail(m.path + ".scales", "is present but config.json has no quantization entry");
    return *q.base;
  }

  LinearView linear(const ModuleSpec& m) {
    LinearView v;
    v.path = m.path;
    v.n = m.n;
    v.k = m.k;
    const std::string w = m.path + ".weight", s = m.path + ".scales", b = m.path + ".biases";
    const QuantSpec spec = spec_for(m);
    const TensorRef& wr = need(w, m.kind == ModuleKind::embedding ? "the token embedding" : "a linear layer of the model");
    if (spec.quantized) {
      v.quantized = true;
      if (wr.info->dtype != StDType::U32)
        fail(w, fmt::format("has dtype {}, but the module is quantized ({}-bit, group {}): expected U32", to_string(wr.info->dtype),
                            spec.bits, spec.group));
      if (m.k % spec.group != 0)
        fail(w, fmt::format("is quantized with group {}, which does not divide its input size {}", spec.group, m.k));
      expect_shape(w, wr, {m.n, m.k * spec.bits / 32}, fmt::format("[{}, {}] packed at {} bits", m.n, m.k, spec.bits));
      const TensorRef& sr = need(s, "a quantized module's scales");
      const TensorRef& br = need(b, "a quantized module's biases");
      const std::vector<std::int64_t> groups{m.n, m.k / spec.group};
      expect_shape(s, sr, groups, fmt::format("one per group of {}", spec.group));
      expect_shape(b, br, groups, fmt::format("one per group of {}", spec.group));
      const DenseView scales = dense(s, sr), biases = dense(b, br);
      const auto packed = wr.bytes();
      v.q = QuantizedMatrixView{{reinterpret_cast<const std::uint8_t*>(packed.data()), packed.size()},
                                scales.bytes, biases.bytes, m.n, m.k, spec.bits, spec.group, scales.dtype, WeightLayout::mlx};
      v.q.validate();
    } else {
      if (wr.info->dtype == StDType::U32)
        fail(w, table_.find(s) ? "is U32 but config.json says the module is not quantized"
                               : "is U32 (quantized) but its .scales and .biases are missing");
      if (table_.find(s) || table_.find(b))
        fail(s, "is present but config.json's quantization entry for the module says false");
      expect_shape(w, wr, {m.n, m.k}, "an unquantized [out, in] weight");
      v.weight = dense(w, wr);
    }
    if (m.has_bias) {
      const std::string bias = m.path + ".bias";
      const TensorRef& r = need(bias, "the layer's bias");
      expect_shape(bias, r, {m.n}, "one per output");
      v.bias = dense(bias, r);
    }
    return v;
  }

  // Tensors outside the text model that mlx-lm drops (its sanitize steps) are listed as ignored;
  // anything else is unknown.
  void sort_out_the_rest() {
    const ModelConfig& cfg = c_.config_;
    std::vector<std::string> unknown;
    for (const auto& [name, ref] : table_.tensors) {
      if (used_.count(name)) continue;
      const bool vision = !cfg.tensor_prefix.empty() && (name.starts_with("vision_tower.") || name.starts_with("multi_modal_projector."));
      const bool rotary = name.ends_with(".rotary_emb.inv_freq");
      (vision || rotary ? c_.ignored_ : unknown).push_back(name);
    }
    if (!unknown.empty() && options_.strict) {
      std::string list;
      for (std::size_t i = 0; i < std::min<std::size_t>(unknown.size(), 5); ++i) list += (i ? ", '" : "'") + printable(unknown[i]) + "'";
      fail(unknown.front(), fmt::format("is not part of a {} model as config.json describes it ({} unknown tensor(s): {}{})",
                                        to_string(cfg.arch), unknown.size(), list, unknown.size() > 5 ? ", ..." : ""));
    }
    c_.unknown_ = std::move(unknown);
  }

  fs::path dir_;
  LoadOptions options_;
  Checkpoint c_;
  TensorTable table_;
  std::set<std::string> used_;
  std::optional<std::string> dtype_from_;
};

Checkpoint Checkpoint::open(const std::string& dir, const LoadOptions& options) {
  return CheckpointLoader(dir, options).load();
}

}  // namespace exactq
