// The CPU backend: the bit-exact mirror of the CUDA kernels behind the Backend interface, and the
// cpu::qmv entry point that dispatches to each kernel's file.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "exactq/backend.h"
#include "exactq/mma_layout.h"
#include "ops/cpu/common.h"
#include "ops/cpu/decoder_ops.h"
#include "ops/decoder_checks.h"

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

// The CPU's ops return when done, so the host clock after an op is its end.
class HostTimeline final : public Timeline {
 public:
  void mark() override { marks_.push_back(std::chrono::steady_clock::now()); }
  std::vector<double> intervals_us() override {
    std::vector<double> us;
    for (std::size_t i = 1; i < marks_.size(); ++i)
      us.push_back(std::chrono::duration<double, std::micro>(marks_[i] - marks_[i - 1]).count());
    marks_.clear();
    return us;
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

// Memory of its own, or a view of another buffer's (Backend::view).
class CpuBuffer final : public Buffer {
 public:
  explicit CpuBuffer(std::size_t bytes) : owned_(bytes), bytes_(owned_) {}
  explicit CpuBuffer(std::span<std::byte> view) : bytes_(view) {}
  std::span<std::byte> bytes() override { return bytes_; }
  std::span<const std::byte> bytes() const override { return bytes_; }

 private:
  std::vector<std::byte> owned_;
  std::span<std::byte> bytes_;
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

class CpuDenseMatrix final : public DenseMatrix {
 public:
  CpuDenseMatrix(DType t, std::int64_t n, std::int64_t k, std::span<const std::byte> weight)
      : bytes_(weight.begin(), weight.end()), n_(n), k_(k), dtype_(t) {}
  std::int64_t n() const override { return n_; }
  std::int64_t k() const override { return k_; }
  DType dtype() const override { return dtype_; }
  cpu::DenseWeights weights() const { return {bytes_, n_, k_, dtype_}; }

 private:
  std::vector<std::byte> bytes_;
  std::int64_t n_, k_;
  DType dtype_;
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
const CpuDenseMatrix& own(const DenseMatrix& m) { return own<const CpuDenseMatrix>(m, "dense matrix"); }
std::byte* data(Buffer& b) { return own(b).bytes().data(); }
const std::byte* data(const Buffer& b) { return own(b).bytes().data(); }

// The first `bytes` of a buffer for qmv, which checks the exact size it is given.
std::span<const std::byte> prefix(const Buffer& b, std::size_t bytes) {
  const auto all = own(b).bytes();
  return all.size() >= bytes ? all.first(bytes) : all;
}
std::span<std::byte> prefix(Buffer& b, std::size_t bytes) {
  const auto all = own(b).bytes();
  return all.size() >= bytes ? all.first(bytes) : all;
}

// A token outside the table is refused before any row is read.
void check_tokens(const Buffer& tokens, std::int64_t m, std::int64_t n) {
  const auto* ids = reinterpret_cast<const std::int32_t*>(data(tokens));
  for (std::int64_t i = 0; i < m; ++i)
    if (ids[i] < 0 || ids[i] >= n)
      checks::fail("embed", "token " + std::to_string(ids[i]) + " (row " + std::to_string(i) +
                                ") is outside the table's " + std::to_string(n) + " rows");
}

void check_sizes(std::size_t buffer, std::size_t host, const char* what) {
  if (buffer != host)
    throw std::invalid_argument(std::string("[exactq] ") + what + " of " + std::to_string(host) +
                                " host bytes with a buffer of " + std::to_string(buffer));
}

class CpuBackend final : public Backend {
 public:
  // qmv_isa() here too, so that a bad EXACTQ_CPU_ISA is refused before any work.
  explicit CpuBackend(const QmvOptions& options) : options_(options) {
    validate_options(options);
    cpu::qmv_isa();
  }
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
    const QuantizedMatrixView& v = own(w).view();
    const std::size_t e = dtype_size(v.dtype);
    const bool sane = m >= 1 && m <= (std::int64_t(1) << 24);
    cpu::qmv(kernel, v, sane ? prefix(x, std::size_t(m * v.k) * e) : own(x).bytes(), m,
             sane ? prefix(y, std::size_t(m * v.n) * e) : own(y).bytes(), options_);
  }

  std::unique_ptr<DenseMatrix> load_dense(DType t, std::int64_t n, std::int64_t k,
                                          std::span<const std::byte> weight) override {
    checks::load_dense(t, n, k, weight);
    return std::make_unique<CpuDenseMatrix>(t, n, k, weight);
  }
  void copy(const Buffer& from, std::size_t from_offset, Buffer& to, std::size_t to_offset, std::size_t bytes) override {
    checks::copy(own(from), from_offset, own(to), to_offset, bytes);
    if (bytes > 0) std::memcpy(data(to) + to_offset, data(from) + from_offset, bytes);
  }
  void copy_rows(const Buffer& from, std::size_t from_offset, std::size_t from_pitch, Buffer& to, std::size_t to_offset,
                 std::size_t to_pitch, std::size_t row_bytes, std::int64_t rows) override {
    checks::copy_rows(own(from), from_offset, from_pitch, own(to), to_offset, to_pitch, row_bytes, rows);
    for (std::int64_t i = 0; i < rows; ++i)
      std::memcpy(data(to) + to_offset + std::size_t(i) * to_pitch, data(from) + from_offset + std::size_t(i) * from_pitch,
                  row_bytes);
  }
  void dense_mv(const DenseMatrix& w, const Buffer& x, std::int64_t m, Buffer& y) override {
    checks::dense_mv(own(w), own(x), m, own(y));
    cpu::dense_mv(own(w).weights(), data(x), m, data(y), options_.threads);
  }
  void embed(const Matrix& table, const Buffer& tokens, std::int64_t m, Buffer& out) override {
    const QuantizedMatrixView& v = own(table).view();
    checks::embed(v.n, v.k, v.dtype, own(tokens), m, own(out));
    check_tokens(tokens, m, v.n);
    cpu::embed_quantized(v, reinterpret_cast<const std::int32_t*>(data(tokens)), m, data(out), options_.threads);
  }
  void embed(const DenseMatrix& table, const Buffer& tokens, std::int64_t m, Buffer& out) override {
    checks::embed(table.n(), table.k(), table.dtype(), own(tokens), m, own(out));
    check_tokens(tokens, m, table.n());
    cpu::embed_dense(own(table).weights(), reinterpret_cast<const std::int32_t*>(data(tokens)), m, data(out));
  }
  void rmsnorm(const Buffer& x, const Buffer& weight, std::int64_t rows, std::int64_t h, DType t, float eps,
               bool one_plus_weight, Buffer& y) override {
    checks::rmsnorm(own(x), own(weight), rows, h, t, eps, own(y));
    cpu::rmsnorm(data(x), data(weight), rows, h, t, eps, one_plus_weight, data(y), options_.threads);
  }
  void add_rmsnorm(Buffer& h, const Buffer& delta, const Buffer& weight, std::int64_t rows, std::int64_t width, DType t,
                   float eps, bool one_plus_weight, Buffer& y) override {
    checks::add_rmsnorm(own(h), own(delta), own(weight), rows, width, t, eps, own(y));
    cpu::add(data(h), data(delta), rows * width, t, data(h));
    cpu::rmsnorm(data(h), data(weight), rows, width, t, eps, one_plus_weight, data(y), options_.threads);
  }
  void rope(Buffer& x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t, const Buffer& positions,
            const Buffer& steps, bool interleaved) override {
    checks::rope(own(x), m, heads, head_dim, t, own(positions), own(steps));
    const auto* p = reinterpret_cast<const std::int32_t*>(data(positions));
    checks::positions_in_range("rope", p, m, std::numeric_limits<std::int32_t>::max());
    cpu::rope(data(x), m, heads, head_dim, t, p, reinterpret_cast<const std::uint64_t*>(data(steps)), interleaved,
              options_.threads);
  }
  void write_rows(const Buffer& rows, const Buffer& positions, std::int64_t m, std::size_t row_bytes,
                  Buffer& cache) override {
    checks::write_rows(own(rows), own(positions), m, row_bytes, own(cache));
    const auto* p = reinterpret_cast<const std::int32_t*>(data(positions));
    checks::positions_in_range("write_rows", p, m, std::int64_t(own(cache).size() / row_bytes) - 1);
    cpu::write_rows(data(rows), p, m, row_bytes, data(cache));
  }
  void rope_write(Buffer& q, Buffer& k, const Buffer& v, std::int64_t m, std::int64_t heads, std::int64_t kv_heads,
                  std::int64_t head_dim, DType t, const Buffer& positions, const Buffer& cache_rows,
                  const Buffer& steps, bool interleaved, Buffer& keys, Buffer& values) override {
    checks::rope_write(own(q), own(k), own(v), m, heads, kv_heads, head_dim, t, own(positions), own(cache_rows),
                       own(steps), own(keys), own(values));
    const std::size_t row = std::size_t(kv_heads * head_dim) * dtype_size(t);
    const auto* p = reinterpret_cast<const std::int32_t*>(data(positions));
    checks::positions_in_range("rope_write", p, m, std::numeric_limits<std::int32_t>::max());
    checks::cache_rows_in_range("rope_write", p, reinterpret_cast<const std::int32_t*>(data(cache_rows)), m,
                                std::int64_t(std::min(own(keys).size(), own(values).size()) / row));
    rope(q, m, heads, head_dim, t, positions, steps, interleaved);
    rope(k, m, kv_heads, head_dim, t, positions, steps, interleaved);
    write_rows(k, cache_rows, m, row, keys);
    write_rows(v, cache_rows, m, row, values);
  }
  void attention(const Buffer& q, const Buffer& keys, const Buffer& values, std::int64_t m, const Buffer& positions,
                 const Buffer& cache_rows, std::int64_t max_position, const AttentionShape& shape, DType t,
                 Buffer& out) override {
    checks::attention(own(q), own(keys), own(values), m, own(positions), own(cache_rows), max_position, shape, t,
                      own(out));
    const auto* p = reinterpret_cast<const std::int32_t*>(data(positions));
    const auto* rows = reinterpret_cast<const std::int32_t*>(data(cache_rows));
    checks::positions_in_range("attention", p, m, max_position);
    const std::size_t row = std::size_t(shape.kv_heads * shape.head_dim) * dtype_size(t);
    checks::cache_rows_in_range("attention", p, rows, m,
                                std::int64_t(std::min(own(keys).size(), own(values).size()) / row));
    cpu::attention(data(q), data(keys), data(values), m, p, rows, shape, t, data(out), options_.threads);
  }
  void gated_activation(const Buffer& gate, const Buffer& up, std::int64_t count, Activation act, DType t,
                        Buffer& out) override {
    checks::gated_activation(own(gate), own(up), count, act, t, own(out));
    cpu::gated_activation(data(gate), data(up), count, act, t, data(out), options_.threads);
  }
  void add(const Buffer& a, const Buffer& b, std::int64_t count, DType t, Buffer& out) override {
    checks::elementwise("add", count, t, {&own(a), &own(b), &own(out)});
    cpu::add(data(a), data(b), count, t, data(out));
  }
  void add_bias(Buffer& y, const Buffer& bias, std::int64_t m, std::int64_t n, DType t) override {
    checks::add_bias(own(y), own(bias), m, n, t);
    cpu::add_bias(data(y), data(bias), m, n, t);
  }
  void scale(Buffer& x, std::int64_t count, float factor, DType t) override {
    checks::elementwise("scale", count, t, {&own(x)});
    cpu::scale(data(x), count, factor, t);
  }
  void argmax(const Buffer& logits, std::int64_t m, std::int64_t n, DType t, Buffer& indices) override {
    checks::argmax(own(logits), m, n, t, own(indices));
    cpu::argmax(data(logits), m, n, t, reinterpret_cast<std::int32_t*>(data(indices)));
  }
  void synchronize() override {}
  std::unique_ptr<Timeline> timeline() override { return std::make_unique<HostTimeline>(); }
  std::unique_ptr<Buffer> view(Buffer& b, std::size_t offset, std::size_t bytes) override {
    checks::view(own(b), offset, bytes);
    return std::make_unique<CpuBuffer>(own(b).bytes().subspan(offset, bytes));
  }
  // The CPU runs every op as it comes: nothing to capture.
  std::unique_ptr<Graph> capture(const std::function<void()>&) override { return nullptr; }
  bool replay(const Graph&) override { return false; }
  const QmvOptions& options() const override { return options_; }

 private:
  QmvOptions options_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const QmvOptions& options) { return std::make_unique<CpuBackend>(options); }

}  // namespace exactq
