// The CPU timer: wall-clock medians of cpu::qmv, and a streaming sum over a buffer far larger than
// any CPU cache as the ceiling. Also where the timer is chosen by name.
#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "exactq/backend.h"
#include "problems.h"
#include "timer.h"

namespace exactq::bench {

namespace {

class CpuTimer final : public Timer {
 public:
  explicit CpuTimer(const QmvOptions& options) : options_(options) { validate_options(options); }
  std::string_view name() const override { return "cpu"; }
  std::string description() const override {
    return "CPU, " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
  }
  int default_repeats() const override { return 5; }
  void load(const QuantizedMatrix& w, WeightLayout) override { w_ = &w; }
  void run(Kernel kernel, std::span<const std::byte> x, std::int64_t m, std::span<std::byte> y) override {
    if (w_ == nullptr) throw std::logic_error("cpu timer: no weights loaded");
    cpu::qmv(kernel, w_->view(), x, m, y, options_);
  }
  double time_us(Kernel kernel, std::int64_t m, int repeats) override {
    if (w_ == nullptr) throw std::logic_error("cpu timer: no weights loaded");
    const auto x = bench_activations(m, w_->k, w_->dtype);
    std::vector<std::byte> y(std::size_t(m * w_->n) * dtype_size(w_->dtype));
    run(kernel, x, m, y);  // warm-up
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      run(kernel, x, m, y);
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    return times[times.size() / 2];
  }
  double read_ceiling_bytes_per_s() override {
    // A streaming sum over 256 MiB on every worker thread: far larger than any CPU cache.
    const std::size_t count = std::size_t(64) << 20;
    std::vector<float> data(count, 1.0f);
    const unsigned workers = options_.threads > 0 ? unsigned(options_.threads)
                                                   : std::max(1u, std::thread::hardware_concurrency());
    std::vector<double> times;
    for (int rep = 0; rep < 5; ++rep) {
      std::vector<float> partial(workers);
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> pool;
      // A thread the system refuses ends the measurement cleanly: the started ones are joined.
      struct JoinAll {
        std::vector<std::thread>& pool;
        ~JoinAll() {
          for (auto& th : pool)
            if (th.joinable()) th.join();
        }
      } join_all{pool};
      for (unsigned t = 0; t < workers; ++t)
        pool.emplace_back([&, t] {
          const std::size_t begin = count * t / workers, end = count * (t + 1) / workers;
          float s[8] = {};
          for (std::size_t i = begin; i + 8 <= end; i += 8)
            for (int j = 0; j < 8; ++j) s[j] += data[i + std::size_t(j)];
          partial[t] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
        });
      for (auto& th : pool) th.join();
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (partial[0] < 0) times.back() = 1e9;  // keeps the sums alive
    }
    std::sort(times.begin(), times.end());
    return double(count * sizeof(float)) / times[times.size() / 2];
  }
  double read_time_us(std::int64_t, int) override { return 0.0; }
  std::vector<KernelResources> kernel_resources(int) override { return {}; }

 private:
  QmvOptions options_;
  const QuantizedMatrix* w_ = nullptr;
};

}  // namespace

std::unique_ptr<Timer> make_cpu_timer(const QmvOptions& options) { return std::make_unique<CpuTimer>(options); }

#if !defined(EXACTQ_HAVE_CUDA)
std::unique_ptr<Timer> make_cuda_timer(const QmvOptions&) {
  throw std::runtime_error("this build of exactq has no CUDA backend (nvcc was not found at configure time)");
}
#endif

std::unique_ptr<Timer> make_timer(std::string_view backend, const QmvOptions& options) {
  // The library resolves the name ("auto" included) and refuses a bad one; the timer follows it.
  return make_backend(backend, options)->name() == "cuda" ? make_cuda_timer(options) : make_cpu_timer(options);
}

}  // namespace exactq::bench
