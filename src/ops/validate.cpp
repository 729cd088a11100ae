// Argument checks of every op, in one place: each backend calls these before its kernels run.
#include <stdexcept>
#include <string>

#include "exactq/qmv.h"

namespace exactq {

namespace {
[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("[exactq] " + what); }
}  // namespace

std::string_view to_string(Kernel kernel) {
  switch (kernel) {
    case Kernel::qmv: return "qmv";
    case Kernel::qmv_streamed: return "qmv_streamed";
    case Kernel::qmv_mma: return "qmv_mma";
    case Kernel::qmv_wide: return "qmv_wide";
  }
  validate_kernel(kernel);  // throws: kernel is none of the above
  return {};
}

Kernel parse_kernel(std::string_view text) {
  if (text == "qmv") return Kernel::qmv;
  if (text == "qmv_streamed") return Kernel::qmv_streamed;
  if (text == "qmv_wide") return Kernel::qmv_wide;
  if (text == "qmv_mma") return Kernel::qmv_mma;
  fail("unknown kernel '" + std::string(text) + "' (expected qmv, qmv_streamed, qmv_wide or qmv_mma)");
}

void validate_kernel(Kernel kernel) {
  switch (kernel) {
    case Kernel::qmv:
    case Kernel::qmv_streamed:
    case Kernel::qmv_wide:
    case Kernel::qmv_mma: return;
  }
  fail("kernel value " + std::to_string(static_cast<int>(kernel)) + " is not a Kernel");
}

void validate_qmv_args(Kernel kernel, const QuantizedMatrixView& w, std::span<const std::byte> x, std::int64_t m,
                       std::span<const std::byte> y) {
  validate_kernel(kernel);
  w.validate();
  if (w.layout == WeightLayout::mma_fragments && kernel != Kernel::qmv_mma)
    fail(std::string(to_string(kernel)) + " reads MLX's layout; this matrix is in qmv_mma's fragment layout");
  if (m < 1 || m > (std::int64_t(1) << 24)) fail("M = " + std::to_string(m) + " is out of range [1, 2^24]");
  const std::size_t want_x = std::size_t(m * w.k) * dtype_size(w.dtype);
  const std::size_t want_y = std::size_t(m * w.n) * dtype_size(w.dtype);
  if (x.data() == nullptr) fail("activations are null");
  if (y.data() == nullptr) fail("output is null");
  if (x.size() != want_x)
    fail("activations have " + std::to_string(x.size()) + " bytes, expected M*K*" +
         std::to_string(dtype_size(w.dtype)) + " = " + std::to_string(want_x));
  if (y.size() != want_y)
    fail("output has " + std::to_string(y.size()) + " bytes, expected M*N*" + std::to_string(dtype_size(w.dtype)) +
         " = " + std::to_string(want_y));
}

void validate_options(const QmvOptions& options) {
  if (options.streamed_max_vectors < 1)
    fail("streamed_max_vectors = " + std::to_string(options.streamed_max_vectors) + " must be at least 1");
  if (options.threads < 0 || options.threads > kMaxThreads)
    fail("threads = " + std::to_string(options.threads) + " is out of range [0, " + std::to_string(kMaxThreads) + "]");
}

}  // namespace exactq
