// Choosing a backend by name, and qmv over host bytes on any backend.
#include <stdexcept>
#include <string>

#include "exactq/backend.h"

namespace exactq {

#if !defined(EXACTQ_HAVE_CUDA)
bool cuda_backend_available() { return false; }
std::unique_ptr<Backend> make_cuda_backend(const QmvOptions&) {
  throw std::runtime_error("[exactq] this build of exactq has no CUDA backend (nvcc was not found at configure time)");
}
#endif

std::unique_ptr<Backend> make_backend(std::string_view name, const QmvOptions& options) {
  if (name == "cpu") return make_cpu_backend(options);
  if (name == "cuda") return make_cuda_backend(options);
  if (name == "auto") return cuda_backend_available() ? make_cuda_backend(options) : make_cpu_backend(options);
  throw std::invalid_argument("[exactq] unknown backend '" + std::string(name) + "' (expected cpu, cuda or auto)");
}

void qmv_host(Backend& backend, Kernel kernel, const Matrix& w, std::span<const std::byte> x, std::int64_t m,
              std::span<std::byte> y) {
  auto dx = backend.allocate(x.size());
  auto dy = backend.allocate(y.size());
  backend.upload(*dx, x);
  backend.qmv(kernel, w, *dx, m, *dy);
  backend.synchronize();
  backend.download(*dy, y);
}

}  // namespace exactq
