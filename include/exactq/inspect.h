// What a loaded checkpoint holds, in numbers: parameters, quantization per module, bytes on disk,
// and the bytes one decode step must read (the roofline figure benchmarks divide by).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exactq/model.h"

namespace exactq {

// One role of the model: a module path with the layer index replaced by '*' (e.g.
// "model.layers.*.mlp.down_proj"), and how the modules in that role are stored.
struct ModuleGroup {
  std::string role;
  std::int64_t count = 0;  // modules in the role
  std::int64_t n = 0, k = 0;
  std::string storage;  // "4-bit g64 bf16", "dense bf16", or "mixed" where they differ
  std::int64_t parameters = 0;
  std::int64_t bytes = 0;  // all modules of the role: packed codes, scales, biases (or dense weight), bias
};

struct CheckpointSummary {
  std::string arch;
  std::string model_type;
  std::int64_t layers = 0;
  std::int64_t parameters = 0;    // logical weights: n*k per linear/embedding, plus norms and biases
  std::uint64_t file_bytes = 0;   // the safetensors files on disk
  std::int64_t tensor_bytes = 0;  // the text model's tensors (ignored ones excluded)
  // The weights one decode step reads if every weight is read once per token: every linear layer,
  // every norm, the LM head, and of the embedding one row (the lookup) unless the head is the
  // embedding, whose whole matrix the head then reads.
  std::int64_t decode_bytes_per_token = 0;
  bool tied = false;
  std::vector<ModuleGroup> groups;  // in model order
  std::vector<std::string> ignored_tensors;
};

CheckpointSummary summarize(const Checkpoint& c);

}  // namespace exactq
