// Writing checkpoints in the mlx-community layout: random models for tests and benchmarks
// (make_model), Hugging Face checkpoints quantized as `mlx_lm.convert -q` does (convert_hf),
// and the pieces both share (the shard writer, a minimal tokenizer.json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exactq/dtype.h"
#include "exactq/safetensors.h"

namespace exactq {

// mlx-lm's shard limit (MAX_FILE_SIZE_GB = 5, in GiB): a shard is closed before the tensor that
// would take it past this many bytes.
inline constexpr std::uint64_t kMlxShardBytes = std::uint64_t(5) << 30;

// Writes the tensors (sorted by name) into model.safetensors, or model-0000i-of-0000n.safetensors
// shards of at most max_shard_bytes of tensor data each, every file with the metadata
// {"format": "mlx"}; then model.safetensors.index.json ({"metadata": {"total_size",
// "total_parameters"}, "weight_map"}, as mlx-lm writes it even for one file), and config.json
// with `config_json` as given. Returns the shard file names.
std::vector<std::string> write_mlx_checkpoint(const std::string& dir, std::vector<TensorToWrite>& tensors,
                                              const std::string& config_json, std::uint64_t max_shard_bytes,
                                              std::int64_t total_parameters);

// A valid Hugging Face tokenizer.json of exactly vocab_size tokens: byte-level BPE over the 256
// bytes, merges of byte pairs (then of pairs with a third byte) up to the vocabulary, and the
// special tokens given, which take the last ids.
std::string tokenizer_json(std::int64_t vocab_size, const std::vector<std::string>& specials);

// ---- make-model ------------------------------------------------------------------------------

struct MakeModelOptions {
  std::string arch = "llama";  // llama, qwen3 or gemma3
  std::string shape = "tiny";  // tiny, small, llama3-8b, qwen3-8b, gemma3-12b
  int bits = 4;
  int group = 64;
  DType dtype = DType::bf16;
  std::uint64_t seed = 0;
  std::uint64_t max_shard_bytes = kMlxShardBytes;
  int threads = 0;  // 0: all hardware threads (no byte depends on it)
};

const std::vector<std::string>& make_model_arches();
const std::vector<std::string>& make_model_shapes();

// The config.json text make_model writes for these options (validated by parse_model_config).
// Throws std::invalid_argument naming an unknown arch or shape or an unsupported bits/group.
std::string make_model_config(const MakeModelOptions& o);

// The tensors make_model writes for these options (name, dtype, shape), sorted by name, without
// generating any: what the published-layout tests compare with the 8B/12B repositories.
struct PlannedTensor {
  std::string name;
  StDType dtype = StDType::U32;
  std::vector<std::int64_t> shape;
};
std::vector<PlannedTensor> make_model_plan(const MakeModelOptions& o);

struct MakeModelResult {
  std::vector<std::string> files;
  std::int64_t parameters = 0;
  std::uint64_t bytes = 0;
};

// Writes a random checkpoint to `dir` (created; must be empty or absent). The same options give
// the same bytes, whatever the thread count. Throws std::invalid_argument on bad options.
MakeModelResult make_model(const MakeModelOptions& o, const std::string& dir);

// ---- convert ---------------------------------------------------------------------------------

struct ConvertOptions {
  int bits = 4;
  int group = 64;
  std::uint64_t max_shard_bytes = kMlxShardBytes;
  int threads = 0;
};

struct ConvertResult {
  std::vector<std::string> files;
  std::int64_t quantized_modules = 0;
  std::int64_t unquantized_tensors = 0;
};

// Converts a Hugging Face checkpoint directory (config.json, model.safetensors or an index and
// shards, bf16/f16/f32, an architecture parse_model_config knows) to MLX's quantized layout in
// `out`: every linear layer and the embedding whose input size divides by the group are quantized
// with exactactq's MLX-rule quantizer, as mlx_lm.convert -q does; norms, biases and the rest stay
// in the model dtype. Tokenizer files are copied. Throws CheckpointError on a malformed input and
// std::invalid_argument on bad options.
ConvertResult convert_hf(const std::string& hf_dir, const std::string& out, const ConvertOptions& o);

}  // namespace exactq
