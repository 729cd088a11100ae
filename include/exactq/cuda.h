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

// y = W x on the device: w's spans, x and y are device memory. Asynchronous on `stream`.
// Throws std::invalid_argument on bad arguments, std::runtime_error on a CUDA error.
void qmv(Kernel kernel, const QuantizedMatrixView& w, std::span<const std::byte> x, std::int64_t m,
         std::span<std::byte> y, const QmvOptions& options = {}, void* stream = nullptr);

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

}  // namespace exactq::cuda
