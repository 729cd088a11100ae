// Shared pieces of the exactq CLI: backends, random problems, shape presets, byte comparison.
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

#include "exactq/qmv.h"
#include "exactq/quantize.h"

namespace exactq::cli {

// Exit codes: 0 success, 1 a property failed, 2 bad arguments, 3 inconclusive (the negative
// control did not fire, so the run proved nothing).
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInconclusive = 3;

// Where kernels run. Activations and outputs cross as host bytes; the weights stay loaded.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual void load(const QuantizedMatrix& w) = 0;
  virtual void run(Kernel kernel, std::span<const std::byte> x, std::int64_t m, std::span<std::byte> y) = 0;
  // Median time of one launch in microseconds (weights rotated so caches hold none of them).
  virtual double time_us(Kernel kernel, std::int64_t m, int repeats) = 0;
  // Bytes per second of a plain streaming read measured now, on this backend: the ceiling.
  virtual double read_ceiling_bytes_per_s() = 0;
  // Median time of that streaming read over exactly `bytes`, timed like time_us (0 where the
  // backend does not measure it).
  virtual double read_time_us(std::int64_t /*bytes*/, int /*repeats*/) { return 0.0; }
  virtual std::string device_description() const = 0;
  // Registers, spilled bytes and occupancy of each kernel instantiation at these bits (empty
  // where the backend has no such notion): why a streamed width stops paying.
  virtual nlohmann::json kernel_resources(int /*bits*/) { return nlohmann::json::array(); }
  // The layout qmv_mma reads its weights in (the CUDA backend converts a copy of the matrix to
  // the fragment layout, where the shape allows; the CPU reference gives the same answer for both).
  virtual void set_mma_layout(WeightLayout /*layout*/) {}
  // Replaces the options the backend was made with (bench's tuning sweep).
  virtual void set_options(const QmvOptions& options) = 0;
};

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

// The numerically irrelevant tuning knobs of QmvOptions as flags (--qmv-l2-prefetch-rounds, ...),
// bound to `options`; check_tuning_options throws std::invalid_argument naming a bad value.
void add_tuning_options(CLI::App* cmd, QmvOptions& options);
void check_tuning_options(const QmvOptions& options);
// "P:S,P:S,...": qmv's L2 prefetch rounds and last-trip split per variant (bench --sweep-qmv-tuning),
// applied to copies of `base`; throws std::invalid_argument naming a bad item.
std::vector<QmvOptions> parse_tuning_sweep(std::string_view text, const QmvOptions& base);
// "prefetch P, last-trip split S" (-1 printed as "auto").
std::string tuning_label(const QmvOptions& options);

// "fragments" or "mlx" (--mma-layout); throws std::invalid_argument otherwise.
WeightLayout parse_mma_layout(std::string_view text);

// "cpu" or "cuda"; "auto" picks cuda when a GPU is usable, else cpu. Throws std::invalid_argument
// for an unknown name and std::runtime_error when cuda is asked for but not available.
std::unique_ptr<Backend> make_backend(std::string_view name, const QmvOptions& options);
bool cuda_available();
std::unique_ptr<Backend> make_cpu_backend(const QmvOptions& options);
std::unique_ptr<Backend> make_cuda_backend(const QmvOptions& options);  // defined only with CUDA

// A random weight matrix in the shape of real checkpoints: each row gets its own scale and
// a few outliers, so groups differ in range and sign the way trained weights do.
std::vector<float> random_weights(std::int64_t n, std::int64_t k, std::uint64_t seed);
// Random activations [m, k] in dtype (normal, with per-vector scale).
std::vector<std::byte> random_activations(std::int64_t m, std::int64_t k, DType dtype, std::uint64_t seed);
// The activations every backend times at width m (and bench's output digests are of).
inline std::vector<std::byte> bench_activations(std::int64_t m, std::int64_t k, DType dtype) {
  return random_activations(m, k, dtype, 0x5eed + std::uint64_t(m));
}

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

}  // namespace exactq::cli

namespace exactq::cli {
// Writes JSON to a file; throws std::runtime_error naming the path when it cannot.
void write_json(const std::string& path, const nlohmann::json& j);
void write_text(const std::string& path, const std::string& text);
// A valid random quantized matrix drawn directly in the packed format (every byte pattern is a
// valid code sequence): fast enough for the largest bench shapes.
QuantizedMatrix random_quantized(std::int64_t n, std::int64_t k, int bits, int group, DType dtype, std::uint64_t seed);
}  // namespace exactq::cli
