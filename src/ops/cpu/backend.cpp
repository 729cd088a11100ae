// The CPU backend: the bit-exact mirror of the CUDA kernels behind the Backend interface, and the
// cpu::qmv entry point that dispatches to each kernel's file.
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "exactq/backend.h"
#include "exactq/mma_layout.h"
#include "ops/cpu/common.h"

namespace exactq {

namespace cpu {

void qmv(Kernel kernel, const QuantizedMatrixView& w, std::span<const std::byte> x, std::int64_t m,
         std::span<std::byte> y, const QmvOptions& options) {
  validate_qmv_args(kernel, w, x, m, y);
  validate_options(options);
  if (kernel == Kernel::qmv_mma && w.dtype == DType::f32)
    throw std::invalid_argument("[exactq] qmv_mma: dtype f32 has no exact tensor-core path (use bf16 or f16; qmv serves f32)");
  const Activations a = widen_activations(x, m, w.k, w.dtype, is_exact_family(kernel));
  switch (kernel) {
    case Kernel::qmv: qmv_narrow(w, a, y, options.threads); break;
    case Kernel::qmv_streamed: qmv_streamed(w, a, y, options.streamed_max_vectors, options.threads); break;
    case Kernel::qmv_wide: qmv_wide(w, a, y, options.threads); break;
    case Kernel::qmv_mma:
      if (w.layout == WeightLayout::mma_fragments) {
        const QuantizedMatrix mlx = to_mlx_layout(w);
        qmv_mma_reference(mlx.view(), a, y, options.threads);
      } else {
        qmv_mma_reference(w, a, y, options.threads);
      }
      break;
  }
}

}  // namespace cpu

namespace {

class CpuBuffer final : public Buffer {
 public:
  explicit CpuBuffer(std::size_t bytes) : bytes_(bytes) {}
  std::span<std::byte> bytes() override { return bytes_; }
  std::span<const std::byte> bytes() const override { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

// The CPU reference of qmv_mma reads MLX's layout; the fragment layout would give the same bytes,
// so the CPU keeps one copy whatever layout is asked for.
class CpuMatrix final : public Matrix {
 public:
  explicit CpuMatrix(const QuantizedMatrixView& w) : copy_(copy_of(w)), view_(copy_.view()) {}
  const QuantizedMatrixView& view() const override { return view_; }

 private:
  static QuantizedMatrix copy_of(const QuantizedMatrixView& w) {
    w.validate();
    if (w.layout == WeightLayout::mma_fragments) return to_mlx_layout(w);
    QuantizedMatrix m;
    m.n = w.n, m.k = w.k, m.bits = w.bits, m.group = w.group, m.dtype = w.dtype;
    m.packed.assign(w.packed.begin(), w.packed.end());
    m.scales.assign(w.scales.begin(), w.scales.end());
    m.biases.assign(w.biases.begin(), w.biases.end());
    return m;
  }
  QuantizedMatrix copy_;
  QuantizedMatrixView view_;
};

template <typename Own, typename Base>
Own& own(Base& b, const char* what) {
  auto* p = dynamic_cast<Own*>(&b);
  if (p == nullptr) throw std::invalid_argument(std::string("[exactq] the cpu backend was given another backend's ") + what);
  return *p;
}
CpuBuffer& own(Buffer& b) { return own<CpuBuffer>(b, "buffer"); }
const CpuBuffer& own(const Buffer& b) { return own<const CpuBuffer>(b, "buffer"); }
const CpuMatrix& own(const Matrix& m) { return own<const CpuMatrix>(m, "matrix"); }

void check_sizes(std::size_t buffer, std::size_t host, const char* what) {
  if (buffer != host)
    throw std::invalid_argument(std::string("[exactq] ") + what + " of " + std::to_string(host) +
                                " host bytes with a buffer of " + std::to_string(buffer));
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const QmvOptions& options) : options_(options) { validate_options(options); }
  std::string_view name() const override { return "cpu"; }
  std::string description() const override {
    return "CPU, " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
  }
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override { return std::make_unique<CpuBuffer>(bytes); }
  void upload(Buffer& to, std::span<const std::byte> from) override {
    CpuBuffer& d = own(to);
    check_sizes(d.size(), from.size(), "upload");
    if (!from.empty()) std::memcpy(d.bytes().data(), from.data(), from.size());
  }
  void download(const Buffer& from, std::span<std::byte> to) override {
    const CpuBuffer& s = own(from);
    check_sizes(s.size(), to.size(), "download");
    if (!to.empty()) std::memcpy(to.data(), s.bytes().data(), to.size());
  }
  std::unique_ptr<Matrix> load(const QuantizedMatrixView& w, WeightLayout) override {
    return std::make_unique<CpuMatrix>(w);
  }
  void qmv(Kernel kernel, const Matrix& w, const Buffer& x, std::int64_t m, Buffer& y) override {
    cpu::qmv(kernel, own(w).view(), own(x).bytes(), m, own(y).bytes(), options_);
  }
  void synchronize() override {}
  const QmvOptions& options() const override { return options_; }

 private:
  QmvOptions options_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const QmvOptions& options) { return std::make_unique<CpuBackend>(options); }

}  // namespace exactq
