// Where ops run. A Backend owns memory (Buffers), holds quantized matrices copied to it
// (Matrices), and runs the ops on them. The CPU backend (the bit-exact mirror) and the CUDA
// backend implement it; the engine and the CLI see only this interface, so every op they run
// gives the same bytes on either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "exactq/format.h"
#include "exactq/qmv.h"

namespace exactq {

// Bytes owned by one backend: host memory on the CPU backend, device memory on CUDA. Only the ops
// of the backend that made a buffer may read or write it; the host crosses with upload/download.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual std::span<std::byte> bytes() = 0;
  virtual std::span<const std::byte> bytes() const = 0;
  std::size_t size() const { return bytes().size(); }
};

// A quantized matrix resident on one backend.
class Matrix {
 public:
  virtual ~Matrix() = default;
  // Shape and format (n, k, bits, group, dtype) of the matrix as loaded, in MLX's layout.
  virtual const QuantizedMatrixView& view() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu" or "cuda".
  virtual std::string_view name() const = 0;
  // The device, for reports: the GPU's name, SMs and L2, or the CPU's hardware threads.
  virtual std::string description() const = 0;

  // Memory of this backend, uninitialised.
  virtual std::unique_ptr<Buffer> allocate(std::size_t bytes) = 0;
  // Throw std::invalid_argument where the sizes differ.
  virtual void upload(Buffer& to, std::span<const std::byte> from) = 0;
  virtual void download(const Buffer& from, std::span<std::byte> to) = 0;

  // A copy of `w` (in MLX's layout) on this backend. qmv_mma reads its copy in `mma_layout` where
  // the shape allows it (mma_layout::fits), else in MLX's layout: both give the same bytes.
  // Throws std::invalid_argument on an invalid matrix.
  virtual std::unique_ptr<Matrix> load(const QuantizedMatrixView& w,
                                       WeightLayout mma_layout = WeightLayout::mma_fragments) = 0;

  // y = W x for m vectors: x is [m, k] and y [m, n] in the matrix's dtype, both this backend's
  // buffers. Asynchronous where the backend is (synchronize before reading y on the host).
  // Throws std::invalid_argument on bad arguments (exactq/qmv.h's validate_qmv_args).
  virtual void qmv(Kernel kernel, const Matrix& w, const Buffer& x, std::int64_t m, Buffer& y) = 0;

  // Waits until every op issued so far has finished.
  virtual void synchronize() = 0;

  // The options every op runs with (numerically irrelevant: no byte depends on them).
  virtual const QmvOptions& options() const = 0;
};

// The CPU backend. Throws std::invalid_argument on bad options.
std::unique_ptr<Backend> make_cpu_backend(const QmvOptions& options = {});
// Whether this build has the CUDA backend and a usable GPU is present now.
bool cuda_backend_available();
// The CUDA backend on the current device. Throws std::runtime_error where this build has no CUDA
// backend or no GPU is usable, std::invalid_argument on bad options.
std::unique_ptr<Backend> make_cuda_backend(const QmvOptions& options = {});
// "cpu", "cuda", or "auto" (cuda where cuda_backend_available(), else cpu). Throws
// std::invalid_argument naming an unknown name.
std::unique_ptr<Backend> make_backend(std::string_view name, const QmvOptions& options = {});

// qmv with host activations and outputs: uploads x, runs, downloads y (sizes as Backend::qmv).
void qmv_host(Backend& backend, Kernel kernel, const Matrix& w, std::span<const std::byte> x, std::int64_t m,
              std::span<std::byte> y);

}  // namespace exactq
