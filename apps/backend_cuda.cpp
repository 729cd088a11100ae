// The CLI's CUDA backend: weights uploaded once; for timing, enough device copies of them
// (cuda::timing_copies) that cycling through them keeps every launch's weights out of the L2.
#include <stdexcept>

#include <fmt/format.h>

#include "cli_common.h"
#include "exactq/cuda.h"
#include "exactq/mma_layout.h"
#include "exactq/timing.h"

namespace exactq::cli {

namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const QmvOptions& options) : options_(options) {}
  std::string name() const override { return "cuda"; }
  std::string device_description() const override { return cuda::device_description(); }

  void load(const QuantizedMatrix& w) override {
    host_ = &w;
    copies_.clear();
    fragment_copies_.clear();
    fragments_.reset();
    copies_.push_back(cuda::DeviceMatrix::upload(w));
  }
  void set_mma_layout(WeightLayout layout) override { mma_layout_ = layout; }
  void set_options(const QmvOptions& options) override { options_ = options; }

  void run(Kernel kernel, std::span<const std::byte> x, std::int64_t m, std::span<std::byte> y) override {
    if (copies_.empty()) throw std::logic_error("cuda backend: no weights loaded");
    cuda::DeviceBuffer dx(x.size()), dy(y.size());
    dx.upload(x);
    dy.fill(0xA5);  // poison: an unwritten output byte shows up as a difference
    cuda::qmv(kernel, copies_for(kernel, 1).front().view, dx.bytes(), m, dy.bytes(), options_);
    dy.download(y);
  }

  double time_us(Kernel kernel, std::int64_t m, int repeats) override {
    const QuantizedMatrixView v = host_->view();
    const std::size_t want = std::size_t(cuda::timing_copies(std::size_t(v.weight_bytes()), v.scales.size() + v.biases.size()));
    std::vector<QuantizedMatrixView> views;
    for (const auto& c : copies_for(kernel, want)) views.push_back(c.view);
    const auto x = bench_activations(m, host_->k, host_->dtype);
    cuda::DeviceBuffer dx(x.size()), dy(std::size_t(m * host_->n) * dtype_size(host_->dtype));
    dx.upload(x);
    return cuda::time_qmv_us(kernel, views, dx.bytes(), m, dy.bytes(), options_, repeats);
  }

  nlohmann::json kernel_resources(int bits) override {
    nlohmann::json out = nlohmann::json::array();
    auto add = [&](Kernel k, int v) {
      const auto r = cuda::kernel_resources(k, bits, v);
      out.push_back({{"kernel", std::string(to_string(k))}, {"vectors_per_pass", v}, {"registers", r.registers},
                     {"spilled_bytes", r.local_bytes}, {"blocks_per_sm", r.blocks_per_sm}});
    };
    add(Kernel::qmv, 1);
    for (int v = 2; v <= cuda::max_streamed_vectors(); ++v) add(Kernel::qmv_streamed, v);
    for (int v = 1; v <= 5; ++v) add(Kernel::qmv_wide, v);
    add(Kernel::qmv_mma, 8);
    add(Kernel::qmv_mma, 16);
    return out;
  }

  double read_ceiling_bytes_per_s() override { return cuda::read_bandwidth(std::size_t(2) << 30, 20); }
  double read_time_us(std::int64_t bytes, int repeats) override {
    return cuda::time_read_us(std::size_t(bytes), repeats, options_.overlap_launch);
  }

 private:
  // At least `want` device copies of the weights in the layout `kernel` reads: qmv_mma gets the
  // fragment layout (converted once on the host) unless --mma-layout mlx or the shape rules it out.
  std::vector<cuda::DeviceMatrix>& copies_for(Kernel kernel, std::size_t want) {
    const bool fragments = kernel == Kernel::qmv_mma && mma_layout_ == WeightLayout::mma_fragments &&
                           mma_layout::fits(host_->bits, host_->group, host_->k);
    if (fragments && !fragments_) fragments_ = std::make_unique<QuantizedMatrix>(to_mma_fragments(host_->view()));
    auto& copies = fragments ? fragment_copies_ : copies_;
    while (copies.size() < want) copies.push_back(cuda::DeviceMatrix::upload(fragments ? *fragments_ : *host_));
    return copies;
  }

  QmvOptions options_;
  WeightLayout mma_layout_ = WeightLayout::mma_fragments;
  const QuantizedMatrix* host_ = nullptr;
  std::unique_ptr<QuantizedMatrix> fragments_;
  std::vector<cuda::DeviceMatrix> copies_, fragment_copies_;
};

}  // namespace

bool cuda_available() { return cuda::device_available(); }

std::unique_ptr<Backend> make_cuda_backend(const QmvOptions& options) {
  if (!cuda::device_available())
    throw std::runtime_error("--backend cuda: no usable CUDA device (no GPU or no driver on this machine)");
  return std::make_unique<CudaBackend>(options);
}

}  // namespace exactq::cli
