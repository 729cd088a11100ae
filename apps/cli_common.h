// Shared pieces of the exactq CLI: option parsing and checks, shape presets, byte comparison, output files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "exactq/backend.h"
#include "exactq/qmv.h"
#include "exactq/quantize.h"

namespace exactq::cli {

// Exit codes: 0 success, 1 a property failed, 2 bad arguments, 3 inconclusive (the negative
// control did not fire, so the run proved nothing).
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInconclusive = 3;

// Integer options read in base 10 only: CLI11 reads a leading 0 as octal and 0x as hex, so
// `--n 010` would run N = 8. `cmd->add_option(...)->transform(decimal_integer())` rejects anything
// but an optional sign and digits (leading zeros are dropped, not read as octal) and values outside
// int64, naming the text given.
CLI::Validator decimal_integer();
// --threads: 0 (all hardware threads) to kMaxThreads; throws std::invalid_argument otherwise.
void check_threads(int threads);
// Throws std::invalid_argument naming `option` and `path` where a result file could not be written
// there (its folder missing or read-only, or the file read-only), so a long run does not fail at
// its end. Creates nothing.
void check_writable(const std::string& path, std::string_view option);
// Throws std::invalid_argument, naming the sizes, where a random problem of N x K with M vectors
// would need more host memory than this machine has (the float weights before quantization, the
// packed matrix, the activations and a few output blocks), instead of failing in an allocation.
void check_host_memory(std::int64_t n, std::int64_t k, std::int64_t m, std::string_view what);

// "fragments" or "mlx" (--mma-layout); throws std::invalid_argument otherwise.
WeightLayout parse_mma_layout(std::string_view text);

struct Shape {
  std::string name;  // e.g. "gemma.q" or "4096x4096"
  std::int64_t n = 0;
  std::int64_t k = 0;
};
// The one definition of the shape presets (see `exactq bench --help`).
struct Preset {
  std::string name;
  std::string description;
  std::vector<Shape> shapes;
};
const std::vector<Preset>& presets();
// "PRESET" or "NxK" items separated by commas. Throws std::invalid_argument on a bad item.
std::vector<Shape> parse_shapes(std::string_view text);
// "1-16", "1,2,4,8" or "3". Throws std::invalid_argument.
std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view what);
std::vector<Kernel> parse_kernels(std::string_view text);

std::int64_t differing_bytes(std::span<const std::byte> a, std::span<const std::byte> b);
// A 64-bit FNV-1a digest of the bytes as 16 hex digits: equal outputs of two builds, checkable
// from their bench JSON (a change meant to keep the bits must keep every digest).
std::string bytes_digest(std::span<const std::byte> bytes);

// Writes JSON to a file; throws std::runtime_error naming the path when it cannot.
void write_json(const std::string& path, const nlohmann::json& j);
void write_text(const std::string& path, const std::string& text);
}  // namespace exactq::cli
