#include "cli_common.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <random>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

namespace exactq::cli {

namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

std::int64_t parse_int(std::string_view s, std::string_view what) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    bad(fmt::format("{}: '{}' is not an integer", what, s));
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const auto pos = s.find(sep);
    out.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) break;
    s.remove_prefix(pos + 1);
  }
  return out;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const QmvOptions& options) : options_(options) {}
  std::string name() const override { return "cpu"; }
  std::string device_description() const override {
    return fmt::format("CPU, {} hardware threads", std::thread::hardware_concurrency());
  }
  void load(const QuantizedMatrix& w) override { w_ = &w; }
  void run(Kernel kernel, std::span<const std::byte> x, std::int64_t m, std::span<std::byte> y) override {
    if (w_ == nullptr) throw std::logic_error("cpu backend: no weights loaded");
    cpu::qmv(kernel, w_->view(), x, m, y, options_);
  }
  double time_us(Kernel kernel, std::int64_t m, int repeats) override {
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

 private:
  void set_options(const QmvOptions& options) override { options_ = options; }
  QmvOptions options_;
  const QuantizedMatrix* w_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const QmvOptions& options) { return std::make_unique<CpuBackend>(options); }

#if !defined(EXACTQ_HAVE_CUDA)
bool cuda_available() { return false; }
std::unique_ptr<Backend> make_cuda_backend(const QmvOptions&) {
  throw std::runtime_error("this build of exactq has no CUDA backend (nvcc was not found at configure time)");
}
#endif

CLI::Validator decimal_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::size_t sign = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
        const std::string digits = text.substr(sign);
        if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
          return fmt::format("'{}' is not a base-10 integer", text);
        const std::size_t first = std::min(digits.find_first_not_of('0'), digits.size() - 1);
        const std::string normal = (text[0] == '-' ? "-" : "") + digits.substr(first);
        std::int64_t value = 0;
        const auto [end, ec] = std::from_chars(normal.data(), normal.data() + normal.size(), value);
        if (ec != std::errc() || end != normal.data() + normal.size())
          return fmt::format("'{}' is out of the 64-bit integer range", text);
        text = normal;
        return {};
      },
      "INT", "decimal");
}

void check_threads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    bad(fmt::format("--threads {} is out of range [0, {}] (0: all hardware threads)", threads, kMaxThreads));
}

void check_writable(const std::string& path, std::string_view option) {
  namespace fs = std::filesystem;
  const fs::path file(path);
  if (path.empty() || (fs::exists(file) && fs::is_directory(file)))
    bad(fmt::format("{}: '{}' is not a file name", option, path));
  const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
  if (!fs::is_directory(folder)) bad(fmt::format("{}: the folder of '{}' does not exist", option, path));
  if (access((fs::exists(file) ? file : folder).c_str(), W_OK) != 0)
    bad(fmt::format("{}: '{}' cannot be written (no write permission)", option, path));
}

void check_host_memory(std::int64_t n, std::int64_t k, std::int64_t m, std::string_view what) {
  const double need = double(n) * double(k) * 5.0 + double(m) * double(k) * 8.0 + double(m) * double(n) * 32.0;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return;  // unknown: let the allocation decide
  const double have = double(pages) * double(page);
  if (need > have)
    bad(fmt::format("{}: {}x{} with M = {} needs about {:.1f} GB of host memory; this machine has {:.1f} GB", what, n, k,
                    m, need / 1e9, have / 1e9));
}

void add_tuning_options(CLI::App* cmd, QmvOptions& options) {
  cmd->add_option("--qmv-l2-prefetch-rounds", options.qmv_l2_prefetch_rounds,
                  "CUDA qmv, 2 and 4 bits: rows' bytes this many rounds ahead requested into L2 (-1: by shape, 0: off)")
      ->transform(decimal_integer())
      ->capture_default_str();
  cmd->add_option("--qmv-split-last-trip", options.qmv_split_last_trip,
                  "CUDA qmv: split the K of a partial last trip's tasks (-1: default, 0 or 1)")
      ->transform(decimal_integer())
      ->capture_default_str();
}

void check_tuning_options(const QmvOptions& options) {
  if (options.qmv_l2_prefetch_rounds < -1 || options.qmv_l2_prefetch_rounds > 64)
    throw std::invalid_argument(
        fmt::format("--qmv-l2-prefetch-rounds {} is out of range [-1, 64]", options.qmv_l2_prefetch_rounds));
  if (options.qmv_split_last_trip < -1 || options.qmv_split_last_trip > 1)
    throw std::invalid_argument(
        fmt::format("--qmv-split-last-trip {} must be -1, 0 or 1", options.qmv_split_last_trip));
}

std::vector<QmvOptions> parse_tuning_sweep(std::string_view text, const QmvOptions& base) {
  std::vector<QmvOptions> out;
  for (std::string_view item : split(text, ',')) {
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      bad(fmt::format("--sweep-qmv-tuning: '{}' is not PREFETCH:SPLIT", item));
    QmvOptions o = base;
    o.qmv_l2_prefetch_rounds = int(parse_int(item.substr(0, colon), "--sweep-qmv-tuning prefetch rounds"));
    o.qmv_split_last_trip = int(parse_int(item.substr(colon + 1), "--sweep-qmv-tuning last-trip split"));
    check_tuning_options(o);
    out.push_back(o);
  }
  return out;
}

std::string tuning_label(const QmvOptions& o) {
  auto v = [](int x) { return x < 0 ? std::string("auto") : std::to_string(x); };
  return fmt::format("prefetch {}, last-trip split {}", v(o.qmv_l2_prefetch_rounds), v(o.qmv_split_last_trip));
}

WeightLayout parse_mma_layout(std::string_view text) {
  if (text == "fragments") return WeightLayout::mma_fragments;
  if (text == "mlx") return WeightLayout::mlx;
  throw std::invalid_argument(fmt::format("--mma-layout: '{}' is not a layout (fragments or mlx)", text));
}

std::unique_ptr<Backend> make_backend(std::string_view name, const QmvOptions& options) {
  if (name == "cpu") return make_cpu_backend(options);
  if (name == "cuda") return make_cuda_backend(options);
  if (name == "auto") return cuda_available() ? make_cuda_backend(options) : make_cpu_backend(options);
  bad(fmt::format("--backend: unknown backend '{}' (expected cpu, cuda or auto)", name));
}

std::vector<float> random_weights(std::int64_t n, std::int64_t k, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(std::log(0.005f), std::log(0.1f));
  std::vector<float> w(std::size_t(n * k));
  for (std::int64_t r = 0; r < n; ++r) {
    const float row_scale = std::exp(log_scale(rng));
    for (std::int64_t c = 0; c < k; ++c) {
      float v = row_scale * normal(rng);
      if ((rng() & 255) == 0) v *= 8.0f;  // rare outliers widen some groups' ranges
      w[std::size_t(r * k + c)] = v;
    }
  }
  return w;
}

std::vector<std::byte> random_activations(std::int64_t m, std::int64_t k, DType dtype, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 0xd1b54a32d192ed03ull + 7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(std::log(0.1f), std::log(10.0f));
  std::vector<std::byte> x(std::size_t(m * k) * dtype_size(dtype));
  for (std::int64_t v = 0; v < m; ++v) {
    const float scale = std::exp(log_scale(rng));
    for (std::int64_t c = 0; c < k; ++c) {
      float value = scale * normal(rng);
      if (c % 97 == 13) value *= 16.0f;  // a few outlier channels, as in LLM hidden states
      store_f32(x.data(), std::size_t(v * k + c), dtype, value);
    }
  }
  return x;
}

const std::vector<Preset>& presets() {
  // N x K with N the output rows and K the reduction (input) size: "a->b" in a model is K=a, N=b.
  static const std::vector<Preset> all = {
      {"gemma12b", "Gemma-3/4-12B-like: q, kv, o, gate/up, down, tied LM head",
       {{"gemma.q", 4096, 3840},
        {"gemma.kv", 2048, 3840},
        {"gemma.o", 3840, 4096},
        {"gemma.gate_up", 15360, 3840},
        {"gemma.down", 3840, 15360},
        {"gemma.head", 262144, 3840}}},
      {"llama3-8b", "Llama-3-8B: q/o, kv, gate/up, down, LM head",
       {{"llama.q", 4096, 4096},
        {"llama.kv", 1024, 4096},
        {"llama.gate_up", 14336, 4096},
        {"llama.down", 4096, 14336},
        {"llama.head", 128256, 4096}}},
      {"qwen27b", "Qwen-27B-like: o, gate/up, down",
       {{"qwen.o", 5120, 5120}, {"qwen.gate_up", 17408, 5120}, {"qwen.down", 5120, 17408}}},
      {"big", "28672x8192, the anchor shape of the reference measurements", {{"big", 28672, 8192}}},
      {"cpu-default", "the shapes the CPU main job runs: Gemma q and kv, Qwen o (realistic, seconds on 2 cores)",
       {{"gemma.q", 4096, 3840}, {"gemma.kv", 2048, 3840}, {"qwen.o", 5120, 5120}}},
  };
  return all;
}

std::vector<Shape> parse_shapes(std::string_view text) {
  std::vector<Shape> out;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) bad(fmt::format("--shapes: empty item in '{}'", text));
    const auto preset = std::find_if(presets().begin(), presets().end(), [&](const Preset& p) { return p.name == item; });
    if (preset != presets().end()) {
      out.insert(out.end(), preset->shapes.begin(), preset->shapes.end());
      continue;
    }
    const auto x = item.find('x');
    if (x == std::string_view::npos) {
      std::string names;
      for (const auto& p : presets()) names += " " + p.name;
      bad(fmt::format("--shapes: '{}' is neither NxK nor a preset (presets:{})", item, names));
    }
    Shape s{std::string(item), parse_int(item.substr(0, x), "--shapes N"), parse_int(item.substr(x + 1), "--shapes K")};
    out.push_back(s);
  }
  return out;
}

std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view what) {
  std::vector<std::int64_t> out;
  for (std::string_view item : split(text, ',')) {
    const auto dash = item.find('-');
    if (dash != std::string_view::npos && dash > 0) {
      const std::int64_t lo = parse_int(item.substr(0, dash), what), hi = parse_int(item.substr(dash + 1), what);
      if (lo > hi) bad(fmt::format("{}: range '{}' is empty", what, item));
      if (hi - lo > 100000) bad(fmt::format("{}: range '{}' is too long", what, item));
      for (std::int64_t v = lo; v <= hi; ++v) out.push_back(v);
    } else {
      out.push_back(parse_int(item, what));
    }
  }
  return out;
}

std::vector<Kernel> parse_kernels(std::string_view text) {
  std::vector<Kernel> out;
  for (std::string_view item : split(text, ',')) {
    const Kernel k = parse_kernel(item);
    if (std::find(out.begin(), out.end(), k) != out.end()) bad(fmt::format("--kernels: '{}' given twice", item));
    out.push_back(k);
  }
  return out;
}

std::int64_t differing_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  if (a.size() != b.size()) throw std::logic_error("differing_bytes: sizes differ");
  std::int64_t count = 0;
  for (std::size_t i = 0; i < a.size(); ++i) count += a[i] != b[i];
  return count;
}

std::string bytes_digest(std::span<const std::byte> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64-bit
  for (std::byte b : bytes) h = (h ^ std::uint64_t(b)) * 0x100000001b3ull;
  return fmt::format("{:016x}", h);
}

}  // namespace exactq::cli

#include <fstream>

namespace exactq::cli {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(fmt::format("cannot open '{}' for writing", path));
  out << text;
  if (!out) throw std::runtime_error(fmt::format("cannot write '{}'", path));
}

void write_json(const std::string& path, const nlohmann::json& j) { write_text(path, j.dump(2) + "\n"); }

QuantizedMatrix random_quantized(std::int64_t n, std::int64_t k, int bits, int group, DType dtype, std::uint64_t seed) {
  QuantizedMatrix q = QuantizedMatrix::zeros(n, k, bits, group, dtype);
  std::mt19937_64 rng(seed ^ 0x243f6a8885a308d3ull);
  for (std::size_t i = 0; i < q.packed.size(); i += 8) {
    const std::uint64_t r = rng();
    for (std::size_t b = 0; b < 8 && i + b < q.packed.size(); ++b) q.packed[i + b] = std::uint8_t(r >> (8 * b));
  }
  const std::size_t params = std::size_t(n * (k / group));
  const float levels = float((1 << bits) - 1);
  std::uniform_real_distribution<float> range(0.01f, 0.2f);
  for (std::size_t i = 0; i < params; ++i) {
    // A group spanning [-r, r] or so, as trained weights quantized by MLX's rule would.
    const float r = range(rng);
    const bool flip = rng() & 1;
    store_f32(q.scales.data(), i, dtype, (flip ? -2.0f : 2.0f) * r / levels);
    store_f32(q.biases.data(), i, dtype, flip ? r : -r);
  }
  return q;
}

}  // namespace exactq::cli
