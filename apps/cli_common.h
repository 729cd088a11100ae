// Shared pieces of the exactq CLI: option parsing and checks, shape presets, byte comparison, output files.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "exactq/backend.h"
#include "exactq/decoder.h"
#include "exactq/model.h"
#include "exactq/speculative.h"
#include "exactq/qmv.h"
#include "exactq/quantize.h"

namespace exactq::cli {

// Exit codes: 0 success, 1 a property failed, 2 bad arguments, 3 inconclusive (the negative
// control did not fire, so the run proved nothing).
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInconclusive = 3;

// Options. Every value is checked where CLI11 reads it, before any command runs, so a bad value
// exits 2 with a message naming the option: an explicit empty value is refused (`--json ''` is
// never taken as "not given"); integers are base 10 (CLI11 alone reads 010 as octal and 0x20 as
// hex) and must fit the variable they land in (an int option never wraps); seconds are decimal.
// Every option of the CLI that takes a value is added through one of these.
template <std::integral T>
CLI::Option* add_integer_option(CLI::App* cmd, const std::string& name, T& value, const std::string& description);
CLI::Option* add_text_option(CLI::App* cmd, const std::string& name, std::string& value, const std::string& description);
// An output file: refused when empty ("empty path"); check_writable before the work.
CLI::Option* add_path_option(CLI::App* cmd, const std::string& name, std::string& path, const std::string& description);
CLI::Option* add_seconds_option(CLI::App* cmd, const std::string& name, double& value, const std::string& description);

// Base-10 integers in [lo, hi]: an optional sign and digits (leading zeros dropped, not read as
// octal), naming the text given otherwise. A transform: it normalizes the text for CLI11.
CLI::Validator decimal_integer(std::int64_t lo, std::int64_t hi);
// --threads: 0 (all hardware threads) to kMaxThreads; throws std::invalid_argument otherwise.
void check_threads(int threads);
// Throws std::invalid_argument naming `option` and `path` unless `path` can be written as a
// regular file: an existing regular file with write permission, or a new name of legal length in
// a writable folder. A FIFO, a directory or a device (/dev/full, /dev/null) is refused without
// being opened (opening a FIFO for writing waits for a reader). Creates nothing.
void check_writable(const std::string& path, std::string_view option);
struct OutputFile {
  std::string_view option;  // "--json"
  std::string path;         // "" where the option was not given
};
// check_writable on every given file, and no file named by two options (the later write would
// replace the earlier).
void check_outputs(const std::vector<OutputFile>& files);
// Throws std::invalid_argument, naming the sizes, where a random problem of N x K with M vectors
// would need more host memory than this process can get (the float weights before quantization,
// the packed matrix, the activations and a few output blocks): the least of MemAvailable, the
// cgroup memory limits above this process less their use, and RLIMIT_AS / RLIMIT_DATA less what
// is mapped already. Refused here, a size fails in words instead of in an allocation.
void check_host_memory(std::int64_t n, std::int64_t k, std::int64_t m, std::string_view what);

// What `generate` and `serve` decode with: the backend, the model's decoder and the drafter of
// --draft (a decoder of the draft checkpoint on the same backend, with the target's context) or
// --lookup N (N > 0); no drafter where neither is given. The target's cache holds `sequences`
// sequences (a server's batch), and so does the draft model's; batch_drafter drafts for all of
// them at once (the same drafter's rule). Destroyed drafters first, backend last.
struct DecodingSetup {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Decoder> decoder, draft_decoder;
  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<BatchDrafter> batch_drafter;
};
// Throws std::invalid_argument naming --draft's directory where the draft model cannot draft
// for the target.
DecodingSetup open_decoding(std::string_view backend, int threads, const Checkpoint& checkpoint, KernelFamily family,
                            std::int64_t context, const std::optional<Checkpoint>& draft, std::string_view draft_dir,
                            std::int64_t lookup, std::int64_t sequences = 1);

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
// The most items a --seeds or --m list may hold: more than any run needs (widths stop at 4096),
// few enough that a typo such as 1-1000000000 is refused instead of filling memory.
inline constexpr std::size_t kMaxListItems = 4096;
// A base-10 integer, the whole of s; std::invalid_argument naming `what` and s otherwise.
std::int64_t parse_int(std::string_view s, std::string_view what);
// "1-16", "1,2,4,8" or "3", each value once, at most kMaxListItems values. Throws
// std::invalid_argument naming `what` and the item (a reversed or too long range, a repeat).
std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view what);
std::vector<Kernel> parse_kernels(std::string_view text);

std::int64_t differing_bytes(std::span<const std::byte> a, std::span<const std::byte> b);
// A 64-bit FNV-1a digest of the bytes as 16 hex digits: equal outputs of two builds, checkable
// from their bench JSON (a change meant to keep the bits must keep every digest).
std::string bytes_digest(std::span<const std::byte> bytes);

// Write a result file; throw std::runtime_error naming the path where any part of it could not be
// written, the failure of the final flush and close included (a short text reaches the file only
// then).
void write_json(const std::string& path, const nlohmann::json& j);
void write_text(const std::string& path, const std::string& text);

template <std::integral T>
CLI::Option* add_integer_option(CLI::App* cmd, const std::string& name, T& value, const std::string& description) {
  static_assert(sizeof(T) <= sizeof(std::int64_t), "decimal_integer reads int64");
  const std::int64_t hi = std::uint64_t(std::numeric_limits<T>::max()) > std::uint64_t(INT64_MAX)
                              ? INT64_MAX
                              : std::int64_t(std::numeric_limits<T>::max());
  return cmd->add_option(name, value, description)
      ->transform(decimal_integer(std::int64_t(std::numeric_limits<T>::min()), hi))
      ->capture_default_str();
}

}  // namespace exactq::cli
