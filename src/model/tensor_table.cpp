#include "model/tensor_table.h"

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "model/text.h"

namespace exactq {

namespace fs = std::filesystem;

std::string read_text_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) checkpoint_fail(path.string(), "is missing");
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  if (!f) checkpoint_fail(path.string(), "cannot be read");
  return s.str();
}

namespace {

// A shard name must be a plain file name in the model directory: an index is data, and must not
// make the loader open files elsewhere.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

void add_file(TensorTable& t, const fs::path& path) {
  auto f = std::make_shared<SafetensorsFile>(path.string());
  t.file_infos.push_back({path.string(), f->file_bytes(), f->header().tensors.size()});
  t.files.push_back(std::move(f));
}

}  // namespace

TensorTable open_tensor_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) checkpoint_fail(dir.string(), "is not a directory");
  TensorTable t;
  const fs::path index_path = dir / "model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  const bool indexed = fs::exists(index_path, ec);
  if (indexed) {
    const std::string file = index_path.string();
    nlohmann::json index;
    try {
      index = parse_json_strict(read_text_file(index_path), 8);
    } catch (const JsonRefused& e) {
      checkpoint_fail(file, e.what());
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      checkpoint_fail(file, "has no weight_map object");
    std::set<std::string> shards;
    for (const auto& [name, shard] : index["weight_map"].items()) {
      if (!shard.is_string() || !plain_file_name(shard.get<std::string>()))
        checkpoint_fail(file, fmt::format("weight_map['{}']: {} is not a file name in the model directory", printable(name),
                                          printable(shard.dump(), 80)));
      weight_map[name] = shard.get<std::string>();
      shards.insert(shard.get<std::string>());
    }
    if (shards.empty()) checkpoint_fail(file, "weight_map is empty");
    for (const auto& shard : shards) {
      if (!fs::is_regular_file(dir / shard, ec)) {
        const auto named = std::find_if(weight_map.begin(), weight_map.end(), [&](const auto& e) { return e.second == shard; });
        checkpoint_fail(file, fmt::format("shard '{}' (holding '{}') is missing from {}", printable(shard),
                                          printable(named->first), dir.string()));
      }
      add_file(t, dir / shard);
    }
  } else {
    if (!fs::is_regular_file(dir / "model.safetensors", ec)) {
      for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.path().extension() == ".safetensors")
          checkpoint_fail(index_path.string(), fmt::format("is missing, but shard '{}' is there (shards need the index)",
                                                           printable(entry.path().filename().string())));
      checkpoint_fail((dir / "model.safetensors").string(), "is missing (and there is no model.safetensors.index.json)");
    }
    add_file(t, dir / "model.safetensors");
  }

  for (const auto& f : t.files) {
    const std::string shard = fs::path(f->path()).filename().string();
    for (const auto& info : f->header().tensors) {
      const auto [it, fresh] = t.tensors.emplace(info.name, TensorRef{f.get(), &info});
      if (!fresh)
        checkpoint_fail(f->path(), fmt::format("tensor '{}' is also in {}", printable(info.name), it->second.file->path()));
      if (indexed) {
        const auto mapped = weight_map.find(info.name);
        if (mapped == weight_map.end())
          checkpoint_fail(f->path(), fmt::format("tensor '{}' is not in the index's weight_map", printable(info.name)));
        if (mapped->second != shard)
          checkpoint_fail(f->path(), fmt::format("tensor '{}' is here, but the index maps it to '{}'", printable(info.name),
                                                 printable(mapped->second)));
      }
    }
  }
  for (const auto& [name, shard] : weight_map)
    if (!t.tensors.count(name))
      checkpoint_fail((dir / shard).string(), fmt::format("does not hold tensor '{}' that the index maps to it", printable(name)));
  return t;
}

}  // namespace exactq
