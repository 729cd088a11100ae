// The CUDA timer: weights uploaded once, plus enough device copies of them (timing_copies for this
// device's L2) that cycling through them keeps every launch's weights out of the L2.
#include <stdexcept>

#include "cuda_timing.h"
#include "exactq/cuda.h"
#include "exactq/mma_layout.h"
#include "problems.h"
#include "timer.h"
#include "timing.h"

namespace exactq::bench {

namespace {

class CudaTimer final : public Timer {
 public:
  explicit CudaTimer(const QmvOptions& options) : options_(options) { validate_options(options); }
  std::string_view name() const override { return "cuda"; }
  std::string description() const override { return cuda::device_description(); }
  int default_repeats() const override { return 100; }

  void load(const QuantizedMatrix& w, WeightLayout mma_layout) override {
    host_ = &w;
    mma_layout_ = mma_layout;
    copies_.clear();
    fragment_copies_.clear();
    fragments_.reset();
    copies_.push_back(cuda::DeviceMatrix::upload(w));
  }

  void run(Kernel kernel, std::span<const std::byte> x, std::int64_t m, std::span<std::byte> y) override {
    cuda::DeviceBuffer dx(x.size()), dy(y.size());
    dx.upload(x);
    dy.fill(0xA5);  // poison: an unwritten output byte shows up in the digest
    cuda::qmv(kernel, copies_for(kernel, 1).front().view, dx.bytes(), m, dy.bytes(), options_);
    dy.download(y);
  }

  double time_us(Kernel kernel, std::int64_t m, int repeats) override {
    const QuantizedMatrixView v = loaded().view();
    const auto want = std::size_t(timing_copies(std::size_t(v.weight_bytes()), v.scales.size() + v.biases.size(), l2_bytes()));
    std::vector<QuantizedMatrixView> views;
    for (const auto& c : copies_for(kernel, want)) views.push_back(c.view);
    const auto x = bench_activations(m, v.k, v.dtype);
    cuda::DeviceBuffer dx(x.size()), dy(std::size_t(m * v.n) * dtype_size(v.dtype));
    dx.upload(x);
    return time_qmv_us(kernel, views, dx.bytes(), m, dy.bytes(), options_, repeats);
  }

  std::vector<KernelResources> kernel_resources(int bits) override { return bench::kernel_resources(bits); }
  double read_ceiling_bytes_per_s() override { return read_bandwidth(std::size_t(2) << 30, 20); }
  double read_time_us(std::int64_t bytes, int repeats) override {
    return time_read_us(std::size_t(bytes), repeats, options_.overlap_launch);
  }

 private:
  const QuantizedMatrix& loaded() const {
    if (host_ == nullptr) throw std::logic_error("cuda timer: no weights loaded");
    return *host_;
  }
  // At least `want` device copies of the weights in the layout `kernel` reads: qmv_mma gets the
  // fragment layout (converted once on the host) unless the layout asked for is MLX's or the
  // shape rules it out.
  std::vector<cuda::DeviceMatrix>& copies_for(Kernel kernel, std::size_t want) {
    const QuantizedMatrix& w = loaded();
    const bool fragments = kernel == Kernel::qmv_mma && mma_layout_ == WeightLayout::mma_fragments &&
                           mma_layout::fits(w.bits, w.group, w.k);
    if (fragments && !fragments_) fragments_ = std::make_unique<QuantizedMatrix>(to_mma_fragments(w.view()));
    auto& copies = fragments ? fragment_copies_ : copies_;
    while (copies.size() < want) copies.push_back(cuda::DeviceMatrix::upload(fragments ? *fragments_ : w));
    return copies;
  }

  QmvOptions options_;
  WeightLayout mma_layout_ = WeightLayout::mma_fragments;
  const QuantizedMatrix* host_ = nullptr;
  std::unique_ptr<QuantizedMatrix> fragments_;
  std::vector<cuda::DeviceMatrix> copies_, fragment_copies_;
};

}  // namespace

std::unique_ptr<Timer> make_cuda_timer(const QmvOptions& options) {
  if (!cuda::device_available())
    throw std::runtime_error("--backend cuda: no usable CUDA device (no GPU or no driver on this machine)");
  return std::make_unique<CudaTimer>(options);
}

}  // namespace exactq::bench
