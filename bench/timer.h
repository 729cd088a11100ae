// What `exactq bench` times a backend with: one loaded matrix's kernels (medians of repeated
// launches, weights rotated out of every cache), the same-run read ceiling, and the kernels'
// resources. Only the CLI links this; the library has no timing in its API.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exactq/format.h"
#include "exactq/qmv.h"

namespace exactq::bench {

// Registers, spilled bytes and occupancy of one kernel instantiation.
struct KernelResources {
  std::string kernel;
  int vectors_per_pass = 0;
  int registers = 0;
  int spilled_bytes = 0;
  int blocks_per_sm = 0;
};

class Timer {
 public:
  virtual ~Timer() = default;
  virtual std::string_view name() const = 0;  // the backend's: "cpu" or "cuda"
  virtual std::string description() const = 0;
  // Loads the matrix every later call times (the caller keeps `w` alive until the next load).
  // qmv_mma reads it in `mma_layout` where the shape allows it.
  virtual void load(const QuantizedMatrix& w, WeightLayout mma_layout) = 0;
  // The kernel once on the loaded matrix, host bytes in and out (bench's output digests).
  virtual void run(Kernel kernel, std::span<const std::byte> x, std::int64_t m, std::span<std::byte> y) = 0;
  // Median microseconds of one launch at width m, on bench_activations(m, ...).
  virtual double time_us(Kernel kernel, std::int64_t m, int repeats) = 0;
  // Bytes per second of a plain streaming read measured now: the ceiling.
  virtual double read_ceiling_bytes_per_s() = 0;
  // Median microseconds of that streaming read over exactly `bytes`, timed like time_us (0 where
  // the backend does not measure it).
  virtual double read_time_us(std::int64_t bytes, int repeats) = 0;
  // Each kernel instantiation's resources at these bits (empty where the backend has none).
  virtual std::vector<KernelResources> kernel_resources(int bits) = 0;
  virtual int default_repeats() const = 0;
};

// "cpu", "cuda" or "auto" (cuda where a GPU is usable). Throws std::invalid_argument on an unknown
// name or bad options, std::runtime_error where cuda is asked for and not available.
std::unique_ptr<Timer> make_timer(std::string_view backend, const QmvOptions& options);
std::unique_ptr<Timer> make_cpu_timer(const QmvOptions& options);
std::unique_ptr<Timer> make_cuda_timer(const QmvOptions& options);

}  // namespace exactq::bench
