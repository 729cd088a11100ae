#include "exactq/inspect.h"

#include <map>

#include <fmt/format.h>

namespace exactq {

namespace {

// "model.layers.12.mlp.up_proj" -> "model.layers.*.mlp.up_proj".
std::string role_of(const std::string& path) {
  const auto at = path.find("layers.");
  if (at == std::string::npos) return path;
  const auto dot = path.find('.', at + 7);
  return path.substr(0, at + 7) + "*" + (dot == std::string::npos ? "" : path.substr(dot));
}

std::string storage_of(const LinearView& l) {
  if (l.quantized) return fmt::format("{}-bit g{} {}", l.q.bits, l.q.group, to_string(l.q.dtype));
  return fmt::format("dense {}", to_string(l.weight.dtype));
}

}  // namespace

CheckpointSummary summarize(const Checkpoint& c) {
  CheckpointSummary s;
  const ModelConfig& cfg = c.config();
  s.arch = std::string(to_string(cfg.arch));
  s.model_type = cfg.model_type;
  s.layers = cfg.num_layers;
  s.tied = c.tied();
  s.ignored_tensors = c.ignored_tensors();
  for (const auto& f : c.files()) s.file_bytes += f.bytes;

  std::map<std::string, std::size_t> index;
  auto add = [&](const std::string& path, std::int64_t n, std::int64_t k, const std::string& storage, std::int64_t params,
                 std::int64_t bytes) {
    const std::string role = role_of(path);
    auto [it, fresh] = index.emplace(role, s.groups.size());
    if (fresh) s.groups.push_back({role, 0, n, k, storage, 0, 0});
    ModuleGroup& g = s.groups[it->second];
    if (g.storage != storage) g.storage = "mixed";
    ++g.count;
    g.parameters += params;
    g.bytes += bytes;
    s.parameters += params;
    s.tensor_bytes += bytes;
  };
  auto add_linear = [&](const LinearView& l) {
    add(l.path, l.n, l.k, storage_of(l), l.n * l.k + (l.bias ? l.n : 0), l.bytes());
  };
  auto add_norm = [&](const DenseView& d) {
    const std::string path = d.name.substr(0, d.name.size() - 7);  // less ".weight"
    add(path, d.shape[0], 0, fmt::format("dense {}", to_string(d.dtype)), d.shape[0], std::int64_t(d.bytes.size()));
  };
  add_linear(c.embed_tokens());
  for (const auto& l : c.layers()) {
    add_norm(l.input_norm);
    for (const LinearView* p : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj}) add_linear(*p);
    if (l.q_norm) add_norm(*l.q_norm);
    if (l.k_norm) add_norm(*l.k_norm);
    add_norm(l.post_attention_norm);
    if (l.pre_feedforward_norm) add_norm(*l.pre_feedforward_norm);
    if (l.post_feedforward_norm) add_norm(*l.post_feedforward_norm);
    for (const LinearView* p : {&l.gate_proj, &l.up_proj, &l.down_proj}) add_linear(*p);
  }
  add_norm(c.final_norm());
  if (!c.tied()) add_linear(c.lm_head());

  // Everything once, except the untied embedding, of which the lookup reads one row.
  const LinearView& e = c.embed_tokens();
  s.decode_bytes_per_token = s.tensor_bytes;
  if (!c.tied()) s.decode_bytes_per_token -= e.bytes() - e.bytes() / e.n;
  return s;
}

}  // namespace exactq
