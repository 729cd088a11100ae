// The shard writer and tokenizer.json, shared by make-model and convert.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exactq/checkpoint_writer.h"

namespace exactq {

std::vector<std::string> write_mlx_checkpoint(const std::string& dir, std::vector<TensorToWrite>& tensors,
                                              const std::string& config_json, std::uint64_t max_shard_bytes,
                                              std::int64_t total_parameters) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  // mlx-lm's make_shards: a new shard starts where the next tensor would pass the limit.
  std::vector<std::vector<const TensorToWrite*>> shards(1);
  std::uint64_t in_shard = 0, total = 0;
  for (const auto& t : tensors) {
    if (in_shard + t.data.size() > max_shard_bytes && !shards.back().empty()) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += t.data.size();
    total += t.data.size();
  }
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}, {"total_parameters", total_parameters}};
  nlohmann::json weight_map = nlohmann::json::object();  // sorted by name, as mlx-lm sorts it
  std::vector<std::string> files;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shards.size() == 1 ? "model.safetensors"
                                                : fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    write_safetensors((std::filesystem::path(dir) / name).string(), shards[i], {{"format", "mlx"}});
    for (const auto* t : shards[i]) weight_map[t->name] = name;
    files.push_back(name);
  }
  index["weight_map"] = weight_map;
  write_file((std::filesystem::path(dir) / "model.safetensors.index.json").string(), index.dump(4));
  write_file((std::filesystem::path(dir) / "config.json").string(), config_json);
  return files;
}

namespace {

// GPT-2's byte-level alphabet: every byte is a printable code point (the printable bytes are
// themselves, the others move to U+0100 and up), so no token string holds a space or a control.
std::string byte_symbol(int b) {
  const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  int code = b;
  if (!printable) {
    int shifted = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff))) ++shifted;
    code = 256 + shifted;
  }
  std::string s;  // UTF-8 of code (< 0x800)
  if (code < 0x80) s += char(code);
  else {
    s += char(0xc0 | (code >> 6));
    s += char(0x80 | (code & 0x3f));
  }
  return s;
}

}  // namespace

std::string tokenizer_json(std::int64_t vocab_size, const std::vector<std::string>& specials) {
  const std::int64_t plain = vocab_size - std::int64_t(specials.size());
  constexpr std::int64_t kMax = 256 + 256 * 256 + 256 * 256 * 256;
  if (plain < 256 || plain > kMax)
    throw std::invalid_argument(fmt::format("tokenizer: vocabulary of {} with {} special tokens is outside [256, {}] plain tokens",
                                            vocab_size, specials.size(), kMax));
  std::vector<std::string> sym(256);
  for (int b = 0; b < 256; ++b) sym[std::size_t(b)] = byte_symbol(b);
  // The vocabulary and merges are written as text in id order: a JSON library's ordered object
  // inserts in linear time, quadratic over a 262k-token vocabulary.
  std::string vocab = "{", merges = "[";
  std::int64_t id = 0;
  auto add_token = [&](const std::string& token) {
    vocab += (id ? ",\n      " : "\n      ") + nlohmann::json(token).dump() + ": " + std::to_string(id);
    ++id;
  };
  auto add_merge = [&](const std::string& a, const std::string& b) {
    merges += (merges.size() > 1 ? ",\n      " : "\n      ") + nlohmann::json(a + " " + b).dump();
    add_token(a + b);
  };
  for (int b = 0; b < 256; ++b) add_token(sym[std::size_t(b)]);
  // Merges in rank order: every byte pair (a, b) first, then (ab, c); each adds the token ab or
  // abc, all distinct, and each merge's parts exist before it.
  for (int a = 0; a < 256 && id < plain; ++a)
    for (int b = 0; b < 256 && id < plain; ++b) add_merge(sym[std::size_t(a)], sym[std::size_t(b)]);
  for (int a = 0; a < 256 && id < plain; ++a)
    for (int b = 0; b < 256 && id < plain; ++b)
      for (int c = 0; c < 256 && id < plain; ++c) add_merge(sym[std::size_t(a)] + sym[std::size_t(b)], sym[std::size_t(c)]);
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (const auto& special : specials) {
    added.push_back({{"id", id}, {"content", special}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
    add_token(special);
  }
  vocab += "\n    }";
  merges += "\n    ]";
  nlohmann::ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  nlohmann::ordered_json t;
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["added_tokens"] = added;
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = byte_level;
  t["post_processor"] = byte_level;
  t["decoder"] = byte_level;
  t["model"] = {{"type", "BPE"},         {"dropout", nullptr},       {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                {"byte_fallback", false}, {"ignore_merges", false}, {"vocab", "@VOCAB@"}, {"merges", "@MERGES@"}};
  std::string text = t.dump(2);
  text.replace(text.find("\"@VOCAB@\""), 9, vocab);
  text.replace(text.find("\"@MERGES@\""), 10, merges);
  return text;
}

}  // namespace exactq
