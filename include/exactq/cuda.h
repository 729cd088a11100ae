// The CUDA backend: the same kernels and orders as the CPU mirror, on device memory.
// Every output byte equals the CPU mirror's (exactq::cpu::qmv) for the same inputs.
// This header needs no CUDA headers; streams are passed as void* (a cudaStream_t).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "exactq/qmv.h"

namespace exactq::cuda {

// Whether a CUDA device can be used now (false without a driver or a GPU).
bool device_available();
std::string device_description();
int multiprocessor_count();

// y = W x on the device: w's spans, x and y are device memory. Asynchronous on `stream`.
// Throws std::invalid_argument on bad arguments, std::runtime_error on a CUDA error.
void qmv(Kernel kernel, const QuantizedMatrixView& w, std::span<const std::byte> x, std::int64_t m,
         std::span<std::byte> y, const QmvOptions& options = {}, void* stream = nullptr);

// The largest V that qmv_streamed is instantiated for (QmvOptions::streamed_max_vectors is
// capped there).
int max_streamed_vectors();

// Registers, spilled (local) bytes and static shared memory of one instantiation, as the
// compiler left them: the cause of a kernel's cap, not just its symptom.
struct KernelResources {
  int registers = 0;
  int local_bytes = 0;
  int max_threads_per_block = 0;
  int blocks_per_sm = 0;  // occupancy at the launch configuration used
};
KernelResources kernel_resources(Kernel kernel, int bits, int vectors_per_pass);

// Owning device memory.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  std::span<std::byte> bytes() { return {data_, size_}; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  void upload(std::span<const std::byte> host);
  void download(std::span<std::byte> host) const;
  void fill(std::uint8_t value);

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// A quantized matrix copied to the device.
struct DeviceMatrix {
  DeviceBuffer packed, scales, biases;
  QuantizedMatrixView view;  // spans into the buffers above
  static DeviceMatrix upload(const QuantizedMatrix& host);
};

// Median microseconds of one launch: launches are captured into a CUDA graph that rotates
// through `weights` (exactq/timing.h: timing_copies of them), replayed after warm-up.
double time_qmv_us(Kernel kernel, std::span<const QuantizedMatrixView> weights, std::span<const std::byte> x,
                   std::int64_t m, std::span<std::byte> y, const QmvOptions& options, int repeats);

// Bytes per second of a streaming read of `bytes` by a kernel of our own (16-byte loads, many
// in flight): the same-run ceiling the benchmarks are measured against.
double read_bandwidth(std::size_t bytes, int repeats);

// Median microseconds of that streaming read over exactly `bytes`, timed as time_qmv_us times a
// kernel (graph replay, rotating copies out of L2, optionally as programmatic dependent
// launches): what a kernel that only had to read a matrix of this size could reach, start-up
// and tail included.
double time_read_us(std::size_t bytes, int repeats, bool overlap_launch);

}  // namespace exactq::cuda
