// The tensors of a model directory: model.safetensors, or the shards that
// model.safetensors.index.json's weight_map names, each memory-mapped and checked.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exactq/model.h"
#include "exactq/safetensors.h"

namespace exactq {

struct TensorRef {
  const SafetensorsFile* file = nullptr;
  const TensorInfo* info = nullptr;
  std::span<const std::byte> bytes() const { return file->data(*info); }
};

struct TensorTable {
  std::vector<std::shared_ptr<SafetensorsFile>> files;
  std::vector<CheckpointFile> file_infos;
  std::map<std::string, TensorRef> tensors;
  const TensorRef* find(const std::string& name) const {
    const auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  }
};

// Throws CheckpointError naming the file, tensor and value: an index that is not
// {"weight_map": {tensor: file}} or names a path outside `dir`, a shard it names that is missing
// or does not hold a tensor mapped to it, a tensor in two shards or in a shard the index does not
// map it to, shard files without an index, or no weights at all.
TensorTable open_tensor_files(const std::filesystem::path& dir);

// The text of a file; throws CheckpointError naming it when it cannot be read.
std::string read_text_file(const std::filesystem::path& path);

}  // namespace exactq
